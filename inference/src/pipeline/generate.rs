//! One generation from a validated request: conditioning, noise, the sampler loop with the
//! UNet as its denoiser, and decoding. Random draws follow diffusers' order exactly: init
//! image posterior, initial noise, masked-image posterior, then sampler noise.

use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;
use std::time::Instant;

use burn::tensor::Tensor;

use super::guidance;
use super::image_inputs::{self, MaskInputs};
use super::prompt::{self, check_finite};
use crate::api::{
    GenerateRequest, Generation, MaskedContent, Progress, SamplerChoice, SdeNoise, Stage,
};
use crate::device::{tensor_from_vec, tensor_to_vec};
use crate::error::{Error, Result};
use crate::imaging;
use crate::model::Model;
use crate::rng::BatchRng;
use crate::rng::brownian::{BrownianNoise, sigma_range};
use crate::sampling::{self, Hooks, NoiseSource, StepState};
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
}

impl<F: FnMut(Progress) -> ControlFlow<()>> Observer for F {
    fn progress(&mut self, progress: Progress) -> ControlFlow<()> {
        self(progress)
    }
}

/// Step noise from the generation's generators (one per image), and for the SDE samplers
/// from Brownian trees where the plan asks for them.
struct StepNoise<'a> {
    rng: &'a mut BatchRng,
    trees: Option<BrownianNoise>,
}

impl<'a> StepNoise<'a> {
    fn new(rng: &'a mut BatchRng, plan: &Plan, seed: u64, shape: [usize; 4]) -> Self {
        let trees = plan.brownian.and_then(|brownian| {
            let (sigma_min, sigma_max) = brownian.range.or_else(|| sigma_range(&plan.sigmas))?;
            let per_image: usize = shape[1..].iter().product();
            Some(match brownian.entropy {
                Some(entropy) => {
                    BrownianNoise::new(sigma_min, sigma_max, &[entropy], per_image * shape[0])
                }
                None => {
                    let seeds: Vec<u64> =
                        (0..shape[0] as u64).map(|i| seed.wrapping_add(i)).collect();
                    BrownianNoise::new(sigma_min, sigma_max, &seeds, per_image)
                }
            })
        });
        Self { rng, trees }
    }
}

impl NoiseSource for StepNoise<'_> {
    fn draw(&mut self, like: &Tensor<4>) -> Tensor<4> {
        let dims = like.dims();
        let per_image = dims[1..].iter().product();
        tensor_from_vec(self.rng.randn(per_image), dims, &like.device())
    }

    fn draw_between(&mut self, like: &Tensor<4>, sigma: f32, sigma_next: f32) -> Tensor<4> {
        match &mut self.trees {
            Some(trees) => {
                tensor_from_vec(trees.sample(sigma, sigma_next), like.dims(), &like.device())
            }
            None => self.draw(like),
        }
    }
}

/// The starting sample and the image conditioning, drawn in diffusers' order.
struct Start {
    x: Tensor<4>,
    /// The initial noise (the inpainting blend re-noises the image with it).
    noise: Tensor<4>,
    /// The init image's VAE latents, when the pipeline needs them.
    image_latents: Option<Tensor<4>>,
    mask: Option<MaskInputs>,
}

impl Start {
    fn prepare(
        model: &Model,
        request: &GenerateRequest,
        plan: &Plan,
        shape: [usize; 4],
        rng: &mut BatchRng,
    ) -> Result<Self> {
        // diffusers' inpainting at full strength starts from pure noise; img2img and
        // partial-strength inpainting from the noised image.
        let from_noise =
            request.init_image.is_none() || (request.mask.is_some() && request.strength >= 1.0);
        // The 4-channel model blends the image back in, so it needs its latents even when
        // starting from noise; the 9-channel model only when starting part-way.
        let image_latents = match &request.init_image {
            Some(init) if !model.is_inpainting() || !from_noise => {
                let image = image_inputs::image_tensor(model, init);
                Some(image_inputs::encode_image(model, image, rng))
            }
            _ => None,
        };
        let noise = tensor_from_vec(rng.randn(shape[1..].iter().product()), shape, &model.device);
        // A1111's latent masked content: the masked latents start as noise or as nothing.
        let start_latents = match (&image_latents, &request.mask, request.masked_content) {
            (Some(latents), Some(m), MaskedContent::LatentNoise | MaskedContent::LatentNothing) => {
                let keep = image_inputs::latent_mask(model, m).neg().add_scalar(1.0);
                let masked = latents.clone() * keep.clone();
                Some(match request.masked_content {
                    MaskedContent::LatentNoise => {
                        masked + noise.clone() * keep.neg().add_scalar(1.0)
                    }
                    _ => masked,
                })
            }
            _ => image_latents.clone(),
        };
        let x = match (&start_latents, from_noise) {
            (Some(latents), false) => latents.clone() + noise.clone().mul_scalar(plan.sigmas[0]),
            _ => noise.clone().mul_scalar(plan.initial_noise_scale),
        };
        let mask = match (&request.init_image, &request.mask) {
            (Some(init), Some(m)) => Some(image_inputs::mask_inputs(model, init, m, rng)?),
            _ => None,
        };
        Ok(Self {
            x,
            noise,
            image_latents,
            mask,
        })
    }
}

/// The sampling plan for a request.
pub fn plan_for(request: &GenerateRequest) -> Result<Plan> {
    let steps = request.steps as usize;
    let mut plan = match &request.sampler {
        SamplerChoice::Diffusers(config) => config.plan(steps, request.eta.unwrap_or(0.0))?,
        SamplerChoice::Named { sampler, schedule } => {
            let table = DiscreteSchedule::new(BetaSchedule::SD, 1000, TableArithmetic::ComfyF64)?;
            named::plan(*sampler, *schedule, steps, request.eta, table)
        }
    };
    if request.sde_noise == SdeNoise::Generator {
        plan.brownian = None;
    }
    Ok(plan)
}

/// Runs a generation. The request is validated first.
pub fn generate(
    model: &Model,
    request: &GenerateRequest,
    observer: &mut dyn Observer,
) -> Result<Generation> {
    request.validate(model)?;
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
    let mut plan = plan_for(request)?;
    // CFG++ samplers read the unconditional prediction, so they need it even at scale 1.
    let guided = request.cfg_scale > 1.0 || plan.algorithm.needs_uncond();
    let conditioning = prompt::encode(model, request, guided)?;
    let batch = request.batch as usize;
    let f = model.vae_factor();
    let shape = [
        batch,
        4,
        request.height as usize / f,
        request.width as usize / f,
    ];
    let mut rng = BatchRng::new(request.seed, batch);
    if request.init_image.is_some() {
        report(observer, Stage::EncodingImage, 0, 0)?;
        plan.keep_last_steps(request.effective_steps() as usize);
    }
    let Start {
        x,
        noise,
        image_latents,
        mask,
    } = Start::prepare(model, request, &plan, shape, &mut rng)?;

    // The denoiser: UNet with guidance, plus the 9-channel inpainting input.
    let inpaint_input = match (&mask, model.is_inpainting()) {
        (Some(m), true) => Some(Tensor::cat(
            vec![
                m.mask_latent.clone().repeat_dim(0, batch),
                m.masked_image_latents.clone(),
            ],
            1,
        )),
        _ => None,
    };
    let rows = if guided { 2 * batch } else { batch };
    let evaluations = Cell::new(0usize);
    let last_uncond: RefCell<Option<Tensor<4>>> = RefCell::new(None);
    let mut denoise = |x: &Tensor<4>, sigma: f32| -> Result<Tensor<4>> {
        evaluations.set(evaluations.get() + 1);
        let t = plan.timesteps.timestep(sigma) as f32;
        let mut input = guidance::scale_model_input(x.clone(), sigma);
        if let Some(extra) = &inpaint_input {
            input = Tensor::cat(vec![input, extra.clone()], 1);
        }
        if guided {
            input = Tensor::cat(vec![input.clone(), input], 0);
        }
        let out = model.unet.forward(
            model.to_network(input),
            &vec![t; rows],
            &conditioning.context,
        );
        let out = model.to_f32(out);
        let out = if guided {
            if plan.algorithm.needs_uncond() {
                let uncond = out.clone().narrow(0, 0, batch);
                *last_uncond.borrow_mut() =
                    Some(guidance::denoised(x, uncond, sigma, model.prediction));
            }
            guidance::guide(out, request.cfg_scale)
        } else {
            out
        };
        let x0 = guidance::denoised(x, out, sigma, model.prediction);
        Ok(plan.boundary_condition(x, x0, sigma))
    };

    // After each step: the 4-channel inpainting blend, the NaN check, progress.
    let blend = match (&mask, &image_latents, model.is_inpainting()) {
        (Some(m), Some(latents), false) => {
            let keep = m.mask_latent.clone().neg().add_scalar(1.0);
            Some((m.mask_latent.clone(), keep, latents.clone()))
        }
        _ => None,
    };
    let output_scale = plan.output_scale();
    let total = plan.steps();
    report(observer, Stage::Denoising, 0, total)?;
    let mut failure: Option<Error> = None;
    let mut on_step = |state: &mut StepState| {
        if let Some((m, keep, latents)) = &blend {
            // diffusers re-noises the image to the next noise level; the last step blends
            // with the clean image latents (in the sampler's scaling).
            let target = if state.index + 1 == state.total {
                latents.clone().div_scalar(output_scale)
            } else {
                latents.clone() + noise.clone().mul_scalar(state.sigma_next)
            };
            state.x = target * keep.clone() + state.x.clone() * m.clone();
        }
        if let Err(e) = check_finite(
            &state.x,
            &format!("UNet (step {} of {})", state.index + 1, state.total),
        ) {
            failure = Some(e);
            return ControlFlow::Break(());
        }
        observer.step(&StepLatents {
            step: state.index + 1,
            total: state.total,
            sigma: state.sigma_next,
            x: &state.x,
            denoised: &state.denoised,
            to_diffusers_scale: plan.scale_at(state.sigma_next),
            evaluations: evaluations.get(),
        });
        let progress = Progress {
            stage: Stage::Denoising,
            step: state.index + 1,
            total: state.total,
            elapsed: start.elapsed(),
        };
        observer.progress(progress)
    };
    let mut noise_source = StepNoise::new(&mut rng, &plan, request.seed, shape);
    let mut hooks = Hooks {
        denoise: &mut denoise,
        noise: &mut noise_source,
        uncond: &mut || last_uncond.borrow().clone(),
        on_step: &mut on_step,
    };
    let result = sampling::run(plan.algorithm, plan.options, &mut hooks, x, &plan.sigmas);
    let x = match (result, failure) {
        (_, Some(e)) => return Err(e),
        (r, None) => r?,
    };
    let latents = x.mul_scalar(output_scale);
    check_finite(&latents, "sampler")?;
    report(observer, Stage::Decoding, total, total)?;

    let mut images = Vec::with_capacity(batch);
    for b in 0..batch {
        let one = latents
            .clone()
            .narrow(0, b, 1)
            .div_scalar(model.vae_config.scaling_factor);
        let decoded = model.to_f32(model.vae.decode(model.to_network(one)));
        check_finite(&decoded, "VAE decoder")?;
        images.push(imaging::from_planar_signed(
            &tensor_to_vec(decoded),
            request.width,
            request.height,
        ));
    }
    Ok(Generation {
        images,
        latents: tensor_to_vec(latents),
        latent_shape: shape,
        warnings: conditioning.warnings,
        sampler_label: plan.label,
    })
}
