//! The Device menu with the fake engine and a fake device list: choosing a GPU is saved and
//! offers to start again (at once when idle, after the queue when busy); choosing the running
//! device again takes the offer back.

use std::sync::Arc;
use std::time::Duration;

use egui_kittest::kittest::Queryable;
use ember_app::gui::paths::Paths;
use ember_tests::fake_engine::FakeEngine;
use inference::device::{DeviceKind, DeviceRow};

use crate::{Window, app, busy, click, has_notice, open, pngs_in, step_until};

const GPU: &str = "Test GPU (Vulkan, discrete GPU) · wgpu:0";

fn devices() -> Vec<DeviceRow> {
    let row = |name: &str, description: &str, kind| DeviceRow {
        name: name.into(),
        description: description.into(),
        kind,
    };
    vec![
        row("cpu", "the CPU (burn-flex)", Some(DeviceKind::Cpu)),
        row(
            "wgpu:0",
            "Test GPU (Vulkan, discrete GPU)",
            Some(DeviceKind::WgpuAdapter(0)),
        ),
        row("cuda", "not in this build", None),
    ]
}

/// The window with the fake device list, running on `auto`, its Device menu open and listed.
fn with_device_menu(w: &mut Window) {
    w.step();
    w.state_mut()
        .as_mut()
        .unwrap()
        .device_choice
        .set_lister(Arc::new(devices));
    click(w, "Device");
    step_until(w, "the devices to be listed", |a| {
        a.device_choice.rows().is_some()
    });
    w.step();
}

fn saved_device(home: &std::path::Path) -> String {
    let file = ember_app::gui::settings::SettingsFile::in_dir(&Paths::under(home).config_dir);
    file.peek_device()
}

#[test]
fn choosing_a_gpu_is_saved_and_ember_starts_again_on_it() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    with_device_menu(&mut w);
    assert!(w.query_by_label("Looking for GPUs…").is_none());
    // A backend without devices is a line saying why, not a choice.
    w.get_by_label("cuda: not in this build");
    assert!(w.query_by_label("Start again now").is_none(), "auto runs");

    click(&mut w, GPU);
    assert_eq!(app(&w).settings.device, "wgpu:0");
    // The menu stays open with the offer; Automatic, the running device, takes it back.
    w.get_by_label("Start again now");
    click(&mut w, "Automatic");
    assert_eq!(app(&w).settings.device, "auto");
    assert!(w.query_by_label("Start again now").is_none());

    click(&mut w, GPU);
    assert_eq!(
        saved_device(home.path()),
        "",
        "nothing saved before starting again"
    );
    click(&mut w, "Start again now");
    assert!(app(&w).starts_again(), "the window closes to start again");
    assert_eq!(
        saved_device(home.path()),
        "wgpu:0",
        "the choice is saved first"
    );
}

#[test]
fn a_busy_ember_starts_again_once_the_queue_is_done() {
    let home = tempfile::tempdir().unwrap();
    let mut w = busy(home.path(), 2);
    with_device_menu(&mut w);
    click(&mut w, "CPU");
    w.get_by_label("Start again now");
    click(&mut w, "Start again when the queue is done");
    assert!(app(&w).device_choice.when_idle);
    w.get_by_label("Don't start again");
    assert!(!app(&w).starts_again(), "the queue is made first");
    step_until(
        &mut w,
        "the queue to finish and Ember to start again",
        |a| a.starts_again(),
    );
    let a = app(&w);
    assert!(a.session.queue.is_empty() && a.session.running.is_none());
    let output = Paths::under(home.path()).default_output;
    step_until(&mut w, "both images to be saved", |_| pngs_in(&output) == 2);
    assert_eq!(saved_device(home.path()), "cpu");
}

/// "Start again now" while busy keeps the queue: the next start queues the job that was being
/// made (from its start) and the one waiting, makes both, and removes the kept file.
#[test]
fn starting_again_now_keeps_the_queue_for_the_next_start() {
    let home = tempfile::tempdir().unwrap();
    let mut w = busy(home.path(), 2);
    with_device_menu(&mut w);
    click(&mut w, "CPU");
    click(&mut w, "Start again now");
    assert!(app(&w).starts_again());
    let kept = Paths::under(home.path()).config_dir.join("queue.json");
    assert!(
        kept.exists(),
        "the queue is written before the window closes"
    );
    drop(w);

    let mut again = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    again.step();
    assert!(!kept.exists(), "taken once");
    assert!(has_notice(
        app(&again),
        "2 job(s) kept when Ember last closed are queued again"
    ));
    let output = Paths::under(home.path()).default_output;
    step_until(&mut again, "both kept jobs to be made and saved", |a| {
        a.session.queue.is_empty() && a.session.running.is_none() && pngs_in(&output) == 2
    });
}

/// After the worker stopped, its queue cannot run in this window: waiting for it to be done
/// starts again at once (the queue kept for the next start), and the menu no longer offers
/// to wait.
#[test]
fn a_stopped_worker_does_not_keep_a_start_again_waiting() {
    use ember_app::gui::action::Action;
    let stopping = || FakeEngine {
        panic_on_unload: true,
        ..FakeEngine::new(Duration::from_millis(10))
    };
    let kept = |home: &std::path::Path| Paths::under(home).config_dir.join("queue.json");

    let home = tempfile::tempdir().unwrap();
    let mut w = crate::busy_on(home.path(), stopping(), 10, 2);
    with_device_menu(&mut w);
    click(&mut w, "CPU");
    click(&mut w, "Start again when the queue is done");
    // Turning the refiner off unloads it once the image is made: the fake engine panics.
    let app_mut = w.state_mut().as_mut().unwrap();
    app_mut.perform(Action::SetRefiner(None));
    step_until(&mut w, "Ember to start again", |a| a.starts_again());
    assert!(app(&w).session.stopped.is_some());
    assert!(
        kept(home.path()).exists(),
        "the image still to make is kept"
    );

    let home = tempfile::tempdir().unwrap();
    let mut w = crate::busy_on(home.path(), stopping(), 10, 2);
    let app_mut = w.state_mut().as_mut().unwrap();
    app_mut.perform(Action::SetRefiner(None));
    step_until(&mut w, "the worker to stop", |a| {
        a.session.stopped.is_some()
    });
    with_device_menu(&mut w);
    click(&mut w, "CPU");
    assert!(
        w.query_by_label("Start again when the queue is done")
            .is_none(),
        "a queue that cannot run is not waited for"
    );
    click(&mut w, "Start again now");
    // Once the image made before the worker stopped is saved.
    step_until(&mut w, "Ember to start again", |a| a.starts_again());
    assert!(kept(home.path()).exists());
}
