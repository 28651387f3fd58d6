//! CFG++ samplers (Chung et al. 2024, arXiv 2406.08070): the step direction comes from the
//! unconditional prediction while the sample is re-anchored on the guided one, which keeps
//! guidance on the data manifold (use a low CFG scale, about 1–2). Ported from ComfyUI
//! `comfy/k_diffusion/sampling.py` @ 02159d81 for eps-prediction models (`alpha = 1`):
//! `sample_euler_ancestral_cfg_pp` (and `sample_euler_cfg_pp`, its eta-0 twin),
//! `sample_dpmpp_2s_ancestral_cfg_pp`, `sample_dpmpp_2m_cfg_pp`.

use burn::tensor::Tensor;

use super::dpmpp_2s_ancestral::step_2s;
use super::{AlgorithmOptions, Hooks, add_noise, ancestral_step, to_d};
use crate::error::{Error, Result};

/// The guided prediction and the unconditional one of a denoiser call.
fn denoise_both(
    hooks: &mut Hooks<'_>,
    x: &Tensor<4>,
    sigma: f32,
) -> Result<(Tensor<4>, Tensor<4>)> {
    let denoised = (hooks.denoise)(x, sigma)?;
    let uncond = (hooks.uncond)().ok_or_else(|| {
        Error::settings("CFG++ samplers need the unconditional prediction, which this run lacks")
    })?;
    Ok((denoised, uncond))
}

/// Euler (ancestral with `eta > 0`) CFG++.
pub fn euler_ancestral_cfg_pp(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
) -> Result<Tensor<4>> {
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let (denoised, uncond) = denoise_both(hooks, &x, sigma)?;
        x = if sigma_next == 0.0 {
            denoised.clone()
        } else {
            let d = to_d(&x, &uncond, sigma);
            let (sigma_down, sigma_up) = ancestral_step(sigma, sigma_next, options.eta);
            let x = denoised.clone() + d.mul_scalar(sigma_down);
            add_noise(hooks, x, sigma_up, options)
        };
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}

/// DPM-Solver++(2S) ancestral CFG++: both stages step with the unconditional prediction of
/// the stage (the guided one only re-anchors at the end of the step).
pub fn dpmpp_2s_ancestral_cfg_pp(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
) -> Result<Tensor<4>> {
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let (denoised, uncond) = denoise_both(hooks, &x, sigma)?;
        let guidance = denoised.clone() - uncond.clone();
        let (sigma_down, sigma_up) = ancestral_step(sigma, sigma_next, options.eta);
        x = step_2s(x, &uncond, sigma, sigma_down, |x, s| {
            Ok(denoise_both(hooks, x, s)?.1)
        })?;
        x = add_noise(hooks, x, sigma_up, options);
        x = x + guidance;
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}

/// DPM-Solver++(2M) CFG++.
pub fn dpmpp_2m_cfg_pp(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
) -> Result<Tensor<4>> {
    let t_of = |sigma: f32| -f64::from(sigma).ln();
    let mut old_uncond: Option<Tensor<4>> = None;
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let (denoised, uncond) = denoise_both(hooks, &x, sigma)?;
        let h = t_of(sigma_next) - t_of(sigma);
        let decay = (-h).exp(); // 0 on the step to sigma 0
        let mut mix = uncond.clone().mul_scalar(-decay);
        if let (Some(old), false) = (&old_uncond, sigma_next == 0.0) {
            let r = (t_of(sigma) - t_of(sigmas[i - 1])) / h;
            mix = mix - (denoised.clone() - old.clone()).mul_scalar((-h).exp_m1() / (2.0 * r));
        }
        x = denoised.clone() + mix + x.mul_scalar(decay);
        old_uncond = Some(uncond);
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
