//! The seed row's Extra options and the noise source: what the widgets show, what the
//! queued jobs get, and what a dropped A1111 image brings.

use std::time::Duration;

use egui_kittest::kittest::Queryable;
use ember_app::gui::paths::Paths;
use ember_tests::fake_engine::FakeEngine;
use inference::api::RngSource;

use crate::{app, click, drop_files, has_notice, open, step_until};

/// Whether some widget is labelled `label` (a slider's text labels it twice).
fn shows(w: &crate::Window, label: &str) -> bool {
    w.query_all_by_label(label).next().is_some()
}

#[test]
fn a_batch_of_variations_keeps_the_seed_and_counts_the_variation_seed_up() {
    let home = tempfile::tempdir().unwrap();
    let engine = FakeEngine::new(Duration::from_millis(40));
    let mut w = crate::with_fake_model(home.path(), engine);
    assert!(
        !shows(&w, "Variation strength"),
        "the extras wait behind their box"
    );
    click(&mut w, "Extra");
    assert!(shows(&w, "Variation strength"));
    assert!(shows(&w, "Resize seed from"));
    // Each seed's button rolls a new one and locks it.
    let before = app(&w).settings.clone();
    click(&mut w, "New seed");
    click(&mut w, "New");
    let after = &app(&w).settings;
    assert!(after.seed_locked && after.noise.variation_locked);
    assert_ne!(after.seed, before.seed);
    assert_ne!(after.noise.variation_seed, before.noise.variation_seed);
    {
        let s = &mut w.state_mut().as_mut().unwrap().settings;
        (s.seed, s.seed_locked, s.batch_count, s.steps) = (42, true, 3, 20);
        (s.noise.variation_seed, s.noise.variation_locked) = (7, true);
        s.noise.variation_strength = 0.3;
    }
    click(&mut w, "Generate");
    let jobs: Vec<(u64, u64)> = {
        let session = &app(&w).session;
        let running = session.running.iter().map(|r| &r.work);
        let queued = session.queue.iter().map(|q| &q.work);
        running
            .chain(queued)
            .map(|work| match work {
                ember_app::gui::session::Work::Generate(r) => {
                    (r.seed, r.noise.active_variation().unwrap().seed)
                }
                _ => panic!("a generation"),
            })
            .collect()
    };
    assert_eq!(jobs, [(42, 7), (42, 8), (42, 9)]);
    assert!(
        w.query_all_by_label_contains("seeds 42 variation 8")
            .next()
            .is_some(),
        "the queue names each job's variation seed"
    );
    // The box off, the extras are off too (A1111's "Extra").
    click(&mut w, "Extra");
    let request = app(&w).request().unwrap();
    assert_eq!(
        (request.noise.variation, request.noise.resize_from),
        (None, None)
    );
}

#[test]
fn the_noise_source_menu_reaches_the_request_and_is_remembered() {
    let home = tempfile::tempdir().unwrap();
    let paths = Paths::under(home.path());
    let mut w = open(FakeEngine::new(Duration::from_millis(1)), paths.clone());
    w.step();
    assert_eq!(app(&w).request().unwrap().noise.rng, RngSource::Cpu);
    click(&mut w, "Advanced");
    click(&mut w, "Noise source");
    click(&mut w, "NV (A1111's GPU on NVIDIA)");
    assert_eq!(app(&w).request().unwrap().noise.rng, RngSource::Nv);
    w.state_mut().as_mut().unwrap().save_settings();
    drop(w);
    let w = open(FakeEngine::new(Duration::from_millis(1)), paths);
    assert_eq!(
        app(&w).settings.noise.rng,
        RngSource::Nv,
        "kept in settings.json"
    );
}

#[test]
fn a_dropped_a1111_image_brings_its_gpu_noise_and_variation() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open(
        FakeEngine::new(Duration::from_millis(1)),
        Paths::under(home.path()),
    );
    w.step();
    let image = home.path().join("a1111.png");
    let pixels = inference::imaging::ImageRgb8 {
        width: 8,
        height: 8,
        pixels: vec![90; 8 * 8 * 3],
    };
    let text = "a misty harbour\nSteps: 24, Sampler: Euler a, Schedule type: Automatic, CFG scale: 7, \
                Seed: 1234, Size: 512x512, Variation seed: 99, Variation seed strength: 0.25, \
                Version: v1.10.1";
    let png = inference::imaging::encode_png(&pixels, &[("parameters", text)]).unwrap();
    std::fs::write(&image, png).unwrap();
    drop_files(&mut w, &[&image]);
    step_until(&mut w, "the settings to be restored", |a| {
        a.settings.prompt == "a misty harbour"
    });
    let noise = app(&w).request().unwrap().noise;
    assert_eq!(noise.rng, RngSource::Nv, "no RNG field: A1111's GPU noise");
    let variation = noise.variation.unwrap();
    assert_eq!((variation.seed, variation.strength), (99, 0.25));
    assert!(has_notice(app(&w), "NV"), "{:?}", app(&w).session.notices);
    assert!(shows(&w, "Variation strength"), "the extras show");
}

/// The seed field takes any seed exactly (ComfyUI's reach 2^64 − 1, past what an f64 holds)
/// and locks it; A1111's -1 unlocks it (a new random seed each generation); text that is
/// neither changes nothing.
#[test]
fn the_seed_field_takes_every_u64_exactly_and_minus_one_for_random() {
    let home = tempfile::tempdir().unwrap();
    let mut w = open(
        FakeEngine::new(Duration::from_millis(1)),
        Paths::under(home.path()),
    );
    w.step();
    let retype = |w: &mut crate::Window, text: &str| {
        w.get_by_label("Seed").focus();
        w.step();
        crate::press_in_one_frame(w, egui::Modifiers::COMMAND, &[egui::Key::A]);
        w.get_by_label("Seed").type_text(text);
        w.step();
    };
    retype(&mut w, "18446744073709551615");
    let s = &app(&w).settings;
    assert_eq!((s.seed, s.seed_locked), (u64::MAX, true));
    retype(&mut w, "-1");
    assert!(!app(&w).settings.seed_locked, "-1: random each generation");
    assert_eq!(app(&w).settings.seed, u64::MAX, "the last seed stays shown");
    retype(&mut w, "12ab");
    assert_eq!(
        app(&w).settings.seed,
        u64::MAX,
        "not a seed: nothing changes"
    );
    retype(&mut w, "9007199254740993");
    assert_eq!(
        app(&w).settings.seed,
        9_007_199_254_740_993,
        "2^53 + 1, exactly"
    );
}
