//! RES multistep (ComfyUI `sample_res_multistep` / `sample_res_multistep_ancestral`, the
//! second-order multistep exponential integrator of Zhang et al. 2023, arXiv 2308.02157).
//! Ported from ComfyUI `comfy/k_diffusion/sampling.py` @ 02159d81 (without CFG++).

use burn::tensor::Tensor;

use super::{AlgorithmOptions, Hooks, add_noise, ancestral_step, to_d};
use crate::error::Result;

/// `t = -ln sigma`.
fn t_of(sigma: f32) -> f64 {
    -f64::from(sigma).ln()
}

/// Euler on the first step, then the RES second-order update from the previous prediction;
/// with `eta > 0` each step lands on `sigma_down` and adds noise of size `sigma_up`.
pub fn res_multistep(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
) -> Result<Tensor<4>> {
    let mut previous: Option<(Tensor<4>, f32)> = None; // (denoised, sigma_down)
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let denoised = (hooks.denoise)(&x, sigma)?;
        let (sigma_down, sigma_up) = ancestral_step(sigma, sigma_next, options.eta);
        x = match &previous {
            Some((old_denoised, old_sigma_down)) if sigma_down != 0.0 => {
                let (t, t_old) = (t_of(sigma), t_of(*old_sigma_down));
                let (t_next, t_prev) = (t_of(sigma_down), t_of(sigmas[i - 1]));
                let h = t_next - t;
                let c2 = (t_prev - t_old) / h;
                let phi1 = (-h).exp_m1() / -h;
                let phi2 = (phi1 - 1.0) / -h;
                // torch.nan_to_num(nan=0): only 0/0 is replaced.
                let finite_or_zero = |v: f64| if v.is_nan() { 0.0 } else { v };
                let b1 = finite_or_zero(phi1 - phi2 / c2);
                let b2 = finite_or_zero(phi2 / c2);
                x.mul_scalar((-h).exp())
                    + denoised.clone().mul_scalar(h * b1)
                    + old_denoised.clone().mul_scalar(h * b2)
            }
            _ => {
                let d = to_d(&x, &denoised, sigma);
                x + d.mul_scalar(sigma_down - sigma)
            }
        };
        x = add_noise(hooks, x, sigma_up, options);
        previous = Some((denoised.clone(), sigma_down));
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
