//! diffusers' `DDIMScheduler` and `PNDMScheduler` (`skip_prk_steps`) call by call: each
//! update is a DDIM transfer of the sample between two training noise levels, which need not
//! be the levels the model is called at (see [`crate::schedule::AlphaTransfer`]).
//!
//! The sample is kept in the model's own scaling (`x_vp = x / sqrt(1 + sigma^2)`), as
//! diffusers keeps it, so a sample that lands between listed timesteps is handed to the next
//! call unchanged. In sigma scaling a transfer from `from` to `to` with epsilon `eps` is
//! `x_to = x_from + (to - from) * eps`; DDIM's `eta` noise is the ancestral step between the
//! two levels (see [`super::ancestral`]).

use burn::tensor::Tensor;

use super::plms::adams_bashforth;
use super::{Hooks, ancestral_step};
use crate::error::Result;

/// One model call: the level the model is told (its timestep), the level the transfer
/// assumes the sample is at, and where it lands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transfer {
    pub model: f32,
    pub from: f32,
    pub to: f32,
}

fn vp_factor(sigma: f32) -> f64 {
    (1.0 + f64::from(sigma).powi(2)).sqrt()
}

/// `x_vp` moved from `from` to `to` with `eps` (diffusers `_get_prev_sample`).
fn transfer(x_vp: Tensor<4>, eps: Tensor<4>, from: f32, to: f32) -> Tensor<4> {
    (x_vp.mul_scalar(vp_factor(from)) + eps.mul_scalar(to - from)).div_scalar(vp_factor(to))
}

/// The model's epsilon for `x_vp` called at `sigma`, and its prediction of x0.
fn epsilon(hooks: &mut Hooks<'_>, x_vp: &Tensor<4>, sigma: f32) -> Result<(Tensor<4>, Tensor<4>)> {
    let x = x_vp.clone().mul_scalar(vp_factor(sigma));
    let denoised = (hooks.denoise)(&x, sigma)?;
    Ok(((x - denoised.clone()).div_scalar(sigma), denoised))
}

/// Reports step `index`: the sample in sigma scaling at the next step's level (`sigmas`);
/// returns it in the model's scaling again.
fn done(
    hooks: &mut Hooks<'_>,
    index: usize,
    sigmas: &[f32],
    x_vp: Tensor<4>,
    denoised: Tensor<4>,
) -> Result<Tensor<4>> {
    let level = vp_factor(sigmas[index + 1]);
    let x = hooks.step_done(index, sigmas, x_vp.mul_scalar(level), denoised)?;
    Ok(x.div_scalar(level))
}

/// DDIM: one call per step; `eta` adds the ancestral noise between `from` and `to`.
///
/// `x` is at `sigmas[0]` in sigma scaling; the result is at the last sigma.
pub fn ddim(
    hooks: &mut Hooks<'_>,
    x: Tensor<4>,
    sigmas: &[f32],
    calls: &[Transfer],
    eta: f32,
) -> Result<Tensor<4>> {
    let mut x_vp = x.div_scalar(vp_factor(sigmas[0]));
    for (i, call) in calls.iter().enumerate() {
        let (eps, denoised) = epsilon(hooks, &x_vp, call.model)?;
        let (down, up) = ancestral_step(call.from, call.to, eta);
        let mut x = x_vp.mul_scalar(vp_factor(call.from)) + eps.mul_scalar(down - call.from);
        if eta > 0.0 {
            let noise = hooks.noise.draw(&x);
            if up > 0.0 {
                x = x + noise.mul_scalar(up);
            }
        }
        x_vp = done(hooks, i, sigmas, x.div_scalar(vp_factor(call.to)), denoised)?;
    }
    Ok(x_vp.mul_scalar(vp_factor(sigmas[sigmas.len() - 1])))
}

/// PNDM with `skip_prk_steps`: the first step predicts with the first call's epsilon,
/// calls the model there and averages the two; then Adams-Bashforth of order 2 to 4 over
/// the stored model outputs. `combines_v`: the outputs are v predictions, combined before
/// they become epsilon at the transfer's `from` level with the sample being moved, as
/// diffusers does.
pub fn pndm(
    hooks: &mut Hooks<'_>,
    x: Tensor<4>,
    sigmas: &[f32],
    calls: &[Transfer],
    combines_v: bool,
) -> Result<Tensor<4>> {
    // The raw model output of a call (epsilon, or v recovered from it).
    let raw = |eps: Tensor<4>, x_vp: &Tensor<4>, sigma: f32| -> Tensor<4> {
        if combines_v {
            let s = vp_factor(sigma);
            (eps - x_vp.clone().mul_scalar(f64::from(sigma) / s)).mul_scalar(s)
        } else {
            eps
        }
    };
    // The epsilon diffusers makes of a combined output for a transfer from `from`.
    let to_eps = |out: Tensor<4>, x_vp: &Tensor<4>, from: f32| -> Tensor<4> {
        if combines_v {
            let s = vp_factor(from);
            out.div_scalar(s) + x_vp.clone().mul_scalar(f64::from(from) / s)
        } else {
            out
        }
    };
    let mut x_vp = x.div_scalar(vp_factor(sigmas[0]));
    let mut outputs: Vec<Tensor<4>> = Vec::with_capacity(4);
    let mut stored: Option<Tensor<4>> = None;
    for (j, call) in calls.iter().enumerate() {
        let (eps, denoised) = epsilon(hooks, &x_vp, call.model)?;
        let out = raw(eps, &x_vp, call.model);
        let (sample, combined) = match j {
            0 => {
                stored = Some(x_vp.clone());
                outputs.push(out.clone());
                (x_vp.clone(), out)
            }
            1 => {
                let first = outputs[0].clone();
                let sample = stored.take().expect("the first call stores its sample");
                (sample, (out + first).div_scalar(2.0))
            }
            _ => (x_vp.clone(), adams_bashforth(&mut outputs, out)),
        };
        let eps = to_eps(combined, &sample, call.from);
        x_vp = transfer(sample, eps, call.from, call.to);
        // The first call only predicts; every later call completes a step. A single-call
        // run ends on the prediction, as diffusers' does.
        if j > 0 || calls.len() == 1 {
            x_vp = done(hooks, j.saturating_sub(1), sigmas, x_vp, denoised)?;
        } else {
            // The predictor's sample, as the second call will see it.
            let level = vp_factor(calls[1].model);
            let levels = (call.model, calls[1].model);
            let total = sigmas.len() - 1;
            let x = x_vp.mul_scalar(level);
            x_vp = hooks
                .intermediate(0, total, levels, x, &denoised)?
                .div_scalar(level);
        }
    }
    Ok(x_vp.mul_scalar(vp_factor(sigmas[sigmas.len() - 1])))
}
