//! `ember bench generate`: a whole generation on a family's architecture with random
//! weights, as a job runs; prints its time and the most device memory it held.

use inference::bench::{self, generation};
use inference::device::{DeviceKind, choose_precision};

use super::BenchArgs;
use super::bench::seconds;

pub fn run(args: &BenchArgs) -> Result<(), String> {
    let err = |e: inference::Error| e.to_string();
    let opened = DeviceKind::parse(&args.device)
        .map_err(err)?
        .open()
        .map_err(err)?;
    let (precision, vae_upcast) = choose_precision(&args.precision, &opened).map_err(err)?;
    let size = u32::try_from(args.size).map_err(|_| format!("size {} is too large", args.size))?;
    let images = u32::try_from(args.batch.div_ceil(2)).unwrap_or(u32::MAX);
    let config = generation::GenerationConfig {
        family: bench::parse_arch(&args.arch).map_err(err)?,
        size,
        images,
        steps: args.steps,
        runs: args.runs.saturating_sub(1),
        device: opened.device.clone(),
        precision,
        vae_upcast,
        vae_tiling: inference::api::VaeTiling::parse(&args.vae_tiling).map_err(err)?,
        seamless: inference::api::Seamless::parse(&args.seamless).map_err(err)?,
    };
    let result = generation::run(&config).map_err(err)?;
    let median = result.median().as_secs_f64();
    let rss = inference::memory::peak_resident_bytes();
    if args.json {
        let json = serde_json::json!({
            "implementation": "ember", "target": "generate", "arch": args.arch,
            "size": args.size, "images": images, "steps": args.steps, "device": args.device,
            "adapter": opened.description, "precision": precision.to_string(),
            "vae_upcast": vae_upcast, "seamless": args.seamless, "load_s": result.load.as_secs_f64(),
            "first_s": result.first.as_secs_f64(), "median_s": median,
            "runs": result.times.len(), "peak_device_bytes": result.peak_device_bytes,
            "estimated_working_bytes": result.estimated_working_bytes,
            "peak_rss_bytes": rss, "warnings": result.warnings,
        });
        println!("{json}");
        return Ok(());
    }
    let human = inference::memory::human_bytes;
    let device_memory = result
        .peak_device_bytes
        .map(|b| format!(", peak device memory {}", human(b)))
        .unwrap_or_default();
    let timed = match result.times.len() {
        0 => String::new(),
        n => format!(", then median {} ({n} runs)", seconds(median)),
    };
    let vae = if vae_upcast {
        ", VAE in f32 unless f16-safe"
    } else {
        ""
    };
    println!(
        "generate {} {size}x{size}, {images} image(s), {} steps ({precision}{vae}, {}): load {}, \
         first generation {}{timed}{device_memory} (estimated before the job: {} working \
         memory beside the weights), peak RSS {}",
        args.arch,
        args.steps,
        args.device,
        seconds(result.load.as_secs_f64()),
        seconds(result.first.as_secs_f64()),
        human(result.estimated_working_bytes),
        rss.map_or_else(|| "unknown".into(), human),
    );
    println!("  on {}", opened.description);
    for warning in &result.warnings {
        println!("  {warning}");
    }
    Ok(())
}
