//! Pseudo linear multistep: diffusers' `PNDMScheduler` with `skip_prk_steps` (the default
//! scheduler of SD 1.x diffusers folders).
//!
//! diffusers writes each update as a DDIM transfer with a combined epsilon; in the sigma
//! scaling that transfer is `x + (sigma_next - sigma) * eps`, and `eps = (x - x0) / sigma`
//! is the same slope Euler uses. The first step is Heun-like (the slope at the start
//! averaged with the slope at an Euler prediction), then Adams-Bashforth of order 2, 3, 4
//! on the slopes, assuming equal steps as PNDM does. `n + 1` denoiser calls for `n` steps:
//! after the first step PNDM evaluates the model again at the same noise level.

use burn::tensor::Tensor;

use super::{Hooks, to_d};
use crate::error::Result;

pub fn plms(hooks: &mut Hooks<'_>, mut x: Tensor<4>, sigmas: &[f32]) -> Result<Tensor<4>> {
    let mut slopes: Vec<Tensor<4>> = Vec::with_capacity(4);
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let dt = sigma_next - sigma;
        let denoised = (hooks.denoise)(&x, sigma)?;
        let d = to_d(&x, &denoised, sigma);
        if i == 0 {
            let x_pred = x.clone() + d.clone().mul_scalar(dt);
            let denoised_pred = (hooks.denoise)(&x_pred, sigma_next)?;
            let d_pred = to_d(&x_pred, &denoised_pred, sigma_next);
            x = x + (d.clone() + d_pred).div_scalar(2.0).mul_scalar(dt);
            slopes.push(d);
        } else {
            let combined = adams_bashforth(&mut slopes, d);
            x = x + combined.mul_scalar(dt);
        }
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}

/// Pushes `newest` onto `history` (keeping the last four) and returns PNDM's
/// Adams-Bashforth combination of order 2, 3 or 4 over them (equal steps assumed).
pub(super) fn adams_bashforth(history: &mut Vec<Tensor<4>>, newest: Tensor<4>) -> Tensor<4> {
    if history.len() == 4 {
        history.remove(0);
    }
    history.push(newest);
    let n = history.len();
    let last = |k: usize| history[n - 1 - k].clone();
    match n {
        1 => last(0),
        2 => (last(0).mul_scalar(3.0) - last(1)).div_scalar(2.0),
        3 => (last(0).mul_scalar(23.0) - last(1).mul_scalar(16.0) + last(2).mul_scalar(5.0))
            .div_scalar(12.0),
        _ => (last(0).mul_scalar(55.0) - last(1).mul_scalar(59.0) + last(2).mul_scalar(37.0)
            - last(3).mul_scalar(9.0))
        .mul_scalar(1.0 / 24.0),
    }
}
