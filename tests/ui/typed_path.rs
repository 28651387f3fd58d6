//! The typed-path window, where a file dialog cannot open (no xdg-desktop-portal): its field
//! has the focus at once, Enter uses a path that exists, and Esc closes the window without
//! cancelling the image being made.

use std::time::Duration;

use egui_kittest::kittest::Queryable;
use ember_app::gui::action::Action;
use ember_app::gui::dialogs::PathPurpose;
use ember_app::gui::paths::Paths;
use ember_tests::fake_engine::FakeEngine;

use crate::{Window, app, busy, open};

fn ask_for_path(w: &mut Window, purpose: PathPurpose) {
    let app = w.state_mut().as_mut().unwrap();
    app.perform(Action::DialogFailed(purpose));
    w.step();
    w.step(); // a new window sizes itself on its first frame
}

#[test]
fn a_typed_path_is_used_with_enter_once_it_exists() {
    let home = tempfile::tempdir().unwrap();
    let folder = home.path().join("elsewhere");
    let mut w = open(FakeEngine::new(Duration::ZERO), Paths::under(home.path()));
    w.step();
    ask_for_path(&mut w, PathPurpose::OutputFolder);
    assert!(
        w.get_by_label("Path").is_focused(),
        "the path can be typed without a click first"
    );
    w.get_by_label("Path")
        .type_text(&folder.display().to_string());
    w.step();
    // Enter on a path that does not exist keeps the window, saying why.
    w.key_press(egui::Key::Enter);
    w.step();
    w.get_by_label("no such file or folder");
    assert!(app(&w).path_prompt.is_some());

    std::fs::create_dir_all(&folder).unwrap();
    w.get_by_label("Path").focus();
    w.step();
    w.key_press(egui::Key::Enter);
    w.step();
    let a = app(&w);
    assert!(a.path_prompt.is_none(), "Enter used the path");
    assert_eq!(a.settings.output_dir.as_deref(), Some(folder.as_path()));
}

#[test]
fn esc_closes_the_typed_path_window_and_the_image_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let mut w = busy(home.path(), 1);
    ask_for_path(&mut w, PathPurpose::Model);
    w.key_press(egui::Key::Escape);
    w.step();
    let a = app(&w);
    assert!(a.path_prompt.is_none(), "Esc closed the window");
    let running = a
        .session
        .running
        .as_ref()
        .expect("the image is still being made");
    assert!(!running.cancelling, "Esc closed the window, not the image");

    // With the window closed, Esc cancels the image as before.
    w.key_press(egui::Key::Escape);
    w.step();
    let a = app(&w);
    assert!(a.session.running.as_ref().is_none_or(|r| r.cancelling));
}
