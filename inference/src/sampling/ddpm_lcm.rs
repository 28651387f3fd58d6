//! Samplers that step through the model's own noise process: ComfyUI `sample_ddpm` (DDPM's
//! ancestral posterior step) and `sample_lcm` (Latent Consistency Models: jump to the
//! prediction, re-noise to the next level). Ported from ComfyUI
//! `comfy/k_diffusion/sampling.py` @ 02159d81 (eps-prediction scaling).

use burn::tensor::Tensor;

use super::{AlgorithmOptions, Hooks};
use crate::error::Result;

/// DDPM: the posterior mean of `x_{t-1}` given the predicted noise, plus the posterior's
/// noise, computed in the model's own scaling (`x / sqrt(1 + sigma^2)`).
pub fn ddpm(hooks: &mut Hooks<'_>, mut x: Tensor<4>, sigmas: &[f32]) -> Result<Tensor<4>> {
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_prev) = (f64::from(sigmas[i]), f64::from(sigmas[i + 1]));
        let denoised = (hooks.denoise)(&x, sigmas[i])?;
        let eps = (x.clone() - denoised.clone()).div_scalar(sigma);
        let x_vp = x.div_scalar((1.0 + sigma * sigma).sqrt());
        let alpha_cumprod = 1.0 / (sigma * sigma + 1.0);
        let alpha_cumprod_prev = 1.0 / (sigma_prev * sigma_prev + 1.0);
        let alpha = alpha_cumprod / alpha_cumprod_prev;
        let mut mu = (x_vp - eps.mul_scalar((1.0 - alpha) / (1.0 - alpha_cumprod).sqrt()))
            .mul_scalar((1.0 / alpha).sqrt());
        if sigma_prev > 0.0 {
            let noise = hooks.noise.draw(&mu);
            let std = ((1.0 - alpha) * (1.0 - alpha_cumprod_prev) / (1.0 - alpha_cumprod)).sqrt();
            mu = mu + noise.mul_scalar(std);
            mu = mu.mul_scalar((1.0 + sigma_prev * sigma_prev).sqrt());
        }
        x = hooks.step_done(i, sigmas, mu, denoised)?;
    }
    Ok(x)
}

/// LCM: `x = denoised + noise * sigma_next` (no noise on the last step).
pub fn lcm(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
) -> Result<Tensor<4>> {
    for i in 0..sigmas.len() - 1 {
        let denoised = (hooks.denoise)(&x, sigmas[i])?;
        x = denoised.clone();
        if sigmas[i + 1] > 0.0 {
            let noise = hooks.noise.draw(&x);
            x = x + noise.mul_scalar(sigmas[i + 1] * options.s_noise);
        }
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
