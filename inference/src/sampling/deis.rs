//! DEIS (Zhang & Chen 2022, arXiv 2204.13902), ComfyUI's `sample_deis` in its default
//! "tab" mode: multistep on the slopes `d = (x - x0) / sigma`, with coefficients integrated
//! numerically in the VP time of an EDM-range schedule. Ported from ComfyUI
//! `comfy/k_diffusion/deis.py` @ c828fdcf and `sampling.py` @ 02159d81 (from
//! zju-pi/diff-sampler, Apache 2.0). The coefficients are computed in float64 (ComfyUI sums
//! 10,000 float32 terms; the difference is far below the sampler's tolerance).

use burn::tensor::Tensor;

use super::{Hooks, to_d};
use crate::error::Result;

/// ComfyUI's default `max_order`, and the integration points of "tab" mode.
const MAX_ORDER: usize = 3;
const POINTS: usize = 10_000;

/// The VP schedule `edm2t` fits to EDM's range (sigma 0.002 to 80, eps 1e-3), as
/// `(beta_0, beta_1)`, and the VP time of each sigma.
fn edm_to_vp_time(sigmas: &[f32]) -> (f64, f64, Vec<f64>) {
    let (eps_s, sigma_min, sigma_max) = (1e-3f64, 0.002f64, 80f64);
    let beta_d = 2.0
        * ((sigma_min * sigma_min + 1.0).ln() / eps_s - (sigma_max * sigma_max + 1.0).ln())
        / (eps_s - 1.0);
    let beta_min = (sigma_max * sigma_max + 1.0).ln() - 0.5 * beta_d;
    let t = sigmas
        .iter()
        .map(|&s| {
            let s = f64::from(s);
            ((beta_min * beta_min + 2.0 * beta_d * (s * s + 1.0).ln()).sqrt() - beta_min) / beta_d
        })
        .collect();
    (beta_min, beta_d + beta_min, t)
}

/// `-0.5 d(log alpha)/dt / sqrt(alpha (1 - alpha))` with `alpha = exp(-t^2 (b1 - b0) / 2 - t b0)`.
fn integrand(beta_0: f64, beta_1: f64, tau: f64) -> f64 {
    let alpha = (-0.5 * tau * tau * (beta_1 - beta_0) - tau * beta_0).exp();
    let d_log_alpha = -tau * (beta_1 - beta_0) - beta_0;
    -0.5 * d_log_alpha / (alpha * (1.0 - alpha)).sqrt()
}

/// The "tab" coefficients of step `i` (newest slope first), for `order >= 2`.
fn coefficients(beta: (f64, f64), t: &[f64], i: usize, order: usize) -> Vec<f64> {
    let (t_cur, t_next) = (t[i], t[i + 1]);
    let prev: Vec<f64> = (0..order).map(|k| t[i - k]).collect();
    let dtau = (t_next - t_cur) / POINTS as f64;
    (0..order)
        .map(|j| {
            let mut sum = 0.0;
            for k in 0..POINTS {
                // torch.linspace(t_cur, t_next, N): both ends included.
                let tau = t_cur + (t_next - t_cur) * k as f64 / (POINTS - 1) as f64;
                let mut poly = 1.0;
                for (m, &p) in prev.iter().enumerate() {
                    if m != j {
                        poly *= (tau - p) / (prev[j] - p);
                    }
                }
                sum += integrand(beta.0, beta.1, tau) * poly;
            }
            sum * dtau
        })
        .collect()
}

pub fn deis(hooks: &mut Hooks<'_>, mut x: Tensor<4>, sigmas: &[f32]) -> Result<Tensor<4>> {
    let (beta_0, beta_1, t) = edm_to_vp_time(sigmas);
    // Past slopes, newest first.
    let mut slopes: Vec<Tensor<4>> = Vec::with_capacity(MAX_ORDER);
    for i in 0..sigmas.len() - 1 {
        let (sigma, sigma_next) = (sigmas[i], sigmas[i + 1]);
        let denoised = (hooks.denoise)(&x, sigma)?;
        let d = to_d(&x, &denoised, sigma);
        let order = if sigma_next <= 0.0 {
            1
        } else {
            (i + 1).min(MAX_ORDER)
        };
        x = if order == 1 {
            x + d.clone().mul_scalar(sigma_next - sigma)
        } else {
            let c = coefficients((beta_0, beta_1), &t, i, order);
            let mut next = x + d.clone().mul_scalar(c[0]);
            for (coefficient, slope) in c[1..].iter().zip(&slopes) {
                next = next + slope.clone().mul_scalar(*coefficient);
            }
            next
        };
        slopes.insert(0, d);
        slopes.truncate(MAX_ORDER - 1);
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}

/// diffusers' `DEISMultistepScheduler` ("deis" with "logrho", `lower_order_final`): on the
/// slopes `eps = (x - x0) / rho` (rho = sigma), the step integrates the Lagrange polynomial
/// through the last `order` slopes in `log rho`. Its first-order step is Euler. Ported from
/// diffusers 0.42 `scheduling_deis_multistep.py` (orders 1 and 2); the step to sigma 0 is
/// first order, as diffusers' `lower_order_final` makes it.
pub fn deis_logrho(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    max_order: usize,
) -> Result<Tensor<4>> {
    // `Integrate[(log t - log c) / (log b - log c), t]` (diffusers' `ind_fn`).
    let ind = |t: f64, b: f64, c: f64| t * (-c.ln() + t.ln() - 1.0) / (b.ln() - c.ln());
    let n = sigmas.len() - 1;
    let mut previous: Option<(Tensor<4>, f64)> = None; // (slope, its rho)
    for i in 0..n {
        let (rho_s0, rho_t) = (f64::from(sigmas[i]), f64::from(sigmas[i + 1]));
        let denoised = (hooks.denoise)(&x, sigmas[i])?;
        let eps = to_d(&x, &denoised, sigmas[i]);
        // Warm-up: first order on the first step; `lower_order_final` on the last (< 15
        // steps in diffusers) and whenever the step ends at 0, where log rho diverges.
        let last_low = i == n - 1 && n < 15;
        let order = if max_order < 2 || rho_t == 0.0 || last_low {
            1
        } else {
            (i + 1).min(2)
        };
        x = match (&previous, order) {
            (Some((eps_1, rho_s1)), 2) => {
                let c1 = ind(rho_t, rho_s0, *rho_s1) - ind(rho_s0, rho_s0, *rho_s1);
                let c2 = ind(rho_t, *rho_s1, rho_s0) - ind(rho_s0, *rho_s1, rho_s0);
                x + eps.clone().mul_scalar(c1) + eps_1.clone().mul_scalar(c2)
            }
            _ => x + eps.clone().mul_scalar(rho_t - rho_s0),
        };
        previous = Some((eps, rho_s0));
        x = hooks.step_done(i, sigmas, x, denoised)?;
    }
    Ok(x)
}
