//! The VAE menu of the model panel (A1111's SD VAE): it lists the models folder's VAE files
//! and diffusers VAE folders, its choice reaches the job and is remembered, and a restored
//! image chooses the VAE it names (or says the folder lacks it).

use std::time::Duration;

use ember_app::gui::action::Action;
use ember_app::gui::paths::Paths;
use ember_tests::fake_engine::FakeEngine;
use inference::api::VaeChoice;

use crate::{a1111_png, app, click, drop_files, has_notice, open, step_until, with_fake_model};

/// A models folder holding a VAE file and a diffusers VAE folder in `VAE/`.
fn models_with_vaes(home: &std::path::Path) -> std::path::PathBuf {
    let models = home.join("models");
    let vaes = models.join("VAE");
    std::fs::create_dir_all(vaes.join("fp16-fix")).unwrap();
    std::fs::write(vaes.join("sdxl_vae.safetensors"), b"vae").unwrap();
    std::fs::write(vaes.join("fp16-fix/config.json"), b"{}").unwrap();
    std::fs::write(
        vaes.join("fp16-fix/diffusion_pytorch_model.safetensors"),
        b"w",
    )
    .unwrap();
    models
}

#[test]
fn the_vae_menu_lists_the_folders_vaes_and_its_choice_reaches_the_job() {
    let home = tempfile::tempdir().unwrap();
    let models = models_with_vaes(home.path());
    let paths = Paths::under(home.path());
    let mut w = open(FakeEngine::new(Duration::from_millis(1)), paths.clone());
    w.step();
    (w.state_mut().as_mut().unwrap()).perform(Action::SetModelsFolder(models.clone()));
    step_until(&mut w, "the scan", |a| a.models.len() == 2);
    assert_eq!(app(&w).request().unwrap().vae, VaeChoice::Automatic);
    click(&mut w, "VAE");
    click(&mut w, "fp16-fix");
    let folder = models.join("VAE/fp16-fix");
    assert_eq!(app(&w).request().unwrap().vae, VaeChoice::File(folder));
    click(&mut w, "VAE");
    click(&mut w, "sdxl_vae.safetensors");
    let file = models.join("VAE/sdxl_vae.safetensors");
    assert_eq!(
        app(&w).request().unwrap().vae,
        VaeChoice::File(file.clone())
    );
    w.state_mut().as_mut().unwrap().save_settings();
    drop(w);
    let w = open(FakeEngine::new(Duration::from_millis(1)), paths);
    assert_eq!(
        app(&w).settings.vae,
        VaeChoice::File(file),
        "kept in settings.json"
    );
}

#[test]
fn a_restored_image_chooses_the_vae_it_names() {
    let home = tempfile::tempdir().unwrap();
    let models = models_with_vaes(home.path());
    let mut w = with_fake_model(home.path(), FakeEngine::new(Duration::ZERO));
    (w.state_mut().as_mut().unwrap()).perform(Action::SetModelsFolder(models.clone()));
    step_until(&mut w, "the scan", |a| a.models.len() == 2);
    let with =
        |vae: &str| format!("a harbour\nSteps: 9, Sampler: Euler, Seed: 3, {vae}Version: v1.10.1");
    let named = a1111_png(
        home.path(),
        "named.png",
        &with("VAE hash: 235745af8d, VAE: sdxl_vae.safetensors, "),
    );
    drop_files(&mut w, &[&named]);
    let file = models.join("VAE/sdxl_vae.safetensors");
    step_until(&mut w, "the image's VAE", |a| {
        a.settings.vae == VaeChoice::File(file.clone())
    });

    // An image made with its model's own VAE: Automatic again.
    let own = a1111_png(home.path(), "own.png", &with(""));
    drop_files(&mut w, &[&own]);
    step_until(&mut w, "Automatic", |a| {
        a.settings.vae == VaeChoice::Automatic
    });

    // A VAE the folder lacks is said, and the choice stays.
    let missing = a1111_png(
        home.path(),
        "missing.png",
        &with("VAE: kl-f8-anime2.ckpt, "),
    );
    drop_files(&mut w, &[&missing]);
    step_until(&mut w, "the warning", |a| {
        has_notice(a, "kl-f8-anime2.ckpt")
    });
    assert!(has_notice(app(&w), "not in the models folder's VAE folder"));
    assert_eq!(app(&w).settings.vae, VaeChoice::Automatic);
}
