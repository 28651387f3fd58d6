//! `ember bench unet|vae-decode|text-encoder|preview`: times a network (or the per-step live
//! preview) and prints GFLOP/s.

use inference::bench::{self, BenchConfig, Target};
use inference::device::{DeviceKind, Precision};

use super::BenchArgs;

pub fn run(args: &BenchArgs) -> Result<(), String> {
    let err = |e: inference::Error| e.to_string();
    let config = BenchConfig {
        target: Target::parse(&args.target).map_err(err)?,
        family: bench::parse_arch(&args.arch).map_err(err)?,
        size: args.size,
        batch: args.batch,
        warmup: args.warmup,
        runs: args.runs,
        device: DeviceKind::parse(&args.device)
            .map_err(err)?
            .device()
            .map_err(err)?,
        precision: Precision::parse(&args.precision).map_err(err)?,
    };
    let result = bench::run(&config).map_err(err)?;
    let median = result.median().as_secs_f64();
    let min = result.times.iter().min().map_or(0.0, |t| t.as_secs_f64());
    let peak = inference::memory::peak_resident_bytes();
    if args.json {
        let json = serde_json::json!({
            "implementation": "ember",
            "target": args.target, "arch": args.arch, "size": args.size, "batch": args.batch,
            "device": args.device, "precision": args.precision,
            "median_s": median, "min_s": min, "runs": args.runs,
            "gflop": result.flops / 1e9, "gflops_per_s": result.gflops_per_second(),
            "peak_rss_bytes": peak,
        });
        println!("{json}");
    } else {
        println!(
            "{} {} {}x{} batch {} ({}, {}): median {} (min {}, {} runs), {:.1} GFLOP, {:.1} GFLOP/s, peak RSS {}",
            args.target,
            args.arch,
            args.size,
            args.size,
            args.batch,
            args.precision,
            args.device,
            seconds(median),
            seconds(min),
            args.runs,
            result.flops / 1e9,
            result.gflops_per_second(),
            peak.map_or_else(|| "unknown".into(), inference::memory::human_bytes)
        );
    }
    Ok(())
}

/// `1.234 s` or, below a second, `12.345 ms` (the preview takes well under a millisecond).
fn seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else {
        format!("{:.3} ms", s * 1e3)
    }
}
