//! Closing the window with images still to be made asks first: "Don't quit" goes on, "Keep
//! them and quit" writes the queue for the next start; with nothing to make it closes at once.
//! A finished image that no folder took is kept, offered to "Save again", and asked about too.

use std::time::Duration;

use egui_kittest::kittest::Queryable;
use ember_app::gui::action::{Action, DeviceAction};
use ember_app::gui::paths::Paths;
use ember_tests::fake_engine::FakeEngine;

use crate::{Window, app, busy, has_notice, open, pngs_in, step_until};

/// The window's close button (or the OS) asks the window to close; returns the commands the
/// app sent its window meanwhile.
fn ask_to_close(w: &mut Window) -> Vec<egui::ViewportCommand> {
    let root = w.input_mut().viewports.entry(egui::ViewportId::ROOT);
    root.or_default().events.push(egui::ViewportEvent::Close);
    (0..2).flat_map(|_| step(w)).collect()
}

/// Clicks the button labelled `label`; returns the commands the app sent its window meanwhile.
fn click(w: &mut Window, label: &str) -> Vec<egui::ViewportCommand> {
    fn node<'a>(w: &'a Window, label: &'a str) -> egui_kittest::Node<'a> {
        w.get_all_by_label(label).next().expect("the button shows")
    }
    node(w, label).hover();
    let mut sent = step(w);
    node(w, label).click();
    sent.extend((0..2).flat_map(|_| step(w)));
    sent
}

/// One frame, and the commands the app sent its window in it (eframe carries them out: a
/// close asked for goes through unless `CancelClose` is among them).
fn step(w: &mut Window) -> Vec<egui::ViewportCommand> {
    w.step();
    let output = &w.output().viewport_output;
    output
        .get(&egui::ViewportId::ROOT)
        .map(|root| root.commands.clone())
        .unwrap_or_default()
}

fn keeps_the_window_open(sent: &[egui::ViewportCommand]) -> bool {
    sent.iter()
        .any(|c| matches!(c, egui::ViewportCommand::CancelClose))
}

fn closes_the_window(sent: &[egui::ViewportCommand]) -> bool {
    sent.iter()
        .any(|c| matches!(c, egui::ViewportCommand::Close))
}

#[test]
fn closing_with_nothing_to_make_does_not_ask() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    let sent = ask_to_close(&mut w);
    assert!(!keeps_the_window_open(&sent), "the close goes through");
    assert!(!app(&w).quitting.asked);
    assert!(w.query_by_label("Quit Ember?").is_none());
}

#[test]
fn closing_with_jobs_asks_and_can_keep_them_for_the_next_start() {
    let home = tempfile::tempdir().unwrap();
    let mut w = busy(home.path(), 2);
    let sent = ask_to_close(&mut w);
    assert!(
        keeps_the_window_open(&sent),
        "the close waits for the answer"
    );
    assert!(app(&w).quitting.asked);
    w.get_by_label("Quit Ember?");
    w.get_by_label("An image is being made and 1 more job(s) are waiting.");
    let sent = click(&mut w, "Don't quit");
    assert!(!closes_the_window(&sent));
    assert!(!app(&w).quitting.asked && !app(&w).closing());
    assert!(w.query_by_label("Quit Ember?").is_none());
    assert!(app(&w).jobs_to_make() > 0, "the jobs go on");

    assert!(keeps_the_window_open(&ask_to_close(&mut w)));
    let sent = click(&mut w, "Keep them and quit");
    assert!(closes_the_window(&sent));
    assert!(app(&w).closing());
    let kept = Paths::under(home.path()).config_dir.join("queue.json");
    assert!(kept.exists(), "the queue is kept for the next start");
}

#[test]
fn quitting_without_the_jobs_keeps_nothing() {
    let home = tempfile::tempdir().unwrap();
    let mut w = busy(home.path(), 1);
    assert!(keeps_the_window_open(&ask_to_close(&mut w)));
    w.get_by_label("An image is being made.");
    let sent = click(&mut w, "Quit without them");
    assert!(closes_the_window(&sent));
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
    assert!(keeps_the_window_open(&ask_to_close(&mut w)));
    assert!(app(&w).quitting.asked);
    let start = std::time::Instant::now();
    let mut sent = Vec::new();
    while !closes_the_window(&sent) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the window did not close after its job ended"
        );
        sent = step(&mut w);
    }
    assert!(app(&w).closing());
    assert!(!app(&w).quitting.asked);
}

/// The output folder and its fallback both unwritable (a full disk, a folder gone): the
/// finished image is kept, not lost; closing asks; "Save again" saves it once the folder is
/// back, and then the window closes at once.
#[test]
fn an_image_no_folder_takes_is_kept_until_saved_again() {
    let home = tempfile::tempdir().unwrap();
    let paths = Paths::under(home.path());
    // A file where each folder should be: neither can be made.
    for blocked in [&paths.default_output, &paths.fallback_output] {
        std::fs::write(blocked, b"not a folder").unwrap();
    }
    let mut w = busy(home.path(), 1);
    step_until(&mut w, "the save to fail", |a| a.unsaved.len() == 1);
    assert!(has_notice(app(&w), "kept until it is saved"));
    assert!(
        w.query_all_by_label_contains("finished image is not saved")
            .next()
            .is_some(),
        "the window says so"
    );
    assert!(app(&w).display.results[0].path.is_none());

    assert!(
        keeps_the_window_open(&ask_to_close(&mut w)),
        "no job waits, but an image would be lost"
    );
    assert!(
        w.query_all_by_label_contains("quitting loses them")
            .next()
            .is_some()
    );
    assert!(
        w.query_by_label("Keep them and quit").is_none(),
        "no jobs to keep"
    );
    let sent = click(&mut w, "Don't quit");
    assert!(!closes_the_window(&sent));
    // Nor does a start-again on another device drop them.
    let start_again = DeviceAction::StartAgain { when_idle: false };
    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::Device(start_again));
    assert!(!app(&w).starts_again());
    assert!(has_notice(app(&w), "did not start again"));
    // The new notice moves the bar up: let the layout settle before clicking it.
    for _ in 0..5 {
        w.step();
    }

    std::fs::remove_file(&paths.default_output).unwrap();
    click(&mut w, "Save again");
    step_until(&mut w, "the image to be saved", |a| {
        a.unsaved.is_empty() && a.display.results[0].path.is_some()
    });
    assert_eq!(pngs_in(&paths.default_output), 1);
    assert!(
        w.query_all_by_label_contains("finished image is not saved")
            .next()
            .is_none()
    );
    assert!(
        !keeps_the_window_open(&ask_to_close(&mut w)),
        "nothing left to lose"
    );
}
