//! Extended reverse-time SDE solver, VP ER-SDE-Solver-3 (ComfyUI `sample_er_sde`, Cui et
//! al. 2023, arXiv 2309.06169). Ported from ComfyUI `comfy/k_diffusion/sampling.py`
//! @ 02159d81 for eps-prediction models, where `er_lambda = sigma` and `alpha = 1`.

use burn::tensor::Tensor;

use super::{AlgorithmOptions, Hooks};
use crate::error::Result;

/// ComfyUI's defaults: three stages, 200 points for the stage integrals.
const MAX_STAGE: usize = 3;
const INTEGRATION_POINTS: usize = 200;

/// ComfyUI's default noise scaler `x * (exp(x^0.3) + 10)`.
fn noise_scaler(x: f64) -> f64 {
    x * (x.powf(0.3).exp() + 10.0)
}

pub fn er_sde(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
) -> Result<Tensor<4>> {
    let lambdas: Vec<f64> = sigmas.iter().map(|&s| f64::from(s)).collect();
    let mut old_denoised: Option<Tensor<4>> = None;
    let mut old_denoised_d: Option<Tensor<4>> = None;
    for i in 0..sigmas.len() - 1 {
        let denoised = (hooks.denoise)(&x, sigmas[i])?;
        let stage = (i + 1).min(MAX_STAGE);
        if sigmas[i + 1] == 0.0 {
            x = denoised.clone();
        } else {
            let (ls, lt) = (lambdas[i], lambdas[i + 1]);
            let r = noise_scaler(lt) / noise_scaler(ls);
            x = x.mul_scalar(r) + denoised.clone().mul_scalar(1.0 - r);
            if let (true, Some(old)) = (stage >= 2, &old_denoised) {
                let dt = lt - ls;
                let step = -dt / INTEGRATION_POINTS as f64;
                let points = (0..INTEGRATION_POINTS).map(|k| lt + k as f64 * step);
                let s: f64 = points.clone().map(|p| 1.0 / noise_scaler(p)).sum::<f64>() * step;
                let denoised_d = (denoised.clone() - old.clone()).div_scalar(ls - lambdas[i - 1]);
                x = x + denoised_d.clone().mul_scalar(dt + s * noise_scaler(lt));
                if let (true, Some(old_d)) = (stage >= 3, &old_denoised_d) {
                    let s_u: f64 = points.map(|p| (p - ls) / noise_scaler(p)).sum::<f64>() * step;
                    let denoised_u = (denoised_d.clone() - old_d.clone())
                        .div_scalar((ls - lambdas[i - 2]) / 2.0);
                    x = x + denoised_u.mul_scalar(dt * dt / 2.0 + s_u * noise_scaler(lt));
                }
                old_denoised_d = Some(denoised_d);
            }
            if options.s_noise > 0.0 {
                let amount = (lt * lt - ls * ls * r * r).sqrt();
                let amount = if amount.is_nan() { 0.0 } else { amount };
                let noise = hooks.noise.draw(&x);
                x = x + noise.mul_scalar(amount * f64::from(options.s_noise));
            }
        }
        old_denoised = Some(denoised.clone());
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
