//! The window driving the real engine on the reference model: the image it saves is the
//! one `ember generate` makes with the same settings.

use ember_tests::reference;

use crate::{app, click, open_with_reference_model, step_until};

#[test]
fn the_window_makes_the_same_png_as_the_command_line() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open_with_reference_model(home.path());
    let native = app(&w).session.model().unwrap().native_size;
    assert_eq!(
        (app(&w).settings.width, app(&w).settings.height),
        native,
        "the default 512×512 follows the model to its native size"
    );
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        // The reference model's native size (tiny UNet) keeps this quick.
        s.width = 64;
        s.height = 64;
        s.prompt = "a lighthouse".into();
        s.steps = 4;
        s.cfg_scale = 7.0;
        s.sampler = inference::schedule::named::SamplerName::Euler;
        s.schedule = inference::schedule::named::ScheduleName::Normal;
        s.seed = 11;
        s.seed_locked = true;
    }
    click(&mut w, "Generate");
    step_until(&mut w, "the image to be saved", |a| {
        !a.display.results.is_empty() && a.display.results.iter().all(|s| s.path.is_some())
    });
    let from_window = app(&w).display.results[0].path.clone().unwrap();
    drop(w);

    let cli_png = home.path().join("cli.png");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
        .env("EMBER_DEVICE", "cpu")
        .args(["generate", "--model"])
        .arg(reference("sd15/pipeline"))
        .args([
            "--prompt",
            "a lighthouse",
            "--steps",
            "4",
            "--cfg",
            "7",
            "--seed",
            "11",
        ])
        .args([
            "--width",
            "64",
            "--height",
            "64",
            "--sampler",
            "euler",
            "--schedule",
            "normal",
        ])
        .arg("--out")
        .arg(&cli_png)
        .status()
        .unwrap();
    assert!(status.success());
    let a = image::open(&from_window).unwrap().to_rgb8();
    let b = image::open(&cli_png).unwrap().to_rgb8();
    assert_eq!(a.dimensions(), (64, 64));
    assert!(a == b, "the window's image equals the command line's");
}
