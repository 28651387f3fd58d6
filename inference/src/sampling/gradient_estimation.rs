//! Gradient estimation (ComfyUI `sample_gradient_estimation`, Permenter & Yuan,
//! openreview o2ND9v0CeK): Euler plus `(gamma - 1)` times the change of the slope since the
//! previous step. Ported from ComfyUI `comfy/k_diffusion/sampling.py` @ 02159d81.

use burn::tensor::Tensor;

use super::{Hooks, to_d};
use crate::error::Result;

/// ComfyUI's default `ge_gamma`.
const GAMMA: f32 = 2.0;

pub fn gradient_estimation(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
) -> Result<Tensor<4>> {
    let mut old_d: Option<Tensor<4>> = None;
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let denoised = (hooks.denoise)(&x, sigma)?;
        let d = to_d(&x, &denoised, sigma);
        let dt = sigma_next - sigma;
        x = if sigma_next == 0.0 {
            denoised.clone()
        } else {
            let mut next = x + d.clone().mul_scalar(dt);
            if let Some(old_d) = &old_d {
                next = next + (d.clone() - old_d.clone()).mul_scalar((GAMMA - 1.0) * dt);
            }
            next
        };
        old_d = Some(d);
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
