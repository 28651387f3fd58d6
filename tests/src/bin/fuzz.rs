//! Long fuzzing runs: `cargo run -p ember-tests --bin fuzz -- [RUNS] [SEED] [TARGET]` fuzzes
//! every target (or the one named: safetensors, ckpt, pickle, png, metadata, queue) RUNS times
//! (default 1,000,000) and prints the counts README reports. Exits 1 when any target panicked
//! or had a slow input (written to `fuzz-findings/`).

use std::time::Instant;

use ember_tests::fuzz::{Findings, Targets};

fn main() {
    let mut args = std::env::args().skip(1);
    let runs: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let only = args.next();
    let chosen = |name: &str| only.as_deref().is_none_or(|only| only == name);
    let dir = tempfile::tempdir().expect("scratch dir");
    let t = Targets::new(dir.path());
    let mut failed = false;
    let mut report = |name: &str, f: Findings, took: std::time::Duration| {
        println!(
            "{name}: {} inputs, {} accepted, {} panics, {} slow (slowest {:?}), {:.0} s",
            f.runs,
            f.accepted,
            f.panics.len(),
            f.slow.len(),
            f.slowest,
            took.as_secs_f64()
        );
        let out = std::path::Path::new("fuzz-findings");
        for (i, (message, input)) in f.panics.iter().enumerate().take(20) {
            println!("  panic: {message}");
            std::fs::create_dir_all(out).expect("findings dir");
            std::fs::write(out.join(format!("{name}-panic-{i}")), input).expect("write");
        }
        for (i, input) in f.slow.iter().enumerate().take(20) {
            std::fs::create_dir_all(out).expect("findings dir");
            std::fs::write(out.join(format!("{name}-slow-{i}")), input).expect("write");
        }
        failed |= !f.panics.is_empty() || !f.slow.is_empty();
    };
    for target in t.all().iter().filter(|target| chosen(target.name)) {
        let start = Instant::now();
        let f = target.fuzz(runs, seed);
        report(target.name, f, start.elapsed());
    }
    std::process::exit(i32::from(failed));
}
