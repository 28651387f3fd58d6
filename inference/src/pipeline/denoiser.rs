//! The `denoise(x, sigma) -> x0` samplers see: one model's UNet on the guidance batch, its
//! conditioning, the 9-channel inpainting input, CFG (with optional rescale) and the
//! model's prediction type.

use std::cell::{Cell, RefCell};

use burn::tensor::Tensor;

use super::guidance;
use super::scheduled::ScheduledConditioning;
use super::unet_run::{self, UnetInputs};
use crate::api::GenerateRequest;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::models::controlnet::ControlNet;
use crate::models::unet::ControlResiduals;
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
    /// Asked between UNet and ControlNet blocks: `true` abandons the call with `Cancelled`.
    pub interrupted: &'a dyn Fn() -> bool,
    /// The ControlNets guiding this stage.
    pub controls: &'a [ActiveControl<'a>],
    /// The axes the UNet's convolutions wrap (seamless tiling; a ControlNet's never do).
    pub wrap: kernels::wrap::Wrap,
}

/// A ControlNet with its control map for one generation.
pub struct ActiveControl<'a> {
    pub net: &'a ControlNet,
    /// `[1, 3, h, w]` in [0, 1], in the network's float format.
    pub image: Tensor<4>,
    pub scale: f32,
    /// Fractions of the steps it guides (diffusers' `control_guidance_start` / `_end`).
    pub start: f32,
    pub end: f32,
}

impl Denoiser<'_> {
    /// The ControlNets' summed residuals for a UNet call at `sigma` on `input` (`[rows, 4,
    /// h, w]`, before any inpainting channels), or `None` when none guides this step.
    /// diffusers decides per loop iteration `i` of `n`: a ControlNet is off when `i / n <
    /// start` or `(i + 1) / n > end`; a call between two listed sigmas belongs to the step
    /// that started at the larger. `Err(Cancelled)` once `interrupted` says stop.
    fn control(
        &self,
        input: &Tensor<4>,
        t: f32,
        conditioning: &super::prompt::Conditioning,
        sigma: f32,
    ) -> Result<Option<ControlResiduals>> {
        let n = self.plan.steps().max(1) as f32;
        let above = self.plan.sigmas.iter().filter(|&&s| s >= sigma).count();
        let i = above.saturating_sub(1) as f32;
        let rows = input.dims()[0];
        let mut total: Option<ControlResiduals> = None;
        for c in self.controls {
            if i / n < c.start || (i + 1.0) / n > c.end {
                continue;
            }
            let image = c.image.clone().repeat_dim(0, rows);
            let r = c
                .net
                .forward_interruptible(
                    input.clone(),
                    &vec![t; rows],
                    (&conditioning.context, conditioning.added.as_ref()),
                    image,
                    c.scale,
                    self.interrupted,
                )
                .ok_or(Error::Cancelled)?;
            total = Some(match total {
                None => r,
                Some(mut sum) => {
                    for (a, b) in sum.down.iter_mut().zip(r.down) {
                        *a = a.clone() + b;
                    }
                    sum.mid = sum.mid + r.mid;
                    sum
                }
            });
        }
        Ok(total)
    }
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
        let control = if self.controls.is_empty() {
            None
        } else {
            // The ControlNet reads the latents without the inpainting channels.
            let latents = model.to_network(input.clone().narrow(1, 0, x.dims()[1]));
            self.control(&latents, t, conditioning, sigma)?
        };
        let timesteps = vec![t; rows];
        let inputs = UnetInputs {
            timesteps: &timesteps,
            context: &conditioning.context,
            added: conditioning.added.as_ref(),
            control: control.as_ref(),
            interrupted: self.interrupted,
            wrap: self.wrap,
        };
        let out = unet_run::run(model, input, &inputs).ok_or(Error::Cancelled)?;
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

/// The request's ControlNets, found among those `model` has loaded, with their maps as
/// tensors (`[1, 3, h, w]`, `v / 255`, as diffusers prepares a control image).
pub fn active_controls<'a>(
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
