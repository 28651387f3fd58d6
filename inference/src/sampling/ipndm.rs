//! Improved pseudo numerical methods (iPNDM, Zhang & Chen 2022): Adams-Bashforth on the
//! slopes `d = (x - x0) / sigma`, up to fourth order. `ipndm` uses the fixed-step
//! coefficients, `ipndm_v` the variable-step ones. Ported from ComfyUI
//! `comfy/k_diffusion/sampling.py` @ 02159d81 (from zju-pi/diff-sampler, Apache 2.0).

use burn::tensor::Tensor;

use super::{Hooks, to_d};
use crate::error::Result;

/// ComfyUI's default `max_order`.
const MAX_ORDER: usize = 4;

/// Fixed-step iPNDM.
pub fn ipndm(hooks: &mut Hooks<'_>, x: Tensor<4>, sigmas: &[f32]) -> Result<Tensor<4>> {
    multistep(hooks, x, sigmas, |_, order| match order {
        1 => vec![1.0],
        2 => vec![3.0 / 2.0, -1.0 / 2.0],
        3 => vec![23.0 / 12.0, -16.0 / 12.0, 5.0 / 12.0],
        _ => vec![55.0 / 24.0, -59.0 / 24.0, 37.0 / 24.0, -9.0 / 24.0],
    })
}

/// Variable-step iPNDM (`ipndm_v`): the coefficients follow the actual step sizes.
pub fn ipndm_v(hooks: &mut Hooks<'_>, x: Tensor<4>, sigmas: &[f32]) -> Result<Tensor<4>> {
    multistep(hooks, x, sigmas, |i, order| {
        let t = |k: usize| f64::from(sigmas[k]);
        let h_n = t(i + 1) - t(i);
        if order == 1 {
            return vec![1.0];
        }
        let h_n_1 = t(i) - t(i - 1);
        let c1 = (2.0 + h_n / h_n_1) / 2.0;
        let c2 = -(h_n / h_n_1) / 2.0;
        if order == 2 {
            return vec![c1, c2];
        }
        let h_n_2 = t(i - 1) - t(i - 2);
        let temp1 = (1.0
            - h_n / (3.0 * (h_n + h_n_1)) * (h_n * (h_n + h_n_1)) / (h_n_1 * (h_n_1 + h_n_2)))
            / 2.0;
        if order == 3 {
            return vec![
                c1 + temp1,
                c2 - (1.0 + h_n_1 / h_n_2) * temp1,
                temp1 * h_n_1 / h_n_2,
            ];
        }
        let h_n_3 = t(i - 2) - t(i - 3);
        let temp2 = ((1.0 - h_n / (3.0 * (h_n + h_n_1))) / 2.0
            + (1.0 - h_n / (2.0 * (h_n + h_n_1))) * h_n / (6.0 * (h_n + h_n_1 + h_n_2)))
            * (h_n * (h_n + h_n_1) * (h_n + h_n_1 + h_n_2))
            / (h_n_1 * (h_n_1 + h_n_2) * (h_n_1 + h_n_2 + h_n_3));
        let ratio = h_n_1 * (h_n_1 + h_n_2) / (h_n_2 * (h_n_2 + h_n_3));
        vec![
            c1 + temp1 + temp2,
            c2 - (1.0 + h_n_1 / h_n_2) * temp1 - (1.0 + h_n_1 / h_n_2 + ratio) * temp2,
            temp1 * h_n_1 / h_n_2 + (h_n_1 / h_n_2 + ratio * (1.0 + h_n_2 / h_n_3)) * temp2,
            -temp2 * ratio * h_n_1 / h_n_2,
        ]
    })
}

/// The shared loop: `x += (sigma_next - sigma) * sum(c_k * d_{i-k})` with the coefficients
/// `coefficients(i, order)` (newest slope first); the step to sigma 0 returns the prediction.
fn multistep(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    coefficients: impl Fn(usize, usize) -> Vec<f64>,
) -> Result<Tensor<4>> {
    // Past slopes, newest first.
    let mut slopes: Vec<Tensor<4>> = Vec::with_capacity(MAX_ORDER);
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let denoised = (hooks.denoise)(&x, sigma)?;
        let d = to_d(&x, &denoised, sigma);
        slopes.insert(0, d);
        slopes.truncate(MAX_ORDER);
        x = if sigma_next == 0.0 {
            denoised.clone()
        } else {
            let order = (i + 1).min(MAX_ORDER);
            let step = coefficients(i, order)
                .into_iter()
                .zip(&slopes)
                .map(|(c, d)| d.clone().mul_scalar(c))
                .reduce(|a, b| a + b)
                .expect("at least one slope");
            x + step.mul_scalar(sigma_next - sigma)
        };
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
