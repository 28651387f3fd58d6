//! The model slots while loads wait behind a job: a second click on the model being loaded,
//! an unload the worker reports after a newer load was asked for, and a lost GPU's reload
//! against a model chosen meanwhile.

use std::time::{Duration, Instant};

use ember_app::gui::action::Action;
use ember_app::gui::paths::Paths;
use ember_app::gui::session::ModelState;
use ember_tests::fake_engine::FakeEngine;
use inference::worker::{CancelToken, Event, ModelRole, ModelToReload};

use crate::{app, busy_on, click, has_notice, open, step_until};

#[test]
fn a_second_click_on_the_model_being_loaded_lets_the_load_go_on() {
    let home = tempfile::tempdir().unwrap();
    let other = home.path().join("other-model.safetensors");
    std::fs::write(&other, b"fake").unwrap();
    let engine = FakeEngine::new(Duration::from_millis(20));
    let loads = engine.loads_begun.clone();
    let mut w = busy_on(home.path(), engine, 15, 2);
    // The loads wait behind the job; the second click must not cancel the first (whose
    // failure, "loading was cancelled", would be taken for the second's).
    for _ in 0..2 {
        let app = w.state_mut().as_mut().unwrap();
        app.perform(Action::LoadModel(other.clone()));
        w.step();
    }
    assert!(
        has_notice(
            app(&w),
            "the 1 image waiting in the queue will be made with other-model.safetensors"
        ),
        "{:?}",
        app(&w).session.notices
    );
    // A load error goes once the next load succeeds: watched for at every frame.
    let failed = std::cell::Cell::new(false);
    step_until(&mut w, "the other model", |a| {
        failed.set(failed.get() || has_notice(a, "cancelled") || has_notice(a, "could not load"));
        a.session.model().is_some_and(|m| m.path == other)
    });
    assert!(!failed.get(), "no load failed");
    let loads = loads.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(loads, 2, "the first model, then the other once");
    assert!(
        !has_notice(app(&w), "could not load"),
        "{:?}",
        app(&w).session.notices
    );
}

#[test]
fn an_unload_reported_after_a_newer_load_was_asked_for_leaves_that_load_waiting() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    let refiner = home.path().join("refiner.safetensors");
    let loading = |path: &std::path::Path| ModelState::Loading {
        path: path.to_path_buf(),
        step: 0,
        total: 0,
        cancel: CancelToken::new(),
    };
    let session = &mut w.state_mut().as_mut().unwrap().session;
    // Refiner off, then on again, while a job runs: the worker unloads, then loads.
    session.refiner = loading(&refiner);
    let _ = session.apply(Event::ModelUnloaded(ModelRole::Refiner), Instant::now());
    assert!(session.is_loading(ModelRole::Refiner, &refiner));

    // The GPU lost with model A loaded while the user's choice B waits: B loads instead.
    let (a, b) = (
        home.path().join("a.safetensors"),
        home.path().join("b.safetensors"),
    );
    session.model = loading(&b);
    let lost = Event::GpuLost {
        error: "the GPU stopped working".into(),
        reload: vec![ModelToReload {
            role: ModelRole::Main,
            path: a.clone(),
            config_dir: None,
        }],
    };
    let _ = session.apply(lost, Instant::now());
    assert!(
        session.is_loading(ModelRole::Main, &b),
        "{:?}",
        session.model
    );
    // A load the loss interrupted, of the model the slot waits for, starts again.
    let interrupted = Event::GpuLost {
        error: "the GPU stopped working".into(),
        reload: vec![ModelToReload {
            role: ModelRole::Main,
            path: b.clone(),
            config_dir: None,
        }],
    };
    let before = match &session.model {
        ModelState::Loading { cancel, .. } => cancel.clone(),
        other => panic!("{other:?}"),
    };
    let _ = session.apply(interrupted, Instant::now());
    assert!(
        before.is_cancelled(),
        "a new load of b replaces the interrupted one"
    );
    assert!(session.is_loading(ModelRole::Main, &b));
}

/// Esc stops the running image, never a model load: an Esc meant for a job that ended in
/// the same frame would otherwise stop the load waiting behind it.
#[test]
fn esc_without_a_running_job_leaves_a_model_load_alone() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    let cancel = CancelToken::new();
    w.state_mut().as_mut().unwrap().session.model = ModelState::Loading {
        path: home.path().join("big-model.safetensors"),
        step: 1,
        total: 4,
        cancel: cancel.clone(),
    };
    w.step();
    w.key_press(egui::Key::Escape);
    w.step();
    assert!(!cancel.is_cancelled());
    click(&mut w, "Cancel loading");
    assert!(cancel.is_cancelled(), "the model panel's button stops it");
}

/// The worker stopped by a failure outside any job: the image it had been sent waits again
/// in the queue (kept for the next start), and Generate says what happened and what to do.
#[test]
fn a_stopped_worker_keeps_the_queue_and_generate_says_to_start_again() {
    let home = tempfile::tempdir().unwrap();
    let engine = FakeEngine {
        panic_on_unload: true,
        ..FakeEngine::new(Duration::from_millis(10))
    };
    let mut w = busy_on(home.path(), engine, 10, 2);
    // Turning the refiner off unloads it once the image is made: the fake engine panics.
    let app_mut = w.state_mut().as_mut().unwrap();
    app_mut.perform(Action::SetRefiner(None));
    step_until(&mut w, "the worker to stop", |a| {
        a.session.stopped.is_some()
    });
    assert!(app(&w).session.running.is_none());
    assert_eq!(
        app(&w).session.queue.len(),
        1,
        "the second image still waits"
    );
    assert!(has_notice(app(&w), "Quit and start Ember again"));
    let notices = app(&w).session.notices.len();
    click(&mut w, "Generate");
    assert_eq!(app(&w).session.queue.len(), 1, "nothing more is queued");
    assert!(app(&w).session.notices.len() >= notices);
    assert!(has_notice(
        app(&w),
        "engine stopped after an internal error"
    ));
    // Nor does a model load: the slot does not wait for a load that cannot happen.
    let other = home.path().join("other-model.safetensors");
    std::fs::write(&other, b"fake").unwrap();
    let app_mut = w.state_mut().as_mut().unwrap();
    app_mut.perform(Action::LoadModel(other.clone()));
    assert!(!app(&w).session.is_loading(ModelRole::Main, &other));
}

/// A load cancelled while it waits, then asked for again, loads.
#[test]
fn a_model_asked_for_again_after_its_load_was_cancelled_loads() {
    let home = tempfile::tempdir().unwrap();
    let other = home.path().join("other-model.safetensors");
    std::fs::write(&other, b"fake").unwrap();
    let engine = FakeEngine::new(Duration::from_millis(20));
    let mut w = busy_on(home.path(), engine, 15, 1);
    for action in [
        Action::LoadModel(other.clone()),
        Action::CancelLoad,
        Action::LoadModel(other.clone()),
    ] {
        w.state_mut().as_mut().unwrap().perform(action);
        w.step();
    }
    step_until(&mut w, "the other model", |a| {
        a.session.model().is_some_and(|m| m.path == other)
    });

    // The cancelled load's end, reported while the new one waits, is not taken for the
    // new one's (here both end in one frame, so it is shown on the session itself).
    let session = &mut w.state_mut().as_mut().unwrap().session;
    let _ = session.load_into(ModelRole::Main, &other, None);
    let cancelled_end = Event::ModelFailed {
        path: other.clone(),
        role: ModelRole::Main,
        error: "loading was cancelled".into(),
        kept: None,
        needs_config: false,
        cancelled: true,
    };
    let _ = session.apply(cancelled_end, Instant::now());
    assert!(
        session.is_loading(ModelRole::Main, &other),
        "{:?}",
        session.model
    );
    assert!(!has_notice(app(&w), "could not load"));
}
