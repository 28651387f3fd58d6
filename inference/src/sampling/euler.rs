//! Euler's method (k-diffusion `sample_euler`, diffusers `EulerDiscreteScheduler`).

use burn::tensor::Tensor;

use super::{Hooks, to_d};
use crate::error::Result;

/// `x += (x - x0) / sigma * (sigma_next - sigma)` at every step.
pub fn euler(hooks: &mut Hooks<'_>, mut x: Tensor<4>, sigmas: &[f32]) -> Result<Tensor<4>> {
    for i in 0..sigmas.len() - 1 {
        let denoised = (hooks.denoise)(&x, sigmas[i])?;
        let d = to_d(&x, &denoised, sigmas[i]);
        x = x + d.mul_scalar(sigmas[i + 1] - sigmas[i]);
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
