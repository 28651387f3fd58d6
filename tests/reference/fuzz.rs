//! A short fixed-seed fuzzing round of every target in CI (see `ember_tests::fuzz`; the long
//! runs README reports come from `cargo run -p ember-tests --bin fuzz`).

use ember_tests::fuzz::{Findings, Targets};

/// Inputs per target in CI: a few seconds each.
const RUNS: u64 = 1500;

fn check(name: &str, f: &Findings) {
    assert_eq!(f.runs, RUNS, "{name}");
    let panics: Vec<&str> = f.panics.iter().map(|(m, _)| m.as_str()).take(5).collect();
    assert!(
        panics.is_empty(),
        "{name}: {} panics, e.g. {panics:?}",
        f.panics.len()
    );
    assert!(f.slow.is_empty(), "{name}: {} slow inputs", f.slow.len());
    // The seeds themselves must be accepted inputs, or the target tests nothing.
    assert!(f.accepted > 0, "{name}: no mutated input was accepted");
}

#[test]
fn every_fuzz_target_survives_a_short_round() {
    let dir = tempfile::tempdir().unwrap();
    let t = Targets::new(dir.path());
    for seed in t.safetensors_seeds().iter().chain(&t.ckpt_seeds()[..1]) {
        assert!(t.weight_file(seed), "a weight-file seed is refused");
    }
    assert!(
        t.png_seeds().iter().all(|s| t.png(s)),
        "a PNG seed is refused"
    );
    assert!(
        t.exif_seeds().iter().all(|s| t.exif_image(s)),
        "a JPEG/WebP seed is refused"
    );
    assert!(
        t.queue_seeds().iter().all(|s| t.queue(s)),
        "a queue.json seed is refused"
    );
    for target in t.all() {
        check(target.name, &target.fuzz(RUNS, 7));
    }
}
