//! One generation from a validated request: conditioning, noise, the sampler loop with the
//! UNet as its denoiser (the base model's, then a refiner's after the switch), and decoding.
//! Random draws follow diffusers' order exactly: init image posterior, initial noise,
//! masked-image posterior, then sampler noise.

use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;
use std::time::Instant;

use burn::tensor::Tensor;

use super::denoiser::{ActiveControl, Denoiser};
use super::prompt::check_finite;
use super::scheduled::{self, ScheduledConditioning};
use super::start::{Start, StepNoise};
use super::vae_plan::VaePlan;
use crate::api::{
    GenerateRequest, Generation, ModelCapabilities, Progress, SamplerChoice, SdeNoise, Stage,
};
use crate::device::tensor_to_vec;
use crate::error::{Error, Result};
use crate::imaging;
use crate::memory;
use crate::model::Model;
use crate::rng::BatchRng;
use crate::sampling::{Hooks, StepState};
use crate::schedule::diffusers::Prediction;
use crate::schedule::{BetaSchedule, DiscreteSchedule, Plan, TableArithmetic, named};

/// The sample after one sampler step (for live previews and tests).
pub struct StepLatents<'a> {
    /// 1-based step number.
    pub step: usize,
    pub total: usize,
    /// The noise level the sample is now at.
    pub sigma: f32,
    /// The sample, in the sampler's scaling (`x0 + sigma * noise`).
    pub x: &'a Tensor<4>,
    /// The model's latest prediction of the clean latents (what previews usually show).
    pub denoised: &'a Tensor<4>,
    /// `x * to_diffusers_scale` is the sample as diffusers' scheduler holds it.
    pub to_diffusers_scale: f32,
    /// UNet evaluations so far (second-order samplers make two per step).
    pub evaluations: usize,
}

/// Receives progress; returning `Break` cancels the generation (checked every step).
pub trait Observer {
    fn progress(&mut self, progress: Progress) -> ControlFlow<()>;

    /// Called after each step, before `progress`. Ignored by default.
    fn step(&mut self, _latents: &StepLatents<'_>) {}

    /// Asked between the UNet's blocks, inside a step: `true` cancels at once (a step of a
    /// large image can take minutes on the CPU). `false` by default.
    fn interrupted(&self) -> bool {
        false
    }
}

impl<F: FnMut(Progress) -> ControlFlow<()>> Observer for F {
    fn progress(&mut self, progress: Progress) -> ControlFlow<()> {
        self(progress)
    }
}

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
    let start = Instant::now();
    let report = |observer: &mut dyn Observer, stage, step, total| {
        let progress = Progress {
            stage,
            step,
            total,
            elapsed: start.elapsed(),
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
    let mut stages: Vec<(&Model, ScheduledConditioning)> = vec![(
        model,
        scheduled::encode_scheduled(model, request, guided, steps)?,
    )];
    if let Some(r) = refiner {
        stages.push((r, scheduled::encode_scheduled(r, request, guided, steps)?));
    }
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
    let mut rng = BatchRng::new(request.seed, batch);
    // The prompts are encoded: on a GPU short of memory the text encoders make room.
    let encoded: Vec<&Model> = std::iter::once(model).chain(refiner).collect();
    let working = super::residency::working_bytes(model, request)?;
    let free = memory::available_on(&model.device);
    super::residency::park_encoders_if_short(&encoded, working, free);
    let vae_plan = VaePlan::decide(model, request, memory::available_on(&model.device));
    // Half-precision UNets and VAEs that may fall back to f32 during this generation (said
    // once).
    use crate::device::Precision::F32;
    let models = || std::iter::once(model).chain(refiner);
    let half_unets: Vec<&Model> = models()
        .filter(|m| m.precision != F32 && m.unet_f32.get().is_none())
        .collect();
    let half_vaes: Vec<&Model> = models()
        .filter(|m| m.vae_precision != F32 && m.vae_f32.get().is_none())
        .collect();
    if request.has_init() {
        report(observer, Stage::EncodingImage, 0, 0)?;
        plan.keep_last_steps(request.effective_steps() as usize);
    }
    let Start {
        x,
        noise,
        image_latents,
        mask,
    } = Start::prepare(
        model,
        request,
        (&plan, vae_plan.tiles, &|| observer.interrupted()),
        shape,
        &mut rng,
    )?;
    let total = plan.steps();
    let switch = match request.refiner_switch {
        Some(fraction) if refiner.is_some() => plan.steps_before_switch(fraction),
        _ => total,
    };
    let mut warnings: Vec<String> = vae_plan.warning.iter().cloned().collect();
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
    if refiner.is_some() && (switch == 0 || switch == total) {
        warnings.push(format!(
            "the refiner switch at {} falls {} the {total} steps: only the {} runs",
            request.refiner_switch.unwrap_or_default(),
            if switch == 0 { "before" } else { "after" },
            if switch == 0 { "refiner" } else { "base model" }
        ));
    }
    let ranges = [0..switch, switch..total];

    // After each step: the 4-channel inpainting blend, the NaN check, progress.
    let output_scale = plan.output_scale();
    let offset = Cell::new(0usize);
    let evaluations = Cell::new(0usize);
    report(observer, Stage::Denoising, 0, total)?;
    // The step hook reports through the observer and the denoiser polls it between UNet
    // blocks; the sampler never runs the two at once, so the borrows never overlap.
    let observer = RefCell::new(observer);
    let failure: RefCell<Option<Error>> = RefCell::new(None);
    // The 4-channel inpainting blend: (repaint mask, keep mask, image latents).
    let blend = match (&mask, &image_latents, model.is_inpainting()) {
        (Some(m), Some(latents), false) => {
            let keep = m.mask_latent.clone().neg().add_scalar(1.0);
            Some((m.mask_latent.clone(), keep, latents.clone()))
        }
        _ => None,
    };
    let mut on_step = |state: &mut StepState| {
        let index = offset.get() + state.index;
        if let Some((repaint, keep, latents)) = &blend {
            // diffusers re-noises the image to the next noise level; the last step blends
            // with the clean image latents (in the sampler's scaling).
            let target = if index + 1 == total && !state.intermediate {
                latents.clone().div_scalar(output_scale)
            } else {
                latents.clone() + noise.clone().mul_scalar(state.sigma_next)
            };
            state.x = target * keep.clone() + state.x.clone() * repaint.clone();
        }
        if state.intermediate {
            return ControlFlow::Continue(());
        }
        if let Err(e) = check_finite(&state.x, &format!("UNet (step {} of {total})", index + 1)) {
            *failure.borrow_mut() = Some(e);
            return ControlFlow::Break(());
        }
        let mut observer = observer.borrow_mut();
        observer.step(&StepLatents {
            step: index + 1,
            total,
            sigma: state.sigma_next,
            x: &state.x,
            denoised: &state.denoised,
            to_diffusers_scale: plan.scale_at(state.sigma_next),
            evaluations: evaluations.get(),
        });
        let progress = Progress {
            stage: Stage::Denoising,
            step: index + 1,
            total,
            elapsed: start.elapsed(),
        };
        observer.progress(progress)
    };
    let mut noise_source = StepNoise::new(&mut rng, &plan, request.seed, shape);
    let last_uncond: RefCell<Option<Tensor<4>>> = RefCell::new(None);
    let mut x = x;
    let mut decoder = model;
    let controls = active_controls(model, request)?;
    for (stage, ((stage_model, conditioning), range)) in stages.iter().zip(ranges).enumerate() {
        if range.is_empty() {
            continue;
        }
        decoder = stage_model;
        offset.set(range.start);
        let denoiser = Denoiser {
            model: stage_model,
            conditioning,
            plan: &plan,
            inpaint_input: inpaint_input(stage_model, mask.as_ref(), batch),
            guided,
            batch,
            cfg_scale: request.cfg_scale,
            cfg_rescale: request.cfg_rescale,
            evaluations: &evaluations,
            last_uncond: &last_uncond,
            interrupted: &|| observer.borrow().interrupted(),
            // ControlNets guide the base model (a refiner has none of its family).
            controls: if stage == 0 { &controls } else { &[] },
        };
        let mut hooks = Hooks {
            denoise: &mut |x: &Tensor<4>, sigma: f32| denoiser.denoise(x, sigma),
            noise: &mut noise_source,
            uncond: &mut || last_uncond.borrow().clone(),
            on_step: &mut on_step,
        };
        let result = plan.sample(&mut hooks, x, range);
        x = match (result, failure.borrow_mut().take()) {
            (_, Some(e)) => return Err(e),
            (r, None) => r?,
        };
    }
    let latents = x.mul_scalar(output_scale);
    check_finite(&latents, "sampler")?;
    // The UNet's working memory, free now, goes back to the GPU's driver: Burn's pools keep
    // pages sized for the UNet's tensors, and the VAE's largest (feature maps in f32) need
    // blocks of other sizes. Measured with `tests/cuda_dry_run`'s stand-in driver: 1.4 GB
    // returned before the decode of SDXL at 1024² on an 8 GiB card.
    if memory::MemoryOf::of(&model.device) == memory::MemoryOf::Gpu {
        model.device.memory_cleanup();
    }
    let observer = observer.into_inner();
    report(observer, Stage::Decoding, total, total)?;

    let mut images = Vec::with_capacity(batch);
    // A cancel asked during the decode stops it between images and between tiles.
    let stop = || observer.interrupted();
    for b in 0..batch {
        if stop() {
            return Err(Error::Cancelled);
        }
        let one = latents
            .clone()
            .narrow(0, b, 1)
            .div_scalar(decoder.vae_config.scaling_factor);
        let tiles = vae_plan.decode_tiles(&decoder.vae_config);
        let decoded = super::vae_run::decode(decoder, one, tiles, &stop).ok_or(Error::Cancelled)?;
        check_finite(&decoded, "VAE decoder")?;
        images.push(imaging::from_planar_signed(
            &tensor_to_vec(decoded),
            request.width,
            request.height,
        ));
    }
    if half_unets.iter().any(|m| m.unet_f32.get().is_some()) {
        warnings.push(super::unet_run::F32_FALLBACK_WARNING.to_string());
    }
    if half_vaes.iter().any(|m| m.vae_f32.get().is_some()) {
        warnings.push(super::vae_run::F32_FALLBACK_WARNING.to_string());
    }
    Ok(Generation {
        images,
        latents: tensor_to_vec(latents),
        latent_shape: shape,
        warnings,
        sampler_label: plan.label,
        embeddings,
        padded_conds: stages.iter().flat_map(|(_, s)| s.all()).any(|c| c.padded),
        loras: Vec::new(),
    })
}

/// The request's ControlNets, found among those `model` has loaded, with their maps as
/// tensors (`[1, 3, h, w]`, `v / 255`, as diffusers prepares a control image).
fn active_controls<'a>(
    model: &'a Model,
    request: &GenerateRequest,
) -> Result<Vec<ActiveControl<'a>>> {
    request
        .controlnets
        .iter()
        .map(|c| {
            let net = model
                .controlnets
                .iter()
                .find(|(p, _)| *p == c.model)
                .map(|(_, net)| net)
                .ok_or_else(|| {
                    Error::settings(format!(
                        "the ControlNet {} is not loaded",
                        c.model.display()
                    ))
                })?;
            if (c.image.width, c.image.height) != (request.width, request.height) {
                return Err(Error::settings(format!(
                    "the control image is {}x{}; it must be the generation size {}x{}",
                    c.image.width, c.image.height, request.width, request.height
                )));
            }
            let n = (c.image.width * c.image.height) as usize;
            let mut planar = vec![0f32; 3 * n];
            for (i, px) in c.image.pixels.chunks_exact(3).enumerate() {
                for ch in 0..3 {
                    planar[ch * n + i] = f32::from(px[ch]) / 255.0;
                }
            }
            let dims = [1, 3, c.image.height as usize, c.image.width as usize];
            let image =
                model.to_network(crate::device::tensor_from_vec(planar, dims, &model.device));
            Ok(ActiveControl {
                net,
                image,
                scale: c.scale,
                start: c.start,
                end: c.end,
            })
        })
        .collect()
}

/// The mask and masked-image latents a 9-channel UNet takes after the sample.
fn inpaint_input(
    model: &Model,
    mask: Option<&super::image_inputs::MaskInputs>,
    batch: usize,
) -> Option<Tensor<4>> {
    let m = mask.filter(|_| model.is_inpainting())?;
    Some(Tensor::cat(
        vec![
            m.mask_latent.clone().repeat_dim(0, batch),
            m.masked_image_latents.clone(),
        ],
        1,
    ))
}
