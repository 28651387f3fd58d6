//! `ember bench unet|vae-decode|text-encoder|preview|preview-taesd|controlnet|lora|generate`:
//! times a network (or the per-step live preview, either kind) and prints GFLOP/s; a
//! ControlNet call is timed beside a UNet call of the same size, `lora` times merging,
//! changing and removing a kohya LoRA, and `generate` a whole generation (in
//! `bench_generate`).

use inference::bench::{self, BenchConfig, Target};
use inference::device::{DeviceKind, Precision};

use super::BenchArgs;

/// Where Burn's GPU runtime logs what a benchmark process did (read, then removed).
pub struct BenchLogs {
    /// Burn's autotune decisions: which attention kernel it picked.
    pub tuning: std::path::PathBuf,
    /// The kernels compiled rather than found among the kept ones.
    pub compiled: std::path::PathBuf,
}

pub fn run(args: &BenchArgs, logs: Option<&BenchLogs>) -> Result<(), String> {
    let result = run_target(args, logs);
    if let Some(logs) = logs {
        let _ = std::fs::remove_file(&logs.tuning);
        let _ = std::fs::remove_file(&logs.compiled);
    }
    result
}

fn run_target(args: &BenchArgs, logs: Option<&BenchLogs>) -> Result<(), String> {
    let err = |e: inference::Error| e.to_string();
    if args.target == "lora" {
        return lora(args);
    }
    if args.target == "generate" {
        return super::bench_generate::run(args);
    }
    let opened = DeviceKind::parse(&args.device)
        .map_err(err)?
        .open()
        .map_err(err)?;
    let config = BenchConfig {
        target: Target::parse(&args.target).map_err(err)?,
        family: bench::parse_arch(&args.arch).map_err(err)?,
        size: args.size,
        batch: args.batch,
        warmup: args.warmup,
        runs: args.runs,
        device: opened.device.clone(),
        precision: Precision::parse(&args.precision).map_err(err)?,
        vae_tiling: inference::api::VaeTiling::parse(&args.vae_tiling).map_err(err)?,
        checkpoint: args.model.clone(),
    };
    let result = bench::run(&config).map_err(err)?;
    if config.target == Target::ControlNet {
        let unet = bench::run(&BenchConfig {
            target: Target::Unet,
            ..config
        })
        .map_err(err)?;
        let (c, u) = (result.median().as_secs_f64(), unet.median().as_secs_f64());
        if args.json {
            let json = serde_json::json!({
                "implementation": "ember", "target": "controlnet", "arch": args.arch,
                "size": args.size, "batch": args.batch, "device": args.device,
                "precision": args.precision, "controlnet_median_s": c, "unet_median_s": u,
                "ratio": c / u,
            });
            println!("{json}");
        } else {
            println!(
                "controlnet {} {}x{} batch {} ({}, {}): ControlNet call {} beside UNet call {} \
                 (ratio {:.2}; a step with it costs {:.2}x the step without)",
                args.arch,
                args.size,
                args.size,
                args.batch,
                args.precision,
                args.device,
                seconds(c),
                seconds(u),
                c / u,
                (c + u) / u
            );
        }
        return Ok(());
    }
    let median = result.median().as_secs_f64();
    let min = result.times.iter().min().map_or(0.0, |t| t.as_secs_f64());
    let peak = inference::memory::peak_resident_bytes();
    let first = result.first.map(|t| t.as_secs_f64());
    let tuned = logs.map_or_else(Vec::new, |logs| bench::attention_choices(&logs.tuning));
    // Kernels are compiled only on a GPU; a warm cache leaves none to compile.
    let compiled = (logs.filter(|_| opened.gpu))
        .map(|logs| inference::device::kernels_compiled(&logs.compiled));
    let attention: Vec<String> = (result.attention.iter().cloned())
        .chain(tuned.iter().map(ToString::to_string))
        .collect();
    let arch = model_or_arch(args);
    if args.json {
        let json = serde_json::json!({
            "implementation": "ember",
            "target": args.target, "arch": arch, "size": args.size, "batch": args.batch,
            "device": args.device, "adapter": opened.description, "precision": args.precision,
            "median_s": median, "min_s": min, "runs": args.runs,
            "gflop": result.flops / 1e9, "gflops_per_s": result.gflops_per_second(),
            "peak_rss_bytes": peak, "peak_device_bytes": result.peak_device_bytes,
            "first_call_s": first, "kernels_compiled": compiled,
            "attention": attention,
        });
        println!("{json}");
    } else {
        let human = inference::memory::human_bytes;
        let device_memory = result
            .peak_device_bytes
            .map(|b| format!(", peak device memory {}", human(b)))
            .unwrap_or_default();
        let first = first
            .map(|s| format!(", first call {}", seconds(s)))
            .unwrap_or_default();
        let compiled = compiled
            .map(|n| format!(", {n} kernels compiled"))
            .unwrap_or_default();
        println!(
            "{} {} {}x{} batch {} ({}, {}): median {} (min {}, {} runs), {:.1} GFLOP, {:.1} GFLOP/s, peak RSS {}{}{}{}",
            args.target,
            arch,
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
            peak.map_or_else(|| "unknown".into(), human),
            device_memory,
            first,
            compiled,
        );
        println!("  on {}", opened.description);
        for choice in &attention {
            println!("  attention {choice}");
        }
    }
    Ok(())
}

/// `1.234 s` or, below a second, `12.345 ms` (the preview takes well under a millisecond).
pub(super) fn seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else {
        format!("{:.3} ms", s * 1e3)
    }
}

/// What was timed: the checkpoint given with `--model`, or `--arch`.
fn model_or_arch(args: &BenchArgs) -> String {
    match &args.model {
        Some(path) => path.display().to_string(),
        None => args.arch.clone(),
    }
}

/// `ember bench lora`.
fn lora(args: &BenchArgs) -> Result<(), String> {
    let err = |e: inference::Error| e.to_string();
    let device = DeviceKind::parse(&args.device)
        .map_err(err)?
        .device()
        .map_err(err)?;
    let options = inference::weights::LoadOptions::new(
        device,
        Precision::parse(&args.precision).map_err(err)?,
    );
    let t = match &args.model {
        Some(path) => bench::lora::run_on_file(path, args.rank, args.runs, &options),
        None => bench::parse_arch(&args.arch)
            .and_then(|family| bench::lora::run(family, args.rank, args.runs, &options)),
    }
    .map_err(err)?;
    let arch = model_or_arch(args);
    let s = |d: std::time::Duration| d.as_secs_f64();
    if args.json {
        let json = serde_json::json!({
            "implementation": "ember", "target": "lora", "arch": arch, "rank": args.rank,
            "device": args.device, "precision": args.precision, "modules": t.modules,
            "file_bytes": t.file_bytes, "merged_bytes": t.merged_bytes,
            "first_merge_s": s(t.first_merge), "change_strength_s": s(t.change_strength),
            "remove_s": s(t.remove), "merge_again_s": s(t.merge_again), "runs": t.runs,
        });
        println!("{json}");
    } else {
        println!(
            "lora {} rank {} ({}, {}): {} modules, {} file, {} of weights changed; first merge {}, \
             strength change {}, removal {}, merged again {} (medians of {})",
            arch,
            args.rank,
            args.precision,
            args.device,
            t.modules,
            inference::memory::human_bytes(t.file_bytes),
            inference::memory::human_bytes(t.merged_bytes),
            seconds(s(t.first_merge)),
            seconds(s(t.change_strength)),
            seconds(s(t.remove)),
            seconds(s(t.merge_again)),
            t.runs
        );
    }
    Ok(())
}
