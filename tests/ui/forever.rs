//! A1111's Generate forever: right-click Generate, and it is clicked again whenever the
//! queue is done (a new seed each time), until Stop forever, Cancel all, or a failed image.

use std::collections::BTreeSet;
use std::time::Duration;

use egui_kittest::kittest::Queryable;
use ember_tests::fake_engine::FakeEngine;

use crate::{app, click, has_notice, pngs_in, step_until};

fn right_click(w: &mut crate::Window, label: &str) {
    w.get_by_label(label).hover();
    w.step();
    w.get_by_label(label).click_secondary();
    w.step();
    w.step();
}

#[test]
fn generate_forever_makes_image_after_image_until_stopped() {
    let home = tempfile::tempdir().unwrap();
    let mut w = crate::with_fake_model(home.path(), FakeEngine::new(Duration::from_millis(2)));
    w.state_mut().as_mut().unwrap().settings.prompt = "a lighthouse".into();
    right_click(&mut w, "Generate");
    click(&mut w, "Generate forever");
    assert!(app(&w).session.forever);
    let outputs = home.path().join("outputs");
    step_until(&mut w, "three images", |_| pngs_in(&outputs) >= 3);
    // Saved as NNNNN-SEED.png.
    let seeds: BTreeSet<String> = std::fs::read_dir(&outputs)
        .unwrap()
        .filter_map(|f| {
            Some(
                f.ok()?
                    .path()
                    .file_stem()?
                    .to_str()?
                    .split('-')
                    .nth(1)?
                    .to_string(),
            )
        })
        .collect();
    assert!(seeds.len() >= 3, "a new seed each time: {seeds:?}");

    click(&mut w, "Stop forever");
    assert!(!app(&w).session.forever);
    step_until(&mut w, "the image under way to be made and saved", |a| {
        a.session.running.is_none()
            && a.session.queue.is_empty()
            && a.display.results.iter().all(|r| r.path.is_some())
    });
    let made = pngs_in(&outputs);
    for _ in 0..20 {
        w.step();
    }
    assert_eq!(pngs_in(&outputs), made, "no image after stopping");

    // The menu says what a right-click does now, and Cancel all stops it too.
    right_click(&mut w, "Generate");
    click(&mut w, "Generate forever");
    step_until(&mut w, "an image under way", |a| {
        a.session.running.is_some()
    });
    click(&mut w, "Cancel all");
    assert!(!app(&w).session.forever);
}

#[test]
fn a_failed_image_stops_generate_forever_with_one_error() {
    let home = tempfile::tempdir().unwrap();
    let mut w = crate::with_fake_model(home.path(), FakeEngine::new(Duration::from_millis(1)));
    w.state_mut().as_mut().unwrap().settings.prompt = "panic".into();
    right_click(&mut w, "Generate");
    click(&mut w, "Generate forever");
    step_until(&mut w, "the failure", |a| {
        has_notice(a, "Generate forever stopped")
    });
    for _ in 0..20 {
        w.step();
    }
    let app = app(&w);
    assert!(!app.session.forever);
    assert!(app.session.running.is_none() && app.session.queue.is_empty());
    let failures = (app.session.notices.iter())
        .filter(|n| n.text.contains("failed"))
        .count();
    assert_eq!(failures, 1);
}
