//! `ember bench`: times the real networks of a family (SD 1.5, SD 2.x, SDXL, the SDXL
//! refiner) with random weights (no file needed) and counts their floating-point work, to
//! compare with PyTorch on the same machine.

mod flops;
pub mod generation;
pub mod lora;
mod tuning;

use flops::clip_flops_of;
pub use flops::{clip_flops, unet_flops, vae_decode_flops};
pub use tuning::{AttentionChoice, attention_choices};

use std::time::{Duration, Instant};

use burn::module::Module;
use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::device::{CastParams, Precision, tensor_from_vec};
use crate::error::{Error, Result};
use crate::family::{Family, TimeIds};
use crate::models::clip::ClipTextModel;
use crate::models::unet::AddedConditioning;

/// What to time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Unet,
    VaeDecode,
    TextEncoder,
    /// The live preview of one step (latents -> RGB on the device, read back).
    Preview,
    /// The TAESD live preview of one step (the released decoder's shape, random weights).
    PreviewTaesd,
    /// One ControlNet call (SD 1.5's ControlNet architecture, random weights).
    ControlNet,
}

impl Target {
    /// Parses `unet`, `vae-decode`, `text-encoder`, `preview`, `preview-taesd` or
    /// `controlnet`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "unet" => Ok(Target::Unet),
            "vae-decode" => Ok(Target::VaeDecode),
            "text-encoder" => Ok(Target::TextEncoder),
            "preview" => Ok(Target::Preview),
            "preview-taesd" => Ok(Target::PreviewTaesd),
            "controlnet" => Ok(Target::ControlNet),
            other => Err(Error::settings(format!(
                "unknown benchmark {other:?}; valid: unet, vae-decode, text-encoder, preview, \
                 preview-taesd, controlnet, lora, generate"
            ))),
        }
    }
}

/// The architecture names `ember bench --arch` takes.
pub fn parse_arch(name: &str) -> Result<Family> {
    match name {
        "sd15" | "sd1" => Ok(Family::Sd1),
        "sd2" => Ok(Family::Sd2),
        "sdxl" => Ok(Family::Sdxl),
        "sdxl-refiner" => Ok(Family::SdxlRefiner),
        other => Err(Error::settings(format!(
            "unknown architecture {other:?}; valid: sd15, sd2, sdxl, sdxl-refiner"
        ))),
    }
}

/// A benchmark to run.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub target: Target,
    /// Whose released architecture to time.
    pub family: Family,
    /// Image size in pixels (square).
    pub size: usize,
    pub batch: usize,
    pub warmup: usize,
    pub runs: usize,
    pub device: Device,
    pub precision: Precision,
    /// `vae-decode`: whole image or tiles, decided as a generation decides it.
    pub vae_tiling: crate::api::VaeTiling,
    /// `text-encoder`: time this checkpoint's text encoders (loaded as a generation loads
    /// them) instead of random weights of the family's architecture.
    pub checkpoint: Option<std::path::PathBuf>,
}

/// Timings of one benchmark.
#[derive(Clone, Debug)]
pub struct BenchResult {
    pub times: Vec<Duration>,
    /// The first call (a warm-up): on a GPU it also compiles the kernels and, where Burn's
    /// autotune has no stored answer for a shape yet, tunes them.
    pub first: Option<Duration>,
    /// Floating-point operations of one call (multiply-adds count as two).
    pub flops: f64,
    /// The most device memory Burn's allocator held after any call (its pools keep what a
    /// call needed); `None` on the CPU, whose memory is the process's (see peak RSS).
    pub peak_device_bytes: Option<u64>,
    /// The attention paths Ember chose itself (Burn's autotuned ones are in its tuning log).
    pub attention: Vec<String>,
}

impl BenchResult {
    /// The median time of the timed runs.
    pub fn median(&self) -> Duration {
        let mut t = self.times.clone();
        t.sort();
        t[t.len() / 2]
    }

    /// Achieved GFLOP/s at the median time.
    pub fn gflops_per_second(&self) -> f64 {
        self.flops / self.median().as_secs_f64() / 1e9
    }
}

/// Runs a benchmark on the family's architecture.
pub fn run(config: &BenchConfig) -> Result<BenchResult> {
    if config.size == 0 || !config.size.is_multiple_of(64) || config.size > 2048 {
        return Err(Error::settings(format!(
            "size must be a multiple of 64 up to 2048, got {}",
            config.size
        )));
    }
    if config.batch == 0 || config.batch > 16 || config.runs == 0 || config.runs > 100 {
        return Err(Error::settings("batch must be 1..=16 and runs 1..=100"));
    }
    if config.checkpoint.is_some() && config.target != Target::TextEncoder {
        return Err(Error::settings(
            "--model is read by `bench text-encoder` and `bench lora`; the other benchmarks \
             time random weights of --arch",
        ));
    }
    let d = &config.device;
    let dtype = config.precision.dtype();
    let (b, latent) = (config.batch, config.size / 8);
    let spec = config.family.spec();
    let mut attention = Vec::new();
    let (mut call, flops): (Box<dyn FnMut() -> Result<()>>, f64) = match config.target {
        Target::Unet => {
            let cfg = (spec.unet_preset)(4);
            let mut heads: Vec<usize> = (cfg.block_out_channels.iter().zip(&cfg.heads))
                .zip(&cfg.down_attention)
                .filter(|(_, attends)| **attends)
                .map(|((channels, heads), _)| channels / heads)
                .collect();
            heads.sort_unstable();
            heads.dedup();
            for head in heads {
                let path = kernels::attention_path(d, head);
                attention.push(format!("heads of {head}: {path}"));
            }
            let unet = cfg.init(d).map(&mut CastParams(dtype));
            let x = random([b, 4, latent, latent], d).cast(dtype);
            let ctx = cfg.cross_attention_dim;
            let context = random([b, 77, ctx, 1], d).reshape([b, 77, ctx]).cast(dtype);
            let added = cfg.addition.map(|add| {
                let ids = spec.time_ids.map_or(0, TimeIds::count);
                let pooled = add.input_dim - ids * add.time_embed_dim;
                AddedConditioning {
                    text_embeds: random([b, pooled, 1, 1], d).reshape([b, pooled]),
                    time_ids: (0..b * ids)
                        .map(|i| [1024.0, 1024.0, 0.0, 0.0, 1024.0, 1024.0][i % 6])
                        .collect(),
                }
            });
            let flops = unet_flops(&cfg, b, latent, latent, 77);
            (
                Box::new(move || {
                    sync(unet.forward(x.clone(), &vec![500.0; b], &context, added.as_ref()))
                }),
                flops,
            )
        }
        Target::VaeDecode => {
            let cfg = spec.vae_preset();
            let vae = cfg.init(d).map(&mut CastParams(dtype));
            let z = random([b, 4, latent, latent], d).cast(dtype);
            let flops = vae_decode_flops(&cfg, b, latent, latent);
            let head = cfg.block_out_channels.last().copied().unwrap_or(0);
            let path = kernels::attention_path(d, head);
            attention.push(format!(
                "{latent}x{latent} tokens, head {head}, 1 head x batch: {path}"
            ));
            let size = config.size as u32;
            let available = crate::memory::available_on(d);
            let tiles = crate::pipeline::vae_plan::plan_tiles(
                config.vae_tiling,
                &cfg,
                (size, size),
                available,
            );
            (
                Box::new(move || match tiles {
                    Some(tiles) => sync(vae.decode_tiled(z.clone(), tiles)),
                    None => sync(vae.decode(z.clone())),
                }),
                flops,
            )
        }
        Target::TextEncoder => {
            let encoders = text_encoders(config)?;
            let ids =
                Tensor::<2, Int>::from_data(TensorData::new(vec![320i64; b * 77], [b, 77]), d);
            let flops = encoders.iter().map(|clip| clip_flops_of(clip, b)).sum();
            (
                Box::new(move || {
                    for clip in &encoders {
                        sync(clip.forward(ids.clone()).last_hidden_state.unsqueeze::<4>())?;
                    }
                    Ok(())
                }),
                flops,
            )
        }
        Target::ControlNet => {
            let cfg = crate::models::controlnet::ControlNetConfig {
                unet: (spec.unet_preset)(4),
                // SD 1.5's ControlNets (control_v11p_sd15_*).
                embedding_channels: vec![16, 32, 96, 256],
                conditioning_channels: 3,
            };
            if cfg.unet.addition.is_some() {
                return Err(Error::settings(
                    "the ControlNet benchmark runs SD 1.x / 2.x architectures (--arch sd15 or sd2)",
                ));
            }
            let net = cfg.init(d).map(&mut CastParams(dtype));
            let x = random([b, 4, latent, latent], d).cast(dtype);
            let ctx = cfg.unet.cross_attention_dim;
            let context = random([b, 77, ctx, 1], d).reshape([b, 77, ctx]).cast(dtype);
            let hint = random([b, 3, config.size, config.size], d).cast(dtype);
            (
                Box::new(move || {
                    let r = net.forward(
                        x.clone(),
                        &vec![500.0; b],
                        (&context, None),
                        hint.clone(),
                        1.0,
                    );
                    sync(r.mid)
                }),
                // Not counted: compare the time with `ember bench unet` (the CLI prints both).
                0.0,
            )
        }
        Target::Preview => {
            let z = random([b, 4, latent, latent], d).cast(dtype);
            let config = config.clone();
            // One [hw, 4] x [4, 3] product: the rest (scale, clamp, read-back) is not counted.
            let flops = (latent * latent * 4 * 3 * 2) as f64;
            (
                Box::new(move || {
                    std::hint::black_box(crate::preview::latent_preview(&z, config.family));
                    Ok(())
                }),
                flops,
            )
        }
        Target::PreviewTaesd => {
            let z = random([b, 4, latent, latent], d).cast(dtype);
            let taesd = crate::preview::taesd::TaesdConfig::released(4);
            let flops = taesd.flops(latent, latent);
            let decoder = taesd.init(d);
            (
                Box::new(move || {
                    std::hint::black_box(crate::preview::taesd_preview(&decoder, &z));
                    Ok(())
                }),
                flops,
            )
        }
    };
    let mut peak_device_bytes = None;
    let mut timed = |call: &mut dyn FnMut() -> Result<()>| {
        let start = Instant::now();
        call()?;
        let elapsed = start.elapsed();
        if let Some(usage) = d.memory_pool_usage() {
            peak_device_bytes = peak_device_bytes.max(Some(usage.bytes_reserved));
        }
        Ok::<_, Error>(elapsed)
    };
    let first = match config.warmup > 0 {
        true => Some(timed(&mut call)?),
        false => None,
    };
    for _ in 1..config.warmup {
        timed(&mut call)?;
    }
    let times = (0..config.runs)
        .map(|_| timed(&mut call))
        .collect::<Result<_>>()?;
    Ok(BenchResult {
        times,
        first,
        flops,
        peak_device_bytes,
        attention,
    })
}

/// The text encoders to time: the checkpoint's, or random ones of the family's architecture.
fn text_encoders(config: &BenchConfig) -> Result<Vec<ClipTextModel>> {
    let d = &config.device;
    if let Some(path) = &config.checkpoint {
        let options = crate::weights::LoadOptions::new(d.clone(), config.precision);
        let model = crate::weights::load(path, &options)?;
        return Ok(model.encoders.iter().map(|e| e.network_on(d)).collect());
    }
    let cast = &mut CastParams(config.precision.dtype());
    let presets = config.family.spec().encoders.iter().map(|e| (e.preset)());
    Ok(presets.map(|cfg| cfg.init(d).map(cast)).collect())
}

/// Waits until the device has finished all queued work (GPU backends run asynchronously).
/// Reading one value of `t` back and dropping it is not enough: Burn's `into_data` returns
/// before the values arrive and waits only when they are first used (on lavapipe it returned
/// in 0.3 ms, its values 0.43 s later).
fn sync(t: Tensor<4>) -> Result<()> {
    let device = t.device();
    drop(t);
    device.sync().map_err(|error| {
        let cause = crate::device::innermost_cause(&error.to_string()).to_owned();
        Error::Device(format!("the GPU failed while benchmarking ({cause})"))
    })
}

fn random(dims: [usize; 4], device: &Device) -> Tensor<4> {
    let n: usize = dims.iter().product();
    // A fixed pseudo-random pattern: the values do not matter for timing.
    let data = (0..n)
        .map(|i| ((i as f32 * 0.618_034).fract() - 0.5) * 2.0)
        .collect();
    tensor_from_vec(data, dims, device)
}
