//! One generation from a validated request, end to end: checks, conditioning, the start
//! (noise and image latents), the sampler loop (`denoising`: the base model's UNet, then a
//! refiner's after the switch), decoding and the warnings.
//! Random draws follow diffusers' order exactly: init image posterior, initial noise,
//! masked-image posterior, then sampler noise.

use std::ops::ControlFlow;
use std::time::Instant;

use burn::tensor::Tensor;
use kernels::wrap::with_wrap;

use super::denoising::Denoising;
use super::observer::Observer;
use super::prompt::check_finite;
use super::scheduled::{self, ScheduledConditioning};
use super::start::Start;
use super::vae_plan::VaePlan;
use crate::api::{
    GenerateRequest, Generation, ModelCapabilities, Progress, SamplerChoice, SdeNoise, Stage,
};
use crate::device::tensor_to_vec;
use crate::error::{Error, Result};
use crate::imaging::{self, ImageRgb8};
use crate::memory;
use crate::model::Model;
use crate::rng::BatchRng;
use crate::schedule::diffusers::Prediction;
use crate::schedule::{BetaSchedule, DiscreteSchedule, Plan, TableArithmetic, named};

/// The sampling plan for a request on a model: the sampler and schedule, with the model's
/// zero-terminal-SNR rescale for named schedules (a diffusers config says its own).
pub fn plan_for(request: &GenerateRequest, model: &ModelCapabilities) -> Result<Plan> {
    let steps = request.schedule_steps() as usize;
    let mut plan = match &request.sampler {
        SamplerChoice::Diffusers(config) => config.plan(steps, request.eta.unwrap_or(0.0))?,
        SamplerChoice::Named { sampler, schedule } => {
            let mut table = DiscreteSchedule::new(
                BetaSchedule::SD,
                named::TRAINING_STEPS,
                TableArithmetic::ComfyF64,
            )?;
            if model.zero_terminal_snr {
                table = table.rescaled_to_zero_terminal_snr(TableArithmetic::ComfyF64);
            }
            named::plan(*sampler, *schedule, steps, request.eta, table)
        }
    };
    if request.sde_noise == SdeNoise::Generator {
        plan.brownian = None;
    }
    Ok(plan)
}

/// Runs a generation on one model. The request is validated first.
pub fn generate(
    model: &Model,
    request: &GenerateRequest,
    observer: &mut dyn Observer,
) -> Result<Generation> {
    generate_refined(model, None, request, observer)
}

/// Checks what the refiner of a two-stage request must allow besides the pair's fit.
fn validate_refiner_settings(request: &GenerateRequest, refiner: &ModelCapabilities) -> Result<()> {
    if request.clip_skip > refiner.max_clip_skip {
        return Err(Error::settings(format!(
            "CLIP skip must be at most {} with this refiner, got {}",
            refiner.max_clip_skip, request.clip_skip
        )));
    }
    for (name, v) in [("width", request.width), ("height", request.height)] {
        if v < refiner.min_side {
            return Err(Error::settings(format!(
                "{name} must be at least {} pixels for the refiner, got {v}",
                refiner.min_side
            )));
        }
    }
    Ok(())
}

/// Runs a generation; with `refiner`, the base model runs the steps before
/// [`GenerateRequest::refiner_switch`] and the refiner the rest, as diffusers'
/// `denoising_end` / `denoising_start` hand over: the same sample, the same schedule and
/// sampler (restarted, as a new diffusers scheduler starts), the same generator.
pub fn generate_refined(
    model: &Model,
    refiner: Option<&Model>,
    request: &GenerateRequest,
    observer: &mut dyn Observer,
) -> Result<Generation> {
    let caps = model.capabilities();
    request.validate(&caps)?;
    let refiner_caps = refiner.map(Model::capabilities);
    request.validate_refiner(&caps, refiner_caps.as_ref())?;
    if let Some(r) = &refiner_caps {
        validate_refiner_settings(request, r)?;
    }
    let started = Instant::now();
    let report = |observer: &mut dyn Observer, stage, step, total| {
        let progress = Progress {
            stage,
            step,
            total,
            elapsed: started.elapsed(),
        };
        match observer.progress(progress) {
            ControlFlow::Continue(()) => Ok(()),
            ControlFlow::Break(()) => Err(Error::Cancelled),
        }
    };
    report(observer, Stage::EncodingPrompt, 0, 0)?;
    let mut plan = plan_for(request, &caps)?;
    // CFG++ samplers read the unconditional prediction, so they need it even at scale 1;
    // so does composing AND subprompts.
    let subprompts = super::residency::subprompts(request)?;
    let guided = request.cfg_scale > 1.0 || plan.algorithm.needs_uncond() || subprompts.composed;
    let steps = scheduled::schedule_steps(request, plan.algorithm.schedule_multiplier());
    let models: Vec<&Model> = std::iter::once(model).chain(refiner).collect();
    let stages = models
        .iter()
        .map(|m| Ok((*m, scheduled::encode_scheduled(m, request, guided, steps)?)))
        .collect::<Result<Vec<_>>>()?;
    let batch = request.batch as usize;
    let f = model.vae_factor();
    let shape = [
        batch,
        model.spec().latent_channels,
        request.height as usize / f,
        request.width as usize / f,
    ];
    if let Some(transfer) = plan.transfer.as_mut() {
        transfer.combines_v = model.prediction == Prediction::V;
    }
    let mut rng = BatchRng::for_request(request);
    // The prompts are encoded: on a GPU short of memory the text encoders make room.
    let working = super::residency::working_bytes(model, request)?;
    let free = memory::available_on(&model.device);
    super::residency::park_encoders_if_short(&models, working, free);
    let vae_plan = VaePlan::decide(model, request, memory::available_on(&model.device));
    let fallbacks = HalfFallbacks::watch(&models);
    if request.has_init() {
        report(observer, Stage::EncodingImage, 0, 0)?;
        plan.keep_last_steps(request.effective_steps() as usize);
    }
    let stop = || observer.interrupted();
    // Seamless tiling wraps the VAE's convolutions as well as the UNet's (A1111's switch
    // reaches every convolution of the model): the init image's encode and the decode.
    let wrap = request.seamless.wrap();
    let begin = with_wrap(wrap, || {
        Start::prepare(
            model,
            request,
            (&plan, vae_plan.tiles, &stop),
            shape,
            &mut rng,
        )
    })?;
    let total = plan.steps();
    let switch = match request.refiner_switch {
        Some(fraction) if refiner.is_some() => plan.steps_before_switch(fraction),
        _ => total,
    };
    let (mut warnings, embeddings) = stage_notes(&stages, vae_plan.warning.clone());
    if refiner.is_some() && (switch == 0 || switch == total) {
        warnings.push(format!(
            "the refiner switch at {} falls {} the {total} steps: only the {} runs",
            request.refiner_switch.unwrap_or_default(),
            if switch == 0 { "before" } else { "after" },
            if switch == 0 { "refiner" } else { "base model" }
        ));
    }
    report(observer, Stage::Denoising, 0, total)?;
    let denoising = Denoising {
        stages: &stages,
        ranges: [0..switch, switch..total],
        plan: &plan,
        request,
        guided,
        shape,
        started,
    };
    let (latents, decoder) = denoising.run(begin, &mut rng, observer)?;
    // The UNet's working memory, free now, goes back to the GPU's driver: Burn's pools keep
    // pages sized for the UNet's tensors, and the VAE's largest (feature maps in f32) need
    // blocks of other sizes. Measured with `tests/cuda_dry_run`'s stand-in driver: 1.4 GB
    // returned before the decode of SDXL at 1024² on an 8 GiB card.
    if memory::MemoryOf::of(&model.device) == memory::MemoryOf::Gpu {
        model.device.memory_cleanup();
    }
    report(observer, Stage::Decoding, total, total)?;
    // A cancel asked during the decode stops it between images and between tiles.
    let stop = || observer.interrupted();
    let images = with_wrap(wrap, || {
        decode_images(decoder, &latents, request, &vae_plan, &stop)
    })?;
    warnings.extend(fallbacks.warnings());
    Ok(Generation {
        images,
        latents: tensor_to_vec(latents),
        latent_shape: shape,
        warnings,
        sampler_label: plan.label,
        embeddings,
        padded_conds: stages.iter().flat_map(|(_, s)| s.all()).any(|c| c.padded),
        loras: Vec::new(),
        vae: None,
    })
}

/// The warnings (after `first`) and textual-inversion embeddings that every stage's
/// conditioning reported, each once, in the order first reported.
fn stage_notes(
    stages: &[(&Model, ScheduledConditioning)],
    first: Option<String>,
) -> (Vec<String>, Vec<(String, String)>) {
    let mut warnings: Vec<String> = first.into_iter().collect();
    let mut embeddings: Vec<(String, String)> = Vec::new();
    for c in stages.iter().flat_map(|(_, s)| s.all()) {
        for e in &c.embeddings {
            if !embeddings.contains(e) {
                embeddings.push(e.clone());
            }
        }
        for w in &c.warnings {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
    }
    (warnings, embeddings)
}

/// Decodes each image of the batch with `decoder`'s VAE, in tiles where the plan says;
/// `stop` is asked between images and between tiles.
fn decode_images(
    decoder: &Model,
    latents: &Tensor<4>,
    request: &GenerateRequest,
    vae_plan: &VaePlan,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<ImageRgb8>> {
    let mut images = Vec::with_capacity(latents.dims()[0]);
    for b in 0..latents.dims()[0] {
        if stop() {
            return Err(Error::Cancelled);
        }
        let one = latents
            .clone()
            .narrow(0, b, 1)
            .div_scalar(decoder.vae_config.scaling_factor);
        let tiles = vae_plan.decode_tiles(&decoder.vae_config);
        let decoded = super::vae_run::decode(decoder, one, tiles, stop).ok_or(Error::Cancelled)?;
        check_finite(&decoded, "VAE decoder")?;
        images.push(imaging::from_planar_signed(
            &tensor_to_vec(decoded),
            request.width,
            request.height,
        ));
    }
    Ok(images)
}

/// The half-precision UNets and VAEs of a generation that had not fallen back to f32
/// before it: those that do during it are said once, at its end.
struct HalfFallbacks<'a> {
    unets: Vec<&'a Model>,
    vaes: Vec<&'a Model>,
}

impl<'a> HalfFallbacks<'a> {
    fn watch(models: &[&'a Model]) -> Self {
        use crate::device::Precision::F32;
        Self {
            unets: (models.iter().copied())
                .filter(|m| m.precision != F32 && m.unet_f32.get().is_none())
                .collect(),
            vaes: (models.iter().copied())
                .filter(|m| m.vae_precision != F32 && m.vae_f32.get().is_none())
                .collect(),
        }
    }

    fn warnings(&self) -> impl Iterator<Item = String> {
        let unet = self.unets.iter().any(|m| m.unet_f32.get().is_some());
        let vae = self.vaes.iter().any(|m| m.vae_f32.get().is_some());
        [
            unet.then(|| super::unet_run::F32_FALLBACK_WARNING.to_string()),
            vae.then(|| super::vae_run::F32_FALLBACK_WARNING.to_string()),
        ]
        .into_iter()
        .flatten()
    }
}
