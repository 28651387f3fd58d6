//! Heun++ (ComfyUI `sample_heunpp2`, from Carzit/sd-webui-samplers-scheduler, MIT): a third
//! evaluation one step further ahead, with weights that shift toward the later slopes as
//! the noise falls. Ported from ComfyUI `comfy/k_diffusion/sampling.py` @ 02159d81; no
//! reference run exists, so it is tested on properties (see the sampler property tests).

use burn::tensor::Tensor;

use super::{Hooks, to_d};
use crate::error::Result;

/// Three denoiser calls per step, two on the next-to-last step, one on the last.
pub fn heunpp2(hooks: &mut Hooks<'_>, mut x: Tensor<4>, sigmas: &[f32]) -> Result<Tensor<4>> {
    let s_end = sigmas[sigmas.len() - 1];
    let sigma_0 = f64::from(sigmas[0]);
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let denoised = (hooks.denoise)(&x, sigma)?;
        let d = to_d(&x, &denoised, sigma);
        let dt = sigma_next - sigma;
        let slope = if sigma_next == s_end {
            d
        } else {
            let x_2 = x.clone() + d.clone().mul_scalar(dt);
            let denoised_2 = (hooks.denoise)(&x_2, sigma_next)?;
            let d_2 = to_d(&x_2, &denoised_2, sigma_next);
            let sigma_after = sigmas[i + 2];
            if sigma_after == s_end {
                let w2 = f64::from(sigma_next) / (2.0 * sigma_0);
                d.mul_scalar(1.0 - w2) + d_2.mul_scalar(w2)
            } else {
                let x_3 = x_2 + d_2.clone().mul_scalar(sigma_after - sigma_next);
                let denoised_3 = (hooks.denoise)(&x_3, sigma_after)?;
                let d_3 = to_d(&x_3, &denoised_3, sigma_after);
                let w2 = f64::from(sigma_next) / (3.0 * sigma_0);
                let w3 = f64::from(sigma_after) / (3.0 * sigma_0);
                d.mul_scalar(1.0 - w2 - w3) + d_2.mul_scalar(w2) + d_3.mul_scalar(w3)
            }
        };
        x = x + slope.mul_scalar(dt);
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
