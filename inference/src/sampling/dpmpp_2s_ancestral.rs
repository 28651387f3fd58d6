//! DPM-Solver++(2S) with ancestral noise: k-diffusion `sample_dpmpp_2s_ancestral`
//! (A1111 "DPM++ 2S a"; ComfyUI `comfy/k_diffusion/sampling.py` @ 02159d81).

use burn::tensor::Tensor;

use super::{AlgorithmOptions, Hooks, add_noise, ancestral_step, to_d};
use crate::error::Result;

/// A single-step second-order exponential integrator in `t = -ln sigma` down to
/// `sigma_down` (its midpoint at half of `h`), then noise of size `sigma_up`.
pub fn dpmpp_2s_ancestral(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
) -> Result<Tensor<4>> {
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let denoised = (hooks.denoise)(&x, sigma)?;
        let (sigma_down, sigma_up) = ancestral_step(sigma, sigma_next, options.eta);
        x = step_2s(x, &denoised, sigma, sigma_down, |x, s| {
            (hooks.denoise)(x, s)
        })?;
        x = add_noise(hooks, x, sigma_up, options);
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}

/// One DPM-Solver++(2S) step from `sigma` to `sigma_down` steered by `prediction` (the x0
/// estimate at `x`), with `second(x_2, sigma_s)` giving the estimate at the midpoint; Euler
/// when `sigma_down` is 0. CFG++ steers with the unconditional prediction instead.
pub(super) fn step_2s(
    x: Tensor<4>,
    prediction: &Tensor<4>,
    sigma: f32,
    sigma_down: f32,
    mut second: impl FnMut(&Tensor<4>, f32) -> Result<Tensor<4>>,
) -> Result<Tensor<4>> {
    if sigma_down == 0.0 {
        let d = to_d(&x, prediction, sigma);
        return Ok(x + d.mul_scalar(sigma_down - sigma));
    }
    let (t, t_next) = (-f64::from(sigma).ln(), -f64::from(sigma_down).ln());
    let h = t_next - t;
    let sigma_s = (-(t + h / 2.0)).exp();
    let x_2 = x.clone().mul_scalar(sigma_s / f64::from(sigma))
        - prediction.clone().mul_scalar((-h / 2.0).exp_m1());
    let prediction_2 = second(&x_2, sigma_s as f32)?;
    Ok(x.mul_scalar(f64::from(sigma_down) / f64::from(sigma))
        - prediction_2.mul_scalar((-h).exp_m1()))
}
