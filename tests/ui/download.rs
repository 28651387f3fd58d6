//! The Download window: a link downloaded from a local server lands in the models folder,
//! is listed and loaded; a bad link is an error notice and leaves no file.

use std::time::Duration;

use ember_app::gui::paths::Paths;
use ember_tests::fake_engine::FakeEngine;
use ember_tests::http_server::{Behaviour, serve};
use ember_tests::reference;

use crate::{app, click, has_notice, open, step_until};

#[test]
fn a_link_downloads_into_the_models_folder_and_loads() {
    let home = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(reference("sd15/checkpoint.safetensors")).unwrap();
    let server = serve(bytes.clone(), Behaviour::Serve);
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    // The empty window offers it beside opening a model and choosing a folder.
    click(&mut w, "Download a model…");
    assert!(app(&w).downloads.open);
    w.state_mut().as_mut().unwrap().downloads.url = server.url("/model.safetensors");
    w.step();
    click(&mut w, "Download link");
    step_until(&mut w, "the downloaded model to load", |a| {
        a.session.model().is_some()
    });
    let models = home.path().join("models");
    let saved = models.join("model.safetensors");
    assert_eq!(std::fs::read(&saved).unwrap(), bytes);
    let a = app(&w);
    assert_eq!(a.settings.models_dir.as_deref(), Some(models.as_path()));
    assert_eq!(a.session.model().unwrap().path, saved);
    assert!(has_notice(a, "downloaded model.safetensors"));
    assert!(
        !a.downloads.open,
        "the window closes when the model arrives"
    );
}

#[test]
fn a_bad_link_is_a_notice_and_leaves_no_file() {
    let home = tempfile::tempdir().unwrap();
    let server = serve(Vec::new(), Behaviour::Serve);
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    click(&mut w, "Download a model…");
    w.state_mut().as_mut().unwrap().downloads.url = server.url("/missing.safetensors");
    w.step();
    click(&mut w, "Download link");
    step_until(&mut w, "the failure", |a| has_notice(a, "download failed"));
    assert!(has_notice(app(&w), "does not exist (404)"));
    let models = home.path().join("models");
    let left: Vec<_> = std::fs::read_dir(&models)
        .map(|r| r.count())
        .into_iter()
        .collect();
    assert!(left.iter().all(|n| *n == 0), "nothing written: {left:?}");
    assert!(app(&w).session.model().is_none());
}

#[test]
fn a_slow_download_is_cancelled_from_the_window_and_can_resume() {
    let home = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(reference("sd15/checkpoint.safetensors")).unwrap();
    let server = serve(
        bytes,
        Behaviour::Slow {
            chunk: 64 << 10,
            pause: Duration::from_millis(50),
        },
    );
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    click(&mut w, "Download a model…");
    w.state_mut().as_mut().unwrap().downloads.url = server.url("/model.safetensors");
    w.step();
    click(&mut w, "Download link");
    step_until(&mut w, "progress", |a| {
        a.downloads
            .active
            .as_ref()
            .is_some_and(|d| d.progress.is_some_and(|p| p.done > 0))
    });
    click(&mut w, "Cancel download");
    step_until(&mut w, "the cancel", |a| a.downloads.active.is_none());
    assert!(has_notice(app(&w), "download cancelled"));
    let models = home.path().join("models");
    assert!(
        models.join("model.safetensors.part").exists(),
        "kept for a resume"
    );
    assert!(!models.join("model.safetensors").exists());
    assert!(app(&w).session.model().is_none());
}
