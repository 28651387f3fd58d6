//! A short fixed-seed fuzzing round of every target in CI (see `ember_tests::fuzz`; the long
//! runs README reports come from `cargo run -p ember-tests --bin fuzz`).

use ember_tests::fuzz::{Findings, Targets, fuzz};

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
    let f = fuzz(&t.safetensors_seeds(), 160, RUNS, 7, &mut |b| {
        t.weight_file(b)
    });
    check("safetensors", &f);
    let f = fuzz(&t.ckpt_seeds(), 4096, RUNS, 7, &mut |b| t.weight_file(b));
    check("ckpt", &f);
    let f = fuzz(&t.pickle_seeds(), 4096, RUNS, 7, &mut |b| t.pickle(b));
    check("pickle", &f);
    let f = fuzz(&t.png_seeds(), 4096, RUNS, 7, &mut |b| t.png(b));
    check("png", &f);
    let f = fuzz(&t.metadata_text_seeds(), 4096, RUNS, 7, &mut |b| {
        t.metadata_text(b)
    });
    check("metadata", &f);
    assert!(
        t.queue_seeds().iter().all(|s| t.queue(s)),
        "a queue.json seed is refused"
    );
    let f = fuzz(&t.queue_seeds(), 4096, RUNS, 7, &mut |b| t.queue(b));
    check("queue", &f);
}
