//! Heun's second-order method (k-diffusion `sample_heun`, diffusers `HeunDiscreteScheduler`).

use burn::tensor::Tensor;

use super::{Hooks, to_d};
use crate::error::Result;

/// An Euler predictor, then the average of the two slopes; plain Euler for a step to
/// `sigma = 0`. Two denoiser calls per step except the last: `2n - 1` in all.
pub fn heun(hooks: &mut Hooks<'_>, mut x: Tensor<4>, sigmas: &[f32]) -> Result<Tensor<4>> {
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let denoised = (hooks.denoise)(&x, sigma)?;
        let d = to_d(&x, &denoised, sigma);
        let dt = sigma_next - sigma;
        x = if sigma_next == 0.0 {
            x + d.mul_scalar(dt)
        } else {
            let x_pred = x.clone() + d.clone().mul_scalar(dt);
            let total = sigmas.len() - 1;
            let x_pred = hooks.intermediate(i, total, (sigma, sigma_next), x_pred, &denoised)?;
            let denoised_next = (hooks.denoise)(&x_pred, sigma_next)?;
            let d_next = to_d(&x_pred, &denoised_next, sigma_next);
            x + (d + d_next).div_scalar(2.0).mul_scalar(dt)
        };
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
