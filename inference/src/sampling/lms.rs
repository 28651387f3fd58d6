//! Linear multistep (k-diffusion `sample_lms`, diffusers `LMSDiscreteScheduler`), order 4.

use burn::tensor::Tensor;

use super::{Hooks, to_d};
use crate::error::Result;

const ORDER: usize = 4;

/// The integral over `[sigmas[i], sigmas[i + 1]]` of the Lagrange basis polynomial that is 1
/// at `sigmas[i - j]` and 0 at the other `order - 1` previous sigmas (k-diffusion
/// `linear_multistep_coeff`). Computed exactly with 4-point Gauss-Legendre quadrature (the
/// polynomial has degree at most 3), in float64.
pub fn lms_coefficient(order: usize, sigmas: &[f32], i: usize, j: usize) -> f64 {
    let basis = |tau: f64| {
        (0..order)
            .filter(|&k| k != j)
            .map(|k| {
                let sk = f64::from(sigmas[i - k]);
                (tau - sk) / (f64::from(sigmas[i - j]) - sk)
            })
            .product::<f64>()
    };
    const NODES: [f64; 4] = [
        -0.861_136_311_594_052_6,
        -0.339_981_043_584_856_3,
        0.339_981_043_584_856_3,
        0.861_136_311_594_052_6,
    ];
    const WEIGHTS: [f64; 4] = [
        0.347_854_845_137_453_9,
        0.652_145_154_862_546_1,
        0.652_145_154_862_546_1,
        0.347_854_845_137_453_9,
    ];
    let (a, b) = (f64::from(sigmas[i]), f64::from(sigmas[i + 1]));
    let (mid, half) = ((a + b) / 2.0, (b - a) / 2.0);
    NODES
        .iter()
        .zip(WEIGHTS)
        .map(|(&n, w)| w * basis(mid + half * n))
        .sum::<f64>()
        * half
}

/// `x += sum_j c_j * d_{i-j}` over the last `min(i + 1, 4)` derivatives.
pub fn lms(hooks: &mut Hooks<'_>, mut x: Tensor<4>, sigmas: &[f32]) -> Result<Tensor<4>> {
    let mut derivatives: Vec<Tensor<4>> = Vec::with_capacity(ORDER);
    for i in 0..sigmas.len() - 1 {
        let denoised = (hooks.denoise)(&x, sigmas[i])?;
        if derivatives.len() == ORDER {
            derivatives.remove(0);
        }
        derivatives.push(to_d(&x, &denoised, sigmas[i]));
        let order = (i + 1).min(ORDER);
        for j in 0..order {
            let coeff = lms_coefficient(order, sigmas, i, j) as f32;
            x = x + derivatives[derivatives.len() - 1 - j]
                .clone()
                .mul_scalar(coeff);
        }
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
