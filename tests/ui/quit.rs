//! Closing the window with images still to be made asks first: "Don't quit" goes on, "Keep
//! them and quit" writes the queue for the next start; with nothing to make it closes at once.
//! A finished image that no folder took is kept, offered to "Save again", asked about, and
//! kept for the next start.

use std::time::Duration;

use egui_kittest::kittest::Queryable;
use ember_app::gui::action::{Action, DeviceAction};
use ember_app::gui::paths::Paths;
use ember_app::gui::queue_file::KeptQueue;
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

/// The paths under `home`, with a file where the output folder and its fallback should be:
/// neither can be made, so no image can be saved.
fn outputs_blocked(home: &std::path::Path) -> Paths {
    let paths = Paths::under(home);
    for blocked in [&paths.default_output, &paths.fallback_output] {
        std::fs::write(blocked, b"not a folder").unwrap();
    }
    paths
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
    let paths = outputs_blocked(home.path());
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
        w.query_all_by_label_contains("wait to be saved again at the next start")
            .next()
            .is_some()
    );
    let sent = click(&mut w, "Don't quit");
    assert!(!closes_the_window(&sent));

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

/// A finished image no folder takes is kept for the next start, by the quit question's
/// "Keep them and quit" and by a start-again on another device (a lost GPU's too), and
/// waits there to be saved again.
#[test]
fn an_unsaved_image_is_kept_for_the_next_start() {
    let home = tempfile::tempdir().unwrap();
    let paths = outputs_blocked(home.path());
    let mut w = busy(home.path(), 1);
    step_until(&mut w, "the save to fail", |a| a.unsaved.len() == 1);
    assert!(keeps_the_window_open(&ask_to_close(&mut w)));
    assert!(closes_the_window(&click(&mut w, "Keep them and quit")));
    let kept = paths.config_dir.join("queue.json");
    assert!(kept.exists());
    drop(w);

    // The next start: the image waits, and a start-again on another device keeps it again.
    let next_start = |paths: &Paths| {
        let mut w = open(FakeEngine::new(Duration::ZERO), paths.clone());
        w.step();
        assert_eq!(app(&w).unsaved.len(), 1);
        assert!(has_notice(app(&w), "wait to be saved again"));
        assert!(!kept.exists(), "taken once");
        w
    };
    let mut w = next_start(&paths);
    let start_again = DeviceAction::StartAgain { when_idle: false };
    w.state_mut()
        .as_mut()
        .unwrap()
        .perform(Action::Device(start_again));
    assert!(app(&w).starts_again());
    drop(w);

    let mut w = next_start(&paths);
    for _ in 0..5 {
        w.step();
    }
    std::fs::remove_file(&paths.default_output).unwrap();
    click(&mut w, "Save again");
    let output = paths.default_output.clone();
    step_until(&mut w, "the image to be saved", |_| pngs_in(&output) == 1);
    assert!(app(&w).unsaved.is_empty());
}

/// A start-again once the queue is done comes on the frame the last image is made, while its
/// save is under way: it waits for the save's reply, so an image no folder takes is kept
/// with the queue, not lost.
#[test]
fn a_start_again_when_idle_waits_for_the_last_save() {
    let home = tempfile::tempdir().unwrap();
    let paths = outputs_blocked(home.path());
    let mut w = busy(home.path(), 1);
    let app_mut = w.state_mut().as_mut().unwrap();
    app_mut.settings.device = "cpu".into();
    app_mut.perform(Action::Device(DeviceAction::StartAgain { when_idle: true }));
    step_until(&mut w, "Ember to start again", |a| a.starts_again());
    assert_eq!(app(&w).unsaved.len(), 1, "the save came back first");
    let kept = KeptQueue::in_dir(&paths.config_dir).take().unwrap();
    assert_eq!(kept.unsaved.len(), 1, "and was kept for the next start");
}
