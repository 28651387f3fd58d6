//! The `denoise(x, sigma) -> x0` samplers see: one model's UNet on the guidance batch, its
//! conditioning, the 9-channel inpainting input, CFG (with optional rescale) and the
//! model's prediction type.

use std::cell::{Cell, RefCell};

use burn::tensor::Tensor;

use super::guidance;
use super::scheduled::ScheduledConditioning;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::schedule::Plan;

/// One model's denoiser for one generation.
pub struct Denoiser<'a> {
    pub model: &'a Model,
    pub conditioning: &'a ScheduledConditioning,
    pub plan: &'a Plan,
    /// The mask and masked-image latents a 9-channel UNet takes after the sample.
    pub inpaint_input: Option<Tensor<4>>,
    /// Whether the batch holds the negative rows (classifier-free guidance).
    pub guided: bool,
    pub batch: usize,
    pub cfg_scale: f32,
    pub cfg_rescale: f32,
    /// UNet evaluations so far (shared by every stage of a generation).
    pub evaluations: &'a Cell<usize>,
    /// The last call's unconditional prediction, for the CFG++ samplers.
    pub last_uncond: &'a RefCell<Option<Tensor<4>>>,
    /// Asked between UNet blocks: `true` abandons the call with `Cancelled`.
    pub interrupted: &'a dyn Fn() -> bool,
}

impl Denoiser<'_> {
    /// The model's prediction of the clean sample of `x` at noise level `sigma`.
    ///
    /// # Shapes
    /// - `x`: `[batch, 4, h, w]` in sampler scaling -> `[batch, 4, h, w]`
    pub fn denoise(&self, x: &Tensor<4>, sigma: f32) -> Result<Tensor<4>> {
        let model = self.model;
        // A1111's `CFGDenoiser.step`: the calls before this one pick the prompt schedule's
        // stretch.
        let call = self.evaluations.get();
        let conditioning = self.conditioning.at(call);
        self.evaluations.set(call + 1);
        let t = self.plan.timesteps.timestep(sigma) as f32;
        let mut input = guidance::scale_model_input(x.clone(), sigma);
        if let Some(extra) = &self.inpaint_input {
            input = Tensor::cat(vec![input, extra.clone()], 1);
        }
        // One copy per negative row and per AND subprompt.
        let copies = conditioning.weights.len() + usize::from(self.guided);
        if copies > 1 {
            input = Tensor::cat(vec![input; copies], 0);
        }
        let rows = input.dims()[0];
        let out = model
            .unet
            .forward_interruptible(
                model.to_network(input),
                &vec![t; rows],
                (&conditioning.context, conditioning.added.as_ref()),
                self.interrupted,
            )
            .ok_or(Error::Cancelled)?;
        let out = model.to_f32(out);
        let out = if self.guided {
            if self.plan.algorithm.needs_uncond() {
                let uncond = out.clone().narrow(0, 0, self.batch);
                *self.last_uncond.borrow_mut() =
                    Some(guidance::denoised(x, uncond, sigma, model.prediction));
            }
            let (guided, cond) = guidance::compose(out, &conditioning.weights, self.cfg_scale);
            guidance::rescale(guided, cond, self.cfg_rescale)
        } else {
            out
        };
        let x0 = guidance::denoised(x, out, sigma, model.prediction);
        Ok(self.plan.boundary_condition(x, x0, sigma))
    }
}
