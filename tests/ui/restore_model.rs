//! The model an image was made with, and the size a model brings: a restored image loads
//! its model from the models folder or Recent (or says it cannot), keeps its own size when
//! that model loads, and a model of another native side scales the size the user chose.

use std::path::Path;
use std::time::Duration;

use ember_app::gui::action::Action;
use ember_app::gui::paths::Paths;
use ember_tests::fake_engine::FakeEngine;

use crate::{app, drop_files, fake_model, has_notice, open, step_until};

/// A PNG at `path` whose A1111 `parameters` end with `fields`.
fn image_with(path: &Path, fields: &str) {
    let image = inference::imaging::ImageRgb8 {
        width: 8,
        height: 8,
        pixels: vec![0; 8 * 8 * 3],
    };
    let parameters = format!("a harbour at dawn\nSteps: 9, Sampler: Euler, CFG scale: 6, {fields}");
    let bytes = inference::imaging::encode_png(&image, &[("parameters", &parameters)]).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn loaded(w: &crate::Window) -> Option<&Path> {
    app(w).session.model().map(|m| m.path.as_path())
}

#[test]
fn a_restored_image_loads_the_model_it_was_made_with_or_says_it_is_missing() {
    let home = tempfile::tempdir().unwrap();
    let models = home.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    // A real (tiny) checkpoint, so that the models folder lists it as a model.
    let beta = models.join("beta-xl.safetensors");
    std::fs::copy(ember_tests::reference("sdxl/checkpoint.safetensors"), &beta).unwrap();
    let first = fake_model(home.path());
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::SetModelsFolder(models));
    step_until(&mut w, "the scan", |a| a.models.len() == 1);
    drop_files(&mut w, &[&first]);
    step_until(&mut w, "the first model", |a| a.session.model().is_some());

    // The image names the folder's model (its hash is not known yet: found by name).
    let png = home.path().join("made-with-beta.png");
    image_with(
        &png,
        "Seed: 3, Size: 96x64, Model hash: 0123456789, Model: beta-xl",
    );
    drop_files(&mut w, &[&png]);
    step_until(&mut w, "the image's model", |a| {
        a.session.model().is_some_and(|m| m.path == beta)
    });
    assert!(has_notice(
        app(&w),
        "loading beta-xl [0123456789], the model the image was made with"
    ));
    assert_eq!(
        (app(&w).settings.width, app(&w).settings.height),
        (96, 64),
        "the image's size, kept when its model (of another native side) loads"
    );

    // A model neither the folder nor Recent holds: the loaded one stays, and that is said.
    let missing = home.path().join("made-with-gamma.png");
    image_with(
        &missing,
        "Seed: 4, Size: 64x64, Model hash: abcdef1234, Model: gamma",
    );
    drop_files(&mut w, &[&missing]);
    step_until(&mut w, "the warning", |a| {
        has_notice(a, "gamma [abcdef1234]")
    });
    assert!(has_notice(
        app(&w),
        "the image was made with gamma [abcdef1234], which is not in the models folder or \
         Recent: it will be made with fake and look different"
    ));
    assert_eq!(loaded(&w), Some(beta.as_path()));

    // The first model, from Recent; the restored size stays with it too.
    let again = home.path().join("made-with-first.png");
    image_with(&again, "Seed: 5, Size: 512x512, Model: fake-model");
    drop_files(&mut w, &[&again]);
    step_until(&mut w, "the model from Recent", |a| {
        a.session.model().is_some_and(|m| m.path == first)
    });
    assert_eq!(
        (app(&w).settings.width, app(&w).settings.height),
        (512, 512)
    );
    // The model the image names is the one loaded: nothing loads.
    let notices = app(&w).session.notices.len();
    drop_files(&mut w, &[&again]);
    step_until(&mut w, "the restore", |a| a.session.notices.len() > notices);
    assert_eq!(app(&w).session.model_path(), Some(first.as_path()));
    assert_eq!(
        app(&w)
            .session
            .notices
            .iter()
            .filter(|n| n.text.contains("loading fake-model"))
            .count(),
        1
    );

    // The user's own choice of model scales the size to its native side (SDXL's is
    // twice SD 1.x's here), keeping the shape.
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        (s.width, s.height) = (64, 96);
    }
    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::LoadModel(beta.clone()));
    step_until(&mut w, "the SDXL model", |a| {
        a.session.model().is_some_and(|m| m.path == beta)
    });
    assert_eq!(
        (app(&w).settings.width, app(&w).settings.height),
        (128, 192)
    );
    assert!(has_notice(
        app(&w),
        "size 128×192 for fake's native 128 px (was 64×96)"
    ));
}

/// An image restored while its model is loading: the load goes on, and the image's size
/// stays when it is done.
#[test]
fn an_image_of_the_model_being_loaded_keeps_its_size() {
    let home = tempfile::tempdir().unwrap();
    let sdxl = home.path().join("other-xl.safetensors");
    std::fs::write(&sdxl, b"fake").unwrap();
    let engine = FakeEngine::new(Duration::from_millis(20));
    let loads = engine.loads_begun.clone();
    let mut w = crate::busy_on(home.path(), engine, 15, 1);
    // The SDXL model waits behind the job; its image comes meanwhile.
    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::LoadModel(sdxl.clone()));
    let png = home.path().join("made-with-other-xl.png");
    image_with(&png, "Seed: 3, Size: 96x64, Model: other-xl");
    drop_files(&mut w, &[&png]);
    step_until(&mut w, "the SDXL model", |a| {
        a.session.model().is_some_and(|m| m.path == sdxl)
    });
    assert_eq!(
        (app(&w).settings.width, app(&w).settings.height),
        (96, 64),
        "not scaled from SD 1.x's side"
    );
    let loads = loads.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(loads, 2, "one load of the SDXL model");
}

/// A size chosen in the form while another model loads is chosen for that model: it stays
/// when the model is done loading.
#[test]
fn a_size_chosen_while_a_model_loads_stays_with_it() {
    let home = tempfile::tempdir().unwrap();
    let sdxl = home.path().join("other-xl.safetensors");
    std::fs::write(&sdxl, b"fake").unwrap();
    let engine = FakeEngine::new(Duration::from_millis(20));
    let mut w = crate::busy_on(home.path(), engine, 15, 1);
    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::LoadModel(sdxl.clone()));
    w.step();
    // With no model ready the menu offers sizes around 512.
    crate::click(&mut w, "Size");
    crate::click(&mut w, "2:3  512×768");
    assert_eq!(
        (app(&w).settings.width, app(&w).settings.height),
        (512, 768)
    );
    step_until(&mut w, "the SDXL model", |a| {
        a.session.model().is_some_and(|m| m.path == sdxl)
    });
    assert_eq!(
        (app(&w).settings.width, app(&w).settings.height),
        (512, 768),
        "not scaled from SD 1.x's side"
    );
}
