//! The stochastic DPM-Solver++ family: k-diffusion `sample_dpmpp_sde` (A1111 "DPM++ SDE"),
//! `sample_dpmpp_2m_sde` with the midpoint or Heun correction ("DPM++ 2M SDE" /
//! "DPM++ 2M SDE Heun") and `sample_dpmpp_3m_sde` ("DPM++ 3M SDE"). Ported from ComfyUI
//! `comfy/k_diffusion/sampling.py` @ 02159d81 for eps-prediction models, where ComfyUI's
//! `alpha_t` factors are 1; written in `t = -ln sigma` as k-diffusion 0.1.1 writes them.
//!
//! Their noise comes from [`Hooks::noise`] through [`super::NoiseSource::draw_between`], one
//! call per noise injection, in loop order, with the noise levels k-diffusion passes its
//! noise sampler: with a Brownian tree (ComfyUI's and A1111's default, see
//! [`crate::rng::brownian`]) those levels pick the tree's nodes, so they are computed in
//! float32 exactly as torch computes them.

use burn::tensor::Tensor;

use super::{AlgorithmOptions, Hooks, add_noise_between, ancestral_step};
use crate::error::Result;

/// `t = -ln sigma`, in double precision.
fn t_of(sigma: f32) -> f64 {
    -f64::from(sigma).ln()
}

/// The noise level of DPM++ SDE's second evaluation: `exp(-(t + h / 2))` in `t = -ln sigma`.
pub fn sde_midpoint(sigma: f32, sigma_next: f32) -> f32 {
    let (t, t_next) = (t_of(sigma), t_of(sigma_next));
    (-(t + (t_next - t) * 0.5)).exp() as f32
}

/// The noise levels `sample_dpmpp_sde` (k-diffusion 0.1.1, A1111; diffusers'
/// `DPMSolverSDEScheduler` alike) passes its noise sampler for a step: `sigma_fn(t)`,
/// `sigma_fn(s)` and `sigma_fn(t_next)` with `t = -ln sigma`, `s = t + h / 2`, in float32.
/// The round trip `exp(-(-ln sigma))` may move sigma by an ulp, which can move a Brownian
/// tree query across its 1e-6 grid; ComfyUI's port queries `sigma` itself instead.
pub fn sde_noise_levels(sigma: f32, sigma_next: f32) -> (f32, f32, f32) {
    let t = -sigma.ln();
    let t_next = -sigma_next.ln();
    let s = t + (t_next - t) * 0.5;
    ((-t).exp(), (-s).exp(), (-t_next).exp())
}

/// DPM-Solver++ (stochastic, `r = 1/2`): two denoiser calls per step, each stage followed by
/// ancestral noise; the last step (to sigma 0) returns the denoised sample.
pub fn dpmpp_sde(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
) -> Result<Tensor<4>> {
    const R: f64 = 0.5;
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let denoised = (hooks.denoise)(&x, sigma)?;
        x = if sigma_next == 0.0 {
            denoised.clone()
        } else {
            let t = t_of(sigma);
            // `r = 1/2`: the second evaluation sits halfway in t.
            let sigma_s = sde_midpoint(sigma, sigma_next);
            let fac = 1.0 / (2.0 * R);
            let (from, to_mid, to_next) = sde_noise_levels(sigma, sigma_next);

            let (down, up) = ancestral_step(sigma, sigma_s, options.eta);
            let s_ = t_of(down);
            let x_2 = x.clone().mul_scalar((-s_).exp() / f64::from(sigma))
                - denoised.clone().mul_scalar((t - s_).exp_m1());
            let x_2 = add_noise_between(hooks, x_2, up, options, (from, to_mid));
            // Offered at `sigma_next`, the level diffusers' `add_noise` gives it (see
            // `dpm_2::midpoint_step`).
            let total = sigmas.len() - 1;
            let x_2 = hooks.intermediate(i, total, (sigma, sigma_next), x_2, &denoised)?;
            let denoised_2 = (hooks.denoise)(&x_2, sigma_s)?;

            let (down, up) = ancestral_step(sigma, sigma_next, options.eta);
            let t_next_ = t_of(down);
            let denoised_d = denoised.clone().mul_scalar(1.0 - fac) + denoised_2.mul_scalar(fac);
            let x = x.mul_scalar((-t_next_).exp() / f64::from(sigma))
                - denoised_d.mul_scalar((t - t_next_).exp_m1());
            add_noise_between(hooks, x, up, options, (from, to_next))
        };
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}

/// How DPM++ 2M SDE corrects its first-order step with the previous prediction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SdeSolver {
    Midpoint,
    Heun,
}

/// DPM-Solver++(2M) SDE: one denoiser call per step, a multistep correction from the
/// previous step's prediction, noise of size `sigma_next * sqrt(1 - exp(-2 eta h))`.
pub fn dpmpp_2m_sde(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
    solver: SdeSolver,
) -> Result<Tensor<4>> {
    let eta = f64::from(options.eta);
    let mut previous: Option<(Tensor<4>, f64)> = None;
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let denoised = (hooks.denoise)(&x, sigma)?;
        if sigma_next == 0.0 {
            x = denoised.clone();
        } else {
            let h = t_of(sigma_next) - t_of(sigma);
            let eta_h = eta * h;
            let first = -(-h - eta_h).exp_m1();
            x = x.mul_scalar(f64::from(sigma_next) / f64::from(sigma) * (-eta_h).exp())
                + denoised.clone().mul_scalar(first);
            if let Some((old_denoised, h_last)) = &previous {
                let r = h_last / h;
                let factor = match solver {
                    SdeSolver::Heun => (first / (-h - eta_h) + 1.0) / r,
                    SdeSolver::Midpoint => 0.5 * first / r,
                };
                x = x + (denoised.clone() - old_denoised.clone()).mul_scalar(factor);
            }
            let up = f64::from(sigma_next) * (-(-2.0 * eta_h).exp_m1()).sqrt();
            x = add_noise_between(hooks, x, up as f32, options, (sigma, sigma_next));
            previous = Some((denoised.clone(), h));
        }
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}

/// DPM-Solver++(3M) SDE: third-order multistep from the last two predictions (second order
/// on the second step, first order on the first).
pub fn dpmpp_3m_sde(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
) -> Result<Tensor<4>> {
    let eta = f64::from(options.eta);
    // The last two (prediction, step size) pairs, newest first.
    let mut history: Vec<(Tensor<4>, f64)> = Vec::with_capacity(2);
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let denoised = (hooks.denoise)(&x, sigma)?;
        if sigma_next == 0.0 {
            x = denoised.clone();
        } else {
            let h = t_of(sigma_next) - t_of(sigma);
            let h_eta = h * (eta + 1.0);
            x = x.mul_scalar((-h_eta).exp()) + denoised.clone().mul_scalar(-(-h_eta).exp_m1());
            let phi_2 = (-h_eta).exp_m1() / h_eta + 1.0;
            match history.as_slice() {
                [(denoised_1, h_1), (denoised_2, h_2)] => {
                    let (r0, r1) = (h_1 / h, h_2 / h);
                    let d1_0 = (denoised.clone() - denoised_1.clone()).div_scalar(r0);
                    let d1_1 = (denoised_1.clone() - denoised_2.clone()).div_scalar(r1);
                    let d1 =
                        d1_0.clone() + (d1_0.clone() - d1_1.clone()).mul_scalar(r0 / (r0 + r1));
                    let d2 = (d1_0 - d1_1).div_scalar(r0 + r1);
                    let phi_3 = phi_2 / h_eta - 0.5;
                    x = x + d1.mul_scalar(phi_2) - d2.mul_scalar(phi_3);
                }
                [(denoised_1, h_1)] => {
                    let r = h_1 / h;
                    x = x
                        + (denoised.clone() - denoised_1.clone())
                            .div_scalar(r)
                            .mul_scalar(phi_2);
                }
                _ => {}
            }
            let up = f64::from(sigma_next) * (-(-2.0 * h * eta).exp_m1()).sqrt();
            x = add_noise_between(hooks, x, up as f32, options, (sigma, sigma_next));
            history.insert(0, (denoised.clone(), h));
            history.truncate(2);
        }
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
