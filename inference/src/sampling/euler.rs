//! Euler's method (k-diffusion `sample_euler`, diffusers `EulerDiscreteScheduler`), with
//! Karras et al.'s optional churn.

use burn::tensor::Tensor;

use super::{AlgorithmOptions, Hooks, to_d};
use crate::error::Result;

/// `x += (x - x0) / sigma * (sigma_next - sigma)` at every step. With `s_churn > 0`, a step
/// whose sigma lies in `[s_tmin, s_tmax]` first raises the noise to
/// `sigma_hat = sigma (1 + gamma)`, `gamma = min(s_churn / steps, sqrt 2 - 1)`, with fresh
/// noise (drawn only then, as ComfyUI does), and steps from there.
pub fn euler(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
) -> Result<Tensor<4>> {
    let steps = sigmas.len() - 1;
    for i in 0..steps {
        let sigma = sigmas[i];
        let gamma = if options.s_churn > 0.0 && options.s_tmin <= sigma && sigma <= options.s_tmax {
            (f64::from(options.s_churn) / steps as f64).min(2f64.sqrt() - 1.0)
        } else {
            0.0
        };
        let sigma_hat = (f64::from(sigma) * (gamma + 1.0)) as f32;
        if gamma > 0.0 {
            let eps = hooks.noise.draw(&x).mul_scalar(options.s_noise);
            x = x + eps.mul_scalar((sigma_hat * sigma_hat - sigma * sigma).sqrt());
        }
        let denoised = (hooks.denoise)(&x, sigma_hat)?;
        let d = to_d(&x, &denoised, sigma_hat);
        x = x + d.mul_scalar(sigmas[i + 1] - sigma_hat);
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
