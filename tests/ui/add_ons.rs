//! Add-ons in the window on the real engine. The form's ControlNet section: a unit added by
//! its button, its image dropped on it, the map shown, the image the window makes equal to
//! `ember generate`'s with the same ControlNet flags, the unit restored from that image's
//! metadata. LoRAs: a prompt's `<lora:…>` tag found in the models folder's `Lora/` makes the
//! image `ember generate --lora` makes; a slider for each LoRA the prompt names.

use egui_kittest::kittest::Queryable;
use ember_app::gui::action::{Action, ControlAction};
use ember_app::gui::controlnet::ControlUnitSettings;
use ember_tests::reference;

use crate::{app, click, drop_files, has_notice, open_with_reference_model, step_until};

#[test]
fn a_controlnet_unit_makes_the_command_lines_image_and_is_restored() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open_with_reference_model(home.path());
    let controlnet = reference("sd15/controlnet");
    let control_image = reference("sd15/controlnet/input_control.png");
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        (s.width, s.height) = (24, 40);
        s.prompt = "a house in the forest".into();
        s.negative_prompt = "blurry".into();
        s.steps = 3;
        s.cfg_scale = 7.5;
        s.sampler = inference::schedule::named::SamplerName::Euler;
        s.schedule = inference::schedule::named::ScheduleName::Normal;
        s.seed = 99;
        s.seed_locked = true;
    }
    click(&mut w, "ControlNet");
    click(&mut w, "Add ControlNet unit");
    assert_eq!(app(&w).settings.controlnet.len(), 1);
    assert!(
        w.query_by_label("Preprocessor").is_some(),
        "the unit's fields show"
    );

    // On without a model or image: Generate says what to choose, nothing is queued.
    click(&mut w, "Generate");
    assert!(has_notice(app(&w), "ControlNet 0: choose its model"));
    assert!(app(&w).session.running.is_none());

    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::Control(ControlAction::SetModel {
            unit: 0,
            path: controlnet.clone(),
        }));
    // A file dropped with the pointer over the unit is its image.
    w.get_by_label("Open image…").hover();
    w.step();
    drop_files(&mut w, &[&control_image]);
    step_until(&mut w, "the control image to be read", |a| {
        a.controls.units.first().is_some_and(|u| u.image.is_some())
    });
    w.step();
    assert!(
        app(&w).controls.units[0].preview.is_some(),
        "the map is drawn beside the unit"
    );

    click(&mut w, "Generate");
    step_until(&mut w, "the image to be saved", |a| {
        !a.display.results.is_empty() && a.display.results.iter().all(|s| s.path.is_some())
    });
    let from_window = app(&w).display.results[0].path.clone().unwrap();

    let cli_png = home.path().join("cli.png");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
        .env("EMBER_DEVICE", "cpu")
        .args(["generate", "--model"])
        .arg(reference("sd15/pipeline"))
        .args(["--prompt", "a house in the forest", "--negative", "blurry"])
        .args([
            "--steps", "3", "--cfg", "7.5", "--seed", "99", "--width", "24",
        ])
        .args([
            "--height",
            "40",
            "--sampler",
            "euler",
            "--schedule",
            "normal",
        ])
        .arg("--controlnet")
        .arg(&controlnet)
        .arg("--control-image")
        .arg(&control_image)
        .arg("--out")
        .arg(&cli_png)
        .status()
        .unwrap();
    assert!(status.success());
    let a = image::open(&from_window).unwrap().to_rgb8();
    let b = image::open(&cli_png).unwrap().to_rgb8();
    assert!(a == b, "the window's image equals the command line's");

    // Restoring the image's settings brings the unit back as it was.
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        s.controlnet[0].weight = 0.3;
        s.controlnet[0].resize = inference::canvas::FitMode::Fill;
        s.controlnet.push(ControlUnitSettings::default());
    }
    drop_files(&mut w, &[&from_window]);
    step_until(&mut w, "the settings to be restored", |a| {
        a.settings.controlnet[0].weight == 1.0
    });
    let units = &app(&w).settings.controlnet;
    assert_eq!(units[0].resize, inference::canvas::FitMode::Crop);
    assert_eq!(units[0].model.as_ref(), Some(&controlnet), "found by name");
    assert!(
        units[0].enabled && !units[1].enabled,
        "the unused unit is off"
    );
}

#[test]
fn each_lora_in_the_prompt_gets_a_weight_slider() {
    let home = tempfile::tempdir().unwrap();
    let mut w = crate::open(
        ember_tests::fake_engine::FakeEngine::new(std::time::Duration::from_millis(1)),
        ember_app::gui::paths::Paths::under(home.path()),
    );
    w.step();
    // Weights off the slider's step and range.
    let prompt = "a cat <lora:ink:0.82> <lora:pen:0.5:3>";
    w.state_mut().as_mut().unwrap().settings.prompt = prompt.into();
    w.step();
    click(&mut w, "LoRA weights (2)");
    for _ in 0..3 {
        w.step();
    }
    assert_eq!(
        app(&w).settings.prompt,
        prompt,
        "showing the sliders changes nothing"
    );
    assert!(
        w.query_all_by_label("ink").next().is_some(),
        "a slider for ink"
    );
    assert!(
        w.query_all_by_label("text encoder").next().is_some(),
        "pen's split weights"
    );
}

#[test]
fn a_lora_tag_makes_the_command_lines_image() {
    use ember_app::gui::action::Action;

    let home = tempfile::tempdir().unwrap();
    let models = home.path().join("models");
    std::fs::create_dir_all(models.join("Lora")).unwrap();
    let lora = models.join("Lora/kohya.safetensors");
    std::fs::copy(reference("sd15/lora/lora_kohya.safetensors"), &lora).unwrap();
    let mut w = open_with_reference_model(home.path());
    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::SetModelsFolder(models));
    step_until(&mut w, "the scan", |a| !a.models.is_empty());
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        (s.width, s.height) = (24, 40);
        s.prompt = "a photograph of an astronaut riding a horse <lora:kohya:0.8>".into();
        s.negative_prompt = "blurry, low quality".into();
        s.steps = 3;
        s.cfg_scale = 7.5;
        s.sampler = inference::schedule::named::SamplerName::Euler;
        s.schedule = inference::schedule::named::ScheduleName::Normal;
        s.seed = 1234;
        s.seed_locked = true;
    }
    click(&mut w, "Generate");
    step_until(&mut w, "the image to be saved", |a| {
        !a.display.results.is_empty() && a.display.results.iter().all(|s| s.path.is_some())
    });
    let from_window = app(&w).display.results[0].path.clone().unwrap();
    let text = inference::imaging::read_png_text(&from_window).unwrap();
    let parameters = &text.iter().find(|(k, _)| k == "parameters").unwrap().1;
    assert!(
        parameters.contains("Lora hashes: \"kohya: "),
        "{parameters}"
    );

    // The same settings from the command line, with the LoRA as a flag, and without it.
    let cli = |lora: Option<String>, out: &std::path::Path| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ember"));
        command
            .env("EMBER_DEVICE", "cpu")
            .args(["generate", "--model"])
            .arg(reference("sd15/pipeline"))
            .args(["--prompt", "a photograph of an astronaut riding a horse"])
            .args([
                "--negative",
                "blurry, low quality",
                "--steps",
                "3",
                "--cfg",
                "7.5",
            ])
            .args(["--seed", "1234", "--width", "24", "--height", "40"])
            .args(["--sampler", "euler", "--schedule", "normal"]);
        if let Some(lora) = lora {
            command.args(["--lora", &lora]);
        }
        assert!(command.arg("--out").arg(out).status().unwrap().success());
        image::open(out).unwrap().to_rgb8()
    };
    let a = image::open(&from_window).unwrap().to_rgb8();
    let with_lora = cli(
        Some(format!("{}:0.8", lora.display())),
        &home.path().join("cli.png"),
    );
    assert!(
        a == with_lora,
        "the window's image equals the command line's"
    );
    // And differs from the image without the LoRA (the tag did something).
    let plain_png = home.path().join("plain.png");
    let plain = cli(None, &plain_png);
    assert!(a != plain);
}
