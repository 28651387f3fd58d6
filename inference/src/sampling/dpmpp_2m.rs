//! DPM-Solver++(2M) (k-diffusion `sample_dpmpp_2m`, diffusers `DPMSolverMultistepScheduler`
//! with `algorithm_type = "dpmsolver++"`, `solver_order = 2`, midpoint solver).

use burn::tensor::Tensor;

use super::Hooks;
use crate::error::Result;

/// Second-order multistep in `t = -log(sigma)`; the first step and the step to `sigma = 0`
/// are first order (diffusers' `lower_order_final` with a zero final sigma).
pub fn dpmpp_2m(hooks: &mut Hooks<'_>, mut x: Tensor<4>, sigmas: &[f32]) -> Result<Tensor<4>> {
    let t_of = |sigma: f32| -f64::from(sigma).ln();
    let mut old_denoised: Option<Tensor<4>> = None;
    for i in 0..sigmas.len() - 1 {
        let denoised = (hooks.denoise)(&x, sigmas[i])?;
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        if sigma_next == 0.0 {
            x = denoised.clone();
        } else {
            let (t, t_next) = (t_of(sigma), t_of(sigma_next));
            let h = t_next - t;
            let ratio = (f64::from(sigma_next) / f64::from(sigma)) as f32;
            // -(exp(-h) - 1) = -expm1(-h)
            let coeff = -(-h).exp_m1();
            let denoised_d = match &old_denoised {
                None => denoised.clone(),
                Some(old) => {
                    let h_last = t - t_of(sigmas[i - 1]);
                    let r = h_last / h;
                    let a = (1.0 + 1.0 / (2.0 * r)) as f32;
                    let b = (1.0 / (2.0 * r)) as f32;
                    denoised.clone().mul_scalar(a) - old.clone().mul_scalar(b)
                }
            };
            x = x.mul_scalar(ratio) + denoised_d.mul_scalar(coeff as f32);
        }
        x = hooks.step_done(i, sigmas, x, denoised.clone())?;
        old_denoised = Some(denoised);
    }
    Ok(x)
}
