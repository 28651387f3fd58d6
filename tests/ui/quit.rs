//! Closing the window with images still to be made asks first: "Don't quit" goes on, "Keep
//! them and quit" writes the queue for the next start; with nothing to make it closes at once.

use std::time::Duration;

use egui_kittest::kittest::Queryable;
use ember_app::gui::paths::Paths;
use ember_tests::fake_engine::FakeEngine;

use crate::{Window, app, busy, click, open};

/// The window's close button (or the OS) asks the window to close.
fn ask_to_close(w: &mut Window) {
    let root = w.input_mut().viewports.entry(egui::ViewportId::ROOT);
    root.or_default().events.push(egui::ViewportEvent::Close);
    w.step();
    w.step();
}

#[test]
fn closing_with_nothing_to_make_does_not_ask() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    ask_to_close(&mut w);
    assert!(!app(&w).quitting.asked);
    assert!(w.query_by_label("Quit Ember?").is_none());
}

#[test]
fn closing_with_jobs_asks_and_can_keep_them_for_the_next_start() {
    let home = tempfile::tempdir().unwrap();
    let mut w = busy(home.path(), 2);
    ask_to_close(&mut w);
    assert!(app(&w).quitting.asked);
    w.get_by_label("Quit Ember?");
    w.get_by_label("An image is being made and 1 more job(s) are waiting.");
    click(&mut w, "Don't quit");
    assert!(!app(&w).quitting.asked && !app(&w).closing());
    assert!(w.query_by_label("Quit Ember?").is_none());
    assert!(app(&w).jobs_to_make() > 0, "the jobs go on");

    ask_to_close(&mut w);
    click(&mut w, "Keep them and quit");
    assert!(app(&w).closing());
    let kept = Paths::under(home.path()).config_dir.join("queue.json");
    assert!(kept.exists(), "the queue is kept for the next start");
}

#[test]
fn quitting_without_the_jobs_keeps_nothing() {
    let home = tempfile::tempdir().unwrap();
    let mut w = busy(home.path(), 1);
    ask_to_close(&mut w);
    w.get_by_label("An image is being made.");
    click(&mut w, "Quit without them");
    assert!(app(&w).closing());
    assert!(
        !Paths::under(home.path())
            .config_dir
            .join("queue.json")
            .exists()
    );
}

/// Jobs that end while the question shows leave nothing to decide: the window closes.
#[test]
fn the_window_closes_once_the_jobs_asked_about_are_done() {
    let home = tempfile::tempdir().unwrap();
    let mut w = busy(home.path(), 1);
    ask_to_close(&mut w);
    assert!(app(&w).quitting.asked);
    crate::step_until(&mut w, "the job to end and the window to close", |a| {
        a.closing()
    });
    assert!(!app(&w).quitting.asked);
}
