//! The live preview in the window: the Advanced menu reaches the job with the models
//! folder's TAESD folders and is remembered; on the real engine a `taesd_decoder.pth` in the
//! models folder's `VAE-taesd/` draws previews eight times the latent colours' size.

use std::time::Duration;

use ember_app::gui::paths::Paths;
use ember_tests::fake_engine::FakeEngine;
use inference::preview::PreviewMethod;

use crate::{app, click, open, open_with_reference_model, step_until};

#[test]
fn the_live_preview_menu_reaches_the_job_and_is_remembered() {
    let home = tempfile::tempdir().unwrap();
    let paths = Paths::under(home.path());
    let models = home.path().join("models");
    std::fs::create_dir_all(models.join("VAE-taesd")).unwrap();
    let mut w = open(FakeEngine::new(Duration::from_millis(1)), paths.clone());
    w.state_mut().as_mut().unwrap().settings.models_dir = Some(models.clone());
    w.step();
    let preview = app(&w).request().unwrap().preview;
    assert_eq!(
        preview.method,
        PreviewMethod::Auto,
        "TAESD when it is there"
    );
    assert_eq!(preview.taesd_dirs, [models.join("VAE-taesd")]);
    click(&mut w, "Advanced");
    click(&mut w, "Live preview");
    click(&mut w, "Latent colours (fast)");
    assert_eq!(
        app(&w).request().unwrap().preview.method,
        PreviewMethod::LatentColours
    );
    w.state_mut().as_mut().unwrap().save_settings();
    drop(w);
    let w = open(FakeEngine::new(Duration::from_millis(1)), paths);
    assert_eq!(
        app(&w).settings.preview,
        PreviewMethod::LatentColours,
        "kept in settings.json"
    );
}

/// The size of the first preview a generation with `method` shows.
fn first_preview_size(w: &mut crate::Window, method: PreviewMethod) -> [usize; 2] {
    {
        let a = w.state_mut().as_mut().unwrap();
        a.settings.preview = method;
        a.display.preview = None;
    }
    click(w, "Generate");
    step_until(w, "a preview", |a| a.display.preview.is_some());
    let size = app(w).display.preview.as_ref().unwrap().size();
    step_until(w, "the job to end", |a| {
        a.session.running.is_none() && a.session.queue.is_empty()
    });
    size
}

#[test]
fn a_taesd_decoder_in_the_models_folder_draws_full_size_previews() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open_with_reference_model(home.path());
    let models = home.path().join("models");
    std::fs::create_dir_all(models.join("VAE-taesd")).unwrap();
    std::fs::copy(
        ember_tests::extra("taesd/taesd_decoder.pth"),
        models.join("VAE-taesd/taesd_decoder.pth"),
    )
    .unwrap();
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        s.models_dir = Some(models);
        (s.width, s.height) = (48, 32);
        s.steps = 3;
    }
    let [w0, h0] = first_preview_size(&mut w, PreviewMethod::LatentColours);
    let [w1, h1] = first_preview_size(&mut w, PreviewMethod::Auto);
    assert_eq!(
        (w1, h1),
        (8 * w0, 8 * h0),
        "TAESD's picture is eight latents wide"
    );
}
