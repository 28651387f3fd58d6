//! Seamless tiling in the window: the menu reaches the job and is remembered, a seamless
//! result can be shown repeated along the edges that meet, and a dropped A1111 image with
//! `Tiling: True` turns it on.

use std::time::Duration;

use egui_kittest::kittest::Queryable;
use ember_app::gui::paths::Paths;
use ember_tests::fake_engine::FakeEngine;
use inference::api::Seamless;

use crate::{app, click, drop_files, open, step_until};

fn copies(w: &crate::Window) -> usize {
    w.query_all_by_label("a repeated copy").count()
}

#[test]
fn the_seamless_menu_reaches_the_job_and_its_result_can_be_shown_tiled() {
    let home = tempfile::tempdir().unwrap();
    let mut w = crate::with_fake_model(home.path(), FakeEngine::new(Duration::from_millis(1)));
    assert_eq!(app(&w).request().unwrap().seamless, Seamless::Off);
    click(&mut w, "Seamless");
    click(&mut w, "Left and right edges");
    assert_eq!(app(&w).request().unwrap().seamless, Seamless::X);
    click(&mut w, "Generate");
    // Done and saved: the result is on show, no longer the preview.
    let saved = |a: &ember_app::gui::app::EmberApp, seamless| {
        a.session.running.is_none()
            && a.display
                .results
                .first()
                .is_some_and(|r| r.seamless == seamless && r.path.is_some())
    };
    step_until(&mut w, "the result", |a| saved(a, Seamless::X));
    assert_eq!(app(&w).display.results[0].seamless, Seamless::X);
    assert_eq!(copies(&w), 0, "the image alone until asked");
    click(&mut w, "Show tiled");
    w.step();
    assert_eq!(copies(&w), 2, "one copy each side, left and right");
    w.get_by_label("the image");
    click(&mut w, "Show tiled");
    w.step();
    assert_eq!(copies(&w), 0);

    // Both axes: a 3x3 grid, and the choice is kept in settings.json.
    click(&mut w, "Seamless");
    click(&mut w, "Both axes (a grid)");
    click(&mut w, "Generate");
    step_until(&mut w, "the second result", |a| saved(a, Seamless::Both));
    click(&mut w, "Show tiled");
    w.step();
    assert_eq!(copies(&w), 8);
    w.state_mut().as_mut().unwrap().save_settings();
    drop(w);
    let w = open(
        FakeEngine::new(Duration::from_millis(1)),
        Paths::under(home.path()),
    );
    assert_eq!(app(&w).settings.seamless, Seamless::Both);
}

#[test]
fn an_a1111_image_made_with_tiling_turns_it_on_and_one_without_turns_it_off() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open(
        FakeEngine::new(Duration::from_millis(1)),
        Paths::under(home.path()),
    );
    w.step();
    let write = |name: &str, fields: &str| {
        let text = format!("a brick wall\nSteps: 20, Sampler: Euler a, Seed: 7{fields}");
        crate::a1111_png(home.path(), name, &text)
    };
    let tiled = write("tiled.png", ", Tiling: True");
    drop_files(&mut w, &[&tiled]);
    step_until(&mut w, "the settings", |a| {
        a.settings.seamless == Seamless::Both
    });
    let plain = write("plain.png", "");
    drop_files(&mut w, &[&plain]);
    step_until(&mut w, "the settings", |a| {
        a.settings.seamless == Seamless::Off
    });
}

#[test]
fn the_gallery_shows_a_seamless_image_tiled_too() {
    let home = tempfile::tempdir().unwrap();
    let mut w = crate::with_fake_model(home.path(), FakeEngine::new(Duration::from_millis(1)));
    w.state_mut().as_mut().unwrap().settings.seamless = Seamless::Both;
    click(&mut w, "Generate");
    step_until(&mut w, "the result to be saved", |a| {
        a.session.running.is_none() && a.display.results.iter().all(|r| r.path.is_some())
    });
    click(&mut w, "Gallery");
    step_until(&mut w, "the folder scan", |a| a.gallery.entries.len() == 1);
    let name = app(&w).gallery.entries[0].path.file_name().unwrap();
    let name = name.to_string_lossy().into_owned();
    click(&mut w, &name);
    step_until(&mut w, "the image to open", |a| {
        a.gallery
            .selected
            .as_ref()
            .is_some_and(|s| s.metadata.is_some() && s.texture.is_some())
    });
    assert_eq!(copies(&w), 0);
    click(&mut w, "Show tiled");
    w.step();
    assert_eq!(copies(&w), 8, "a 3x3 grid");
}
