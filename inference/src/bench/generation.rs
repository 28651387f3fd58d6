//! `ember bench generate`: a whole txt2img generation (prompt encoding, every step, the VAE
//! decode) on a family's released architecture with random weights, as a job runs: the
//! same check of its memory before it starts, the same residency and VAE-tiling choices.
//! It reports the time and the most device memory Burn's pools held, which is what says
//! whether, say, SDXL at 1024² fits an 8 GiB card.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use burn::tensor::Device;

use crate::api::{GenerateRequest, Progress, Seamless, VaeTiling};
use crate::device::Precision;
use crate::error::Result;
use crate::family::Family;
use crate::weights::LoadOptions;
use crate::worker::estimate::{self, Speed};

/// A generation to time.
#[derive(Clone, Debug)]
pub struct GenerationConfig {
    pub family: Family,
    /// Image side in pixels.
    pub size: u32,
    pub images: u32,
    pub steps: u32,
    /// Generations timed after the first (which compiles a GPU's kernels).
    pub runs: usize,
    pub device: Device,
    pub precision: Precision,
    /// Keep the VAE in f32 beside half-precision networks (`--precision auto` on a GPU).
    pub vae_upcast: bool,
    pub vae_tiling: VaeTiling,
    pub seamless: Seamless,
}

/// What a generation took.
#[derive(Clone, Debug)]
pub struct GenerationResult {
    /// Writing the random checkpoint and loading it, as a user's file loads.
    pub load: Duration,
    /// The first generation: on a GPU it also compiles (and may tune) the kernels.
    pub first: Duration,
    /// The generations after it.
    pub times: Vec<Duration>,
    /// The working memory the check before a job estimated (weights apart), bytes.
    pub estimated_working_bytes: u64,
    /// The most device memory Burn's pools held at any step or stage (`None` on the CPU).
    pub peak_device_bytes: Option<u64>,
    /// What the generations said (a VAE decoded in tiles, a stage run again in f32).
    pub warnings: Vec<String>,
}

impl GenerationResult {
    /// The median of the timed generations (the first where none were timed).
    pub fn median(&self) -> Duration {
        let mut times = self.times.clone();
        times.sort();
        times.get(times.len() / 2).copied().unwrap_or(self.first)
    }
}

/// Loads the family's architecture with random weights and generates `runs + 1` times.
pub fn run(config: &GenerationConfig) -> Result<GenerationResult> {
    let device = &config.device;
    let options = LoadOptions {
        vae_upcast: config.vae_upcast,
        ..LoadOptions::new(device.clone(), config.precision)
    };
    let start = Instant::now();
    let model =
        crate::weights::random::random_model(config.family, &options, &std::env::temp_dir())?;
    let load = start.elapsed();
    let request = GenerateRequest {
        prompt: "a lighthouse on a cliff at dusk, oil painting".into(),
        width: config.size,
        height: config.size,
        steps: config.steps,
        batch: config.images,
        seed: 1,
        vae_tiling: config.vae_tiling,
        seamless: config.seamless,
        ..GenerateRequest::default()
    };
    // The check a job gets before it starts; its time estimate (which would run a UNet call
    // to measure the device's speed) is not wanted here.
    let available = crate::memory::available_on(device);
    let cost = estimate::cost(
        &model,
        &request,
        (&mut Speed(Some(0.0)), &|| false),
        available,
    )?;

    let mut peak = device.memory_pool_usage().map(|u| u.bytes_reserved);
    let mut warnings = Vec::new();
    let mut generate = || -> Result<Duration> {
        let start = Instant::now();
        let mut observe = |_: Progress| {
            if let Some(usage) = device.memory_pool_usage() {
                peak = peak.max(Some(usage.bytes_reserved));
            }
            ControlFlow::Continue(())
        };
        let generation = crate::pipeline::generate(&model, &request, &mut observe)?;
        let elapsed = start.elapsed();
        if let Some(usage) = device.memory_pool_usage() {
            peak = peak.max(Some(usage.bytes_reserved));
        }
        for warning in generation.warnings {
            if !warnings.contains(&warning) {
                warnings.push(warning);
            }
        }
        Ok(elapsed)
    };
    let first = generate()?;
    let times = (0..config.runs)
        .map(|_| generate())
        .collect::<Result<_>>()?;
    Ok(GenerationResult {
        load,
        first,
        times,
        estimated_working_bytes: cost.working_bytes,
        peak_device_bytes: peak,
        warnings,
    })
}
