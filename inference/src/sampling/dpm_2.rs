//! DPM-Solver-2 style midpoint samplers: k-diffusion `sample_dpm_2` and
//! `sample_dpm_2_ancestral` (A1111 "DPM2" / "DPM2 a"; ComfyUI `comfy/k_diffusion/sampling.py`
//! @ 02159d81).

use burn::tensor::Tensor;

use super::{AlgorithmOptions, Hooks, add_noise, ancestral_step, to_d};
use crate::error::Result;

/// The geometric midpoint of two noise levels, `exp(lerp(ln a, ln b, 1/2))`, in float32 as
/// torch computes it (`lerp` at weight 1/2 is `end - (end - start) / 2`): diffusers takes
/// the UNet timestep of this exact value.
pub fn log_midpoint(a: f32, b: f32) -> f32 {
    let (start, end) = (a.ln(), b.ln());
    (end - (end - start) * 0.5).exp()
}

/// One DPM-2 step `index` of `sigmas` from `sigma` to `target`: the slope at the
/// log-midpoint carries `x` the whole way (plain Euler when `target` is 0).
///
/// The midpoint sample is offered to the step hook as an intermediate at the step's
/// `sigma_next`: the level diffusers' KDPM2 schedulers give `add_noise` after their first
/// half-step (their sigma list repeats each level), which its inpainting blend uses.
fn midpoint_step(
    hooks: &mut Hooks<'_>,
    (x, denoised): (Tensor<4>, &Tensor<4>),
    (sigma, target): (f32, f32),
    (index, sigmas): (usize, &[f32]),
) -> Result<Tensor<4>> {
    let d = to_d(&x, denoised, sigma);
    if target == 0.0 {
        return Ok(x + d.mul_scalar(target - sigma));
    }
    let sigma_mid = log_midpoint(sigma, target);
    let x_mid = x.clone() + d.mul_scalar(sigma_mid - sigma);
    let levels = (sigma, sigmas[index + 1]);
    let x_mid = hooks.intermediate(index, sigmas.len() - 1, levels, x_mid, denoised)?;
    let denoised_mid = (hooks.denoise)(&x_mid, sigma_mid)?;
    let d_mid = to_d(&x_mid, &denoised_mid, sigma_mid);
    Ok(x + d_mid.mul_scalar(target - sigma))
}

/// Second order, two denoiser calls per step except the last (`2n - 1` in all).
pub fn dpm_2(hooks: &mut Hooks<'_>, mut x: Tensor<4>, sigmas: &[f32]) -> Result<Tensor<4>> {
    for i in 0..sigmas.len() - 1 {
        let denoised = (hooks.denoise)(&x, sigmas[i])?;
        let levels = (sigmas[i], sigmas[i + 1]);
        x = midpoint_step(hooks, (x, &denoised), levels, (i, sigmas))?;
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}

/// DPM-2 down to `sigma_down`, then fresh noise of size `sigma_up` (none on the last step).
pub fn dpm_2_ancestral(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
) -> Result<Tensor<4>> {
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let denoised = (hooks.denoise)(&x, sigma)?;
        let (sigma_down, sigma_up) = ancestral_step(sigma, sigma_next, options.eta);
        x = midpoint_step(hooks, (x, &denoised), (sigma, sigma_down), (i, sigmas))?;
        x = add_noise(hooks, x, sigma_up, options);
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
