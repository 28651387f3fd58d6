//! The Extras view and the form's Hires. fix section on the real engine: each makes the PNG
//! `ember upscale` / `ember generate --hires-*` makes, and a hires image restores the section.

use std::path::Path;

use egui_kittest::kittest::Queryable;
use ember_tests::{read_png_rgb, reference};
use inference::device::{DeviceKind, Precision};

use crate::{app, click, drop_files, open, open_with_reference_model, step_until};

fn ember(args: &[&str]) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn text_chunk(path: &Path, key: &str) -> Option<String> {
    inference::imaging::read_png_text(path)
        .unwrap()
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

#[test]
fn the_extras_view_upscales_as_ember_upscale_does_and_keeps_the_parameters() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // A models folder with an upscaler in ESRGAN/, and an image with A1111 parameters.
    let esrgan = h.join("models/ESRGAN");
    std::fs::create_dir_all(&esrgan).unwrap();
    let model = esrgan.join("2x-tiny.safetensors");
    std::fs::copy(reference("upscale/esrgan_x2_tiny.safetensors"), &model).unwrap();
    let source = h.join("source.png");
    let image =
        inference::imaging::load_rgb(&reference("sd15/controlnet/canny_input.png"), None).unwrap();
    let parameters = "a fox\nSteps: 4, Seed: 5, Size: 64x48";
    let png = inference::imaging::encode_png(&image, &[("parameters", parameters)]).unwrap();
    std::fs::write(&source, png).unwrap();

    let engine =
        inference::worker::BurnEngine::new(DeviceKind::Cpu.device().unwrap(), Precision::F32);
    let mut w = open(engine, ember_app::gui::paths::Paths::under(h));
    w.step();
    w.state_mut().as_mut().unwrap().settings.models_dir = Some(h.join("models"));
    click(&mut w, "Extras");
    assert_eq!(app(&w).view, ember_app::gui::action::View::Extras);
    drop_files(&mut w, &[&source]);
    step_until(&mut w, "the image to be read", |a| {
        a.extras.source.is_some()
    });
    assert!(
        w.query_by_label("Upscale").is_some(),
        "the Upscale button shows"
    );
    // The Upscaler list offers the models folder's ESRGAN/ models by name.
    click(&mut w, "Upscaler");
    click(&mut w, "2x-tiny");
    assert_eq!(
        app(&w).settings.extras.upscaler.as_deref(),
        Some(model.as_path())
    );
    w.state_mut().as_mut().unwrap().settings.extras.scale = 2.0;
    w.step();
    assert!(w.query_by_label_contains("64×48 to 128×96").is_some());
    click(&mut w, "Upscale");
    step_until(&mut w, "the upscale to be saved", |a| {
        a.display.results_job == a.extras.job
            && a.display.results.first().is_some_and(|r| r.path.is_some())
    });
    let saved = app(&w).display.results[0].path.clone().unwrap();
    drop(w);

    let cli = h.join("cli.png");
    ember(&[
        "upscale",
        source.to_str().unwrap(),
        "--model",
        model.to_str().unwrap(),
        "--scale",
        "2",
        "--out",
        cli.to_str().unwrap(),
    ]);
    let (ww, wh, window_pixels) = read_png_rgb(&saved);
    assert_eq!((ww, wh), (128, 96));
    assert_eq!(
        window_pixels,
        read_png_rgb(&cli).2,
        "the window's upscale is the CLI's"
    );
    assert_eq!(
        text_chunk(&saved, "parameters").as_deref(),
        Some(parameters)
    );
    assert_eq!(
        text_chunk(&saved, "extras").as_deref(),
        Some("Postprocess upscale by: 2, Postprocess upscaler: 2x-tiny")
    );
    assert!(
        saved
            .file_name()
            .unwrap()
            .to_string_lossy()
            .ends_with("-5.png"),
        "named by the source's seed"
    );
}

#[test]
fn the_hires_section_makes_the_cli_image_and_restores_from_it() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open_with_reference_model(home.path());
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        s.width = 32;
        s.height = 48;
        s.prompt = "a lighthouse".into();
        s.steps = 4;
        s.cfg_scale = 6.0;
        s.sampler = inference::schedule::named::SamplerName::Euler;
        s.schedule = inference::schedule::named::ScheduleName::Normal;
        s.seed = 21;
        s.seed_locked = true;
    }
    click(&mut w, "Hires. fix");
    click(&mut w, "Hires. fix on");
    assert!(app(&w).settings.hires.enabled, "the checkbox turns it on");
    {
        let hires = &mut w.state_mut().as_mut().unwrap().settings.hires;
        hires.upscaler = "Lanczos".into();
        hires.steps = 3;
        hires.strength = 0.55;
    }
    w.step();
    assert!(w.query_by_label_contains("From 32×48 to 64×96").is_some());
    click(&mut w, "Generate");
    step_until(&mut w, "the hires image to be saved", |a| {
        !a.display.results.is_empty() && a.display.results.iter().all(|s| s.path.is_some())
    });
    let from_window = app(&w).display.results[0].path.clone().unwrap();

    let cli = home.path().join("cli.png");
    let model = reference("sd15/pipeline");
    ember(&[
        "generate",
        "--model",
        model.to_str().unwrap(),
        "--prompt",
        "a lighthouse",
        "--steps",
        "4",
        "--cfg",
        "6",
        "--seed",
        "21",
        "--width",
        "32",
        "--height",
        "48",
        "--sampler",
        "euler",
        "--schedule",
        "normal",
        "--hires-upscaler",
        "Lanczos",
        "--hires-steps",
        "3",
        "--hires-strength",
        "0.55",
        "--out",
        cli.to_str().unwrap(),
    ]);
    let (width, height, pixels) = read_png_rgb(&from_window);
    assert_eq!((width, height), (64, 96));
    assert_eq!(
        pixels,
        read_png_rgb(&cli).2,
        "the window's hires image is the CLI's"
    );

    // Dropping the CLI's image restores the section from its A1111 fields.
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        s.hires = Default::default();
    }
    drop_files(&mut w, &[&cli]);
    step_until(&mut w, "the settings to be restored", |a| {
        a.settings.hires.enabled
    });
    let hires = &app(&w).settings.hires;
    assert_eq!((hires.scale, hires.steps, hires.strength), (2.0, 3, 0.55));
    assert_eq!(hires.upscaler, "Lanczos");
    assert_eq!((app(&w).settings.width, app(&w).settings.height), (32, 48));
}
