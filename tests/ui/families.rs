//! SDXL in the app with the real engine: the family shown, the second prompt, the refiner
//! picked from the models folder, and the saved image equal to `ember generate`'s.

use std::path::Path;

use egui_kittest::kittest::Queryable;
use ember_app::gui::action::Action;
use ember_app::gui::paths::Paths;
use ember_tests::reference;
use inference::imaging::read_png_text;
use inference::metadata::Parameters;

use crate::{app, click, drop_files, open, step_until};

/// Copies a reference folder (one level of subfolders) to `to`.
fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.path().is_dir() {
            copy_folder(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn sdxl_with_a_refiner_from_the_models_folder_makes_the_clis_image() {
    use inference::device::{DeviceKind, Precision};
    let home = tempfile::tempdir().unwrap();
    let models = home.path().join("models");
    copy_folder(&reference("sdxl/refiner"), &models.join("xl-refiner"));
    let engine =
        inference::worker::BurnEngine::new(DeviceKind::Cpu.device().unwrap(), Precision::F32);
    let mut w = open(engine, Paths::under(home.path()));
    w.step();
    drop_files(&mut w, &[&reference("sdxl/pipeline")]);
    step_until(&mut w, "the SDXL model to load", |a| {
        a.session.model().is_some()
    });
    w.get_by_label("SDXL");

    // The second prompt is offered for SDXL, under Advanced.
    click(&mut w, "Advanced");
    w.get_by_label("Second prompt").focus();
    w.step();
    w.get_by_label("Second prompt").type_text("an oil painting");
    w.step();
    assert_eq!(app(&w).settings.prompt_2, "an oil painting");
    // So is SDXL's size conditioning: unticking "the image size" gives a size to edit.
    click(&mut w, "Original size: the image size");
    assert_eq!(
        app(&w).settings.size_conditioning.original,
        Some((1024, 1024))
    );

    // The refiner comes from the models folder, listed by its detected family.
    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::SetModelsFolder(models.clone()));
    step_until(&mut w, "the models folder scan", |a| {
        a.models.iter().any(|m| m.family.contains("refiner"))
    });
    click(&mut w, "Refiner");
    click(&mut w, "Refiner model");
    click(&mut w, "xl-refiner");
    step_until(&mut w, "the refiner to load", |a| {
        a.session.refiner().is_some()
    });
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        s.prompt = "a lighthouse".into();
        s.steps = 6;
        s.cfg_scale = 5.0;
        s.sampler = inference::schedule::named::SamplerName::Euler;
        s.schedule = inference::schedule::named::ScheduleName::Normal;
        s.seed = 77;
        s.seed_locked = true;
        (s.width, s.height) = (32, 32);
        s.refiner.switch_at = 0.6;
        s.size_conditioning.original = Some((64, 40));
    }
    click(&mut w, "Generate");
    step_until(&mut w, "the image to be saved", |a| {
        !a.display.results.is_empty() && a.display.results.iter().all(|s| s.path.is_some())
    });
    let saved = app(&w).display.results[0].path.clone().unwrap();
    let text = read_png_text(&saved).unwrap();
    let params = Parameters::parse(&text.iter().find(|(k, _)| k == "parameters").unwrap().1);
    assert_eq!(params.get("Refiner"), Some("xl-refiner"));
    assert_eq!(params.get("Refiner switch at"), Some("0.6"));
    assert_eq!(params.get("Prompt 2"), Some("an oil painting"));
    assert_eq!(params.get("Aesthetic score"), Some("6"));
    assert_eq!(params.get("Original size"), Some("64x40"));

    // The CLI with the same settings makes the same picture.
    let cli_out = home.path().join("cli.png");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
        .env("EMBER_DEVICE", "cpu")
        .args(["generate", "--model"])
        .arg(reference("sdxl/pipeline"))
        .arg("--refiner")
        .arg(models.join("xl-refiner"))
        .args([
            "--refiner-switch",
            "0.6",
            "--prompt",
            "a lighthouse",
            "--prompt-2",
            "an oil painting",
            "--steps",
            "6",
            "--cfg",
            "5",
            "--sampler",
            "euler",
            "--schedule",
            "normal",
            "--seed",
            "77",
            "--width",
            "32",
            "--height",
            "32",
            "--original-size",
            "64x40",
            "--out",
        ])
        .arg(&cli_out)
        .env("EMBER_CACHE_DIR", home.path().join("cache"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (ours, theirs) = (image::open(&saved).unwrap(), image::open(&cli_out).unwrap());
    assert_eq!(
        ours.to_rgb8().into_raw(),
        theirs.to_rgb8().into_raw(),
        "the app's image is the CLI's"
    );
}
