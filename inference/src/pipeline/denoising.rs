//! The sampler loop of a generation: each stage's model (the base model's, then a refiner's)
//! denoises its range of the steps, with the 4-channel inpainting blend, a NaN check and
//! progress after every step.

use std::cell::{Cell, RefCell};
use std::ops::{ControlFlow, Range};
use std::time::Instant;

use burn::tensor::Tensor;

use super::denoiser::{Denoiser, active_controls};
use super::image_inputs::MaskInputs;
use super::observer::{Observer, StepLatents};
use super::prompt::check_finite;
use super::scheduled::ScheduledConditioning;
use super::start::{Start, StepNoise};
use crate::api::{GenerateRequest, Progress, Stage};
use crate::error::Result;
use crate::model::Model;
use crate::rng::BatchRng;
use crate::sampling::{Hooks, StepState};
use crate::schedule::Plan;

/// A generation's sampling, prepared: who denoises which steps, and how.
pub struct Denoising<'a> {
    /// The base model first, then the refiner, each with its prompts' conditioning.
    pub stages: &'a [(&'a Model, ScheduledConditioning)],
    /// The steps each stage runs (empty ranges are skipped).
    pub ranges: [Range<usize>; 2],
    pub plan: &'a Plan,
    pub request: &'a GenerateRequest,
    /// Whether the batch holds the negative rows (classifier-free guidance).
    pub guided: bool,
    /// The latents' `[batch, channels, h, w]`.
    pub shape: [usize; 4],
    /// When the generation started, for progress.
    pub started: Instant,
}

impl<'a> Denoising<'a> {
    /// Samples from `begin`, drawing step noise from `rng` after the start's draws. Returns
    /// the final latents (in the VAE's scaling, before `scaling_factor`) and the model whose
    /// VAE decodes them (the last stage that ran). `Err(Cancelled)` when the observer stops
    /// it; an error naming the step when a sample turns NaN or infinite (or the final latents
    /// do); a settings error when a requested ControlNet is not loaded or its map is not the
    /// generation's size.
    pub fn run(
        &self,
        begin: Start,
        rng: &mut BatchRng,
        observer: &mut dyn Observer,
    ) -> Result<(Tensor<4>, &'a Model)> {
        let Start {
            x,
            noise,
            image_latents,
            mask,
        } = begin;
        let (plan, shape) = (self.plan, self.shape);
        let total = plan.steps();
        let batch = shape[0];
        let model = self.stages[0].0;
        let output_scale = plan.output_scale();
        let offset = Cell::new(0usize);
        let evaluations = Cell::new(0usize);
        // The step hook reports through the observer and the denoiser polls it between UNet
        // blocks; the sampler never runs the two at once, so the borrows never overlap.
        let observer = RefCell::new(observer);
        let failure = RefCell::new(None);
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
                // diffusers re-noises the image to the next noise level; the last step
                // blends with the clean image latents (in the sampler's scaling).
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
            let step = format!("UNet (step {} of {total})", index + 1);
            if let Err(e) = check_finite(&state.x, &step) {
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
            observer.progress(Progress {
                stage: Stage::Denoising,
                step: index + 1,
                total,
                elapsed: self.started.elapsed(),
            })
        };
        let mut noise_source = StepNoise::new(rng, plan, shape);
        let last_uncond = RefCell::new(None);
        let mut x = x;
        let mut decoder = model;
        let controls = active_controls(model, self.request)?;
        let stages = self.stages.iter().zip(self.ranges.clone()).enumerate();
        for (stage, ((stage_model, conditioning), range)) in stages {
            if range.is_empty() {
                continue;
            }
            decoder = stage_model;
            offset.set(range.start);
            let denoiser = Denoiser {
                model: stage_model,
                conditioning,
                plan,
                inpaint_input: inpaint_input(stage_model, mask.as_ref(), batch),
                guided: self.guided,
                batch,
                cfg_scale: self.request.cfg_scale,
                cfg_rescale: self.request.cfg_rescale,
                evaluations: &evaluations,
                last_uncond: &last_uncond,
                interrupted: &|| observer.borrow().interrupted(),
                // ControlNets guide the base model (a refiner has none of its family).
                controls: if stage == 0 { &controls } else { &[] },
                wrap: self.request.seamless.wrap(),
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
        Ok((latents, decoder))
    }
}

/// The mask and masked-image latents a 9-channel UNet takes after the sample.
fn inpaint_input(model: &Model, mask: Option<&MaskInputs>, batch: usize) -> Option<Tensor<4>> {
    let m = mask.filter(|_| model.is_inpainting())?;
    Some(Tensor::cat(
        vec![
            m.mask_latent.clone().repeat_dim(0, batch),
            m.masked_image_latents.clone(),
        ],
        1,
    ))
}
