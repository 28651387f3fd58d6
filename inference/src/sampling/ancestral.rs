//! Euler ancestral (k-diffusion `sample_euler_ancestral`, diffusers
//! `EulerAncestralDiscreteScheduler`), which is also DDIM with `eta`.
//!
//! DDIM's update with `std_dev_t = eta * sqrt((1 - a_prev) / (1 - a_t) * (1 - a_t / a_prev))`,
//! written for `x / sqrt(a)` with `sigma^2 = (1 - a) / a`, is exactly this step with
//! `sigma_up = eta * sqrt(s_next^2 (s^2 - s_next^2) / s^2)`; `eta = 0` gives Euler.

use burn::tensor::Tensor;

use super::{AlgorithmOptions, Hooks, to_d};
use crate::error::Result;

/// k-diffusion `get_ancestral_step`: `(sigma_down, sigma_up)` for a step from `sigma` to
/// `sigma_next` that adds fresh noise of size `sigma_up`.
pub fn ancestral_step(sigma: f32, sigma_next: f32, eta: f32) -> (f32, f32) {
    if eta == 0.0 {
        return (sigma_next, 0.0);
    }
    // In float32 and in this order, as k-diffusion and diffusers compute it on f32 tensors:
    // `sigma_down` suffers some cancellation, and the DPM2 midpoint timesteps depend on it.
    let (s, sn) = (sigma, sigma_next);
    let up = (eta * (sn * sn * (s * s - sn * sn) / (s * s)).sqrt()).min(sn);
    let down = (sn * sn - up * up).sqrt();
    (down, up)
}

/// Euler to `sigma_down`, then fresh noise of size `sigma_up`.
///
/// Noise is drawn at every step while `eta > 0`, the last one included, as diffusers does,
/// so the generator advances the same way (the last draw has `sigma_up = 0`).
pub fn euler_ancestral(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
) -> Result<Tensor<4>> {
    for i in 0..sigmas.len() - 1 {
        let denoised = (hooks.denoise)(&x, sigmas[i])?;
        let (sigma_down, sigma_up) = ancestral_step(sigmas[i], sigmas[i + 1], options.eta);
        let d = to_d(&x, &denoised, sigmas[i]);
        x = x + d.mul_scalar(sigma_down - sigmas[i]);
        if options.eta > 0.0 {
            let noise = hooks.noise.draw(&x);
            if sigma_up > 0.0 {
                x = x + noise.mul_scalar(sigma_up * options.s_noise);
            }
        }
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
