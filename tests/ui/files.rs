//! Files on the command line (what a desktop entry's `%F` passes): a checkpoint loads instead
//! of the last model; an image restores its settings.

use std::time::Duration;

use egui_kittest::Harness;
use ember_app::gui::app::EmberApp;
use ember_app::gui::paths::Paths;
use ember_tests::fake_engine::FakeEngine;

use crate::{Window, app, fake_model, step_until};

fn open_with(home: &std::path::Path, files: Vec<std::path::PathBuf>) -> Window {
    let mut pending = Some(files);
    let paths = Paths::under(home);
    Harness::builder()
        .with_size([1280.0, 820.0])
        .build_ui_state(
            move |ui, state: &mut Option<EmberApp>| {
                let app = state.get_or_insert_with(|| {
                    let files = pending.take().expect("created once");
                    EmberApp::with_files(
                        ui.ctx(),
                        FakeEngine::new(Duration::ZERO),
                        paths.clone(),
                        files,
                    )
                });
                app.frame(ui);
            },
            None,
        )
}

#[test]
fn a_checkpoint_on_the_command_line_loads_instead_of_the_last_model() {
    let home = tempfile::tempdir().unwrap();
    let last = fake_model(home.path());
    let given = home.path().join("given.safetensors");
    std::fs::write(&given, b"fake").unwrap();
    // A previous session left `last` as the model to load at start.
    let settings = ember_app::gui::settings::Settings {
        last_model: Some(last.clone()),
        ..Default::default()
    };
    ember_app::gui::settings::SettingsFile::in_dir(&home.path().join("config"))
        .save(&settings)
        .unwrap();
    let mut w = open_with(home.path(), vec![given.clone()]);
    step_until(&mut w, "the given model to load", |a| {
        a.session.model().is_some()
    });
    assert_eq!(app(&w).session.model().unwrap().path, given);
}

#[test]
fn an_image_on_the_command_line_restores_its_settings() {
    let home = tempfile::tempdir().unwrap();
    let image = home.path().join("keeper.png");
    let pixels = inference::imaging::ImageRgb8 {
        width: 8,
        height: 8,
        pixels: vec![128; 8 * 8 * 3],
    };
    let text = "a misty harbour at dawn\nNegative prompt: blurry\nSteps: 31, Sampler: Euler, \
                CFG scale: 5.5, Seed: 99, Size: 640x448";
    let png = inference::imaging::encode_png(&pixels, &[("parameters", text)]).unwrap();
    std::fs::write(&image, png).unwrap();
    let mut w = open_with(home.path(), vec![image]);
    step_until(&mut w, "the settings to be restored", |a| {
        a.settings.prompt == "a misty harbour at dawn"
    });
    let s = &app(&w).settings;
    assert_eq!(
        (s.steps, s.cfg_scale, s.width, s.height),
        (31, 5.5, 640, 448)
    );
    assert_eq!(s.negative_prompt, "blurry");
}

/// A model and an image that names none (`ember model.safetensors image.png`): the image's
/// size is kept when the model loads, as a size typed while it loads would be, not scaled
/// from the last model's native side.
#[test]
fn an_image_s_size_stays_when_the_model_beside_it_loads() {
    let home = tempfile::tempdir().unwrap();
    let image = home.path().join("sized.png");
    let pixels = inference::imaging::ImageRgb8 {
        width: 8,
        height: 8,
        pixels: vec![40; 8 * 8 * 3],
    };
    let text = "a lantern\nSteps: 12, Sampler: Euler, CFG scale: 7, Seed: 5, Size: 96x160";
    let png = inference::imaging::encode_png(&pixels, &[("parameters", text)]).unwrap();
    std::fs::write(&image, png).unwrap();
    let model = home.path().join("slow-model.safetensors");
    std::fs::write(&model, b"fake").unwrap();
    let mut w = open_with(home.path(), vec![model, image]);
    step_until(&mut w, "the restore while the model loads", |a| {
        a.session.model().is_none() && a.settings.prompt == "a lantern"
    });
    step_until(&mut w, "the model to load", |a| a.session.model().is_some());
    let s = &app(&w).settings;
    assert_eq!((s.width, s.height), (96, 160), "the image's own size");
}
