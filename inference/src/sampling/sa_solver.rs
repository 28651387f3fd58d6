//! SA-Solver (Xue et al., NeurIPS 2023, arXiv 2309.05019): a stochastic Adams
//! predictor-corrector in data prediction, with SDE noise inside a sigma interval.
//! Ported from ComfyUI `comfy/k_diffusion/sampling.py` @ 02159d81 (`sample_sa_solver`,
//! without PECE or the simple order-2 scheme) and `comfy/k_diffusion/sa_solver.py`
//! @ 773ef1b3, for eps-prediction models (`lambda = -ln sigma`, `alpha = 1`).

use burn::tensor::Tensor;

use super::{AlgorithmOptions, Hooks};
use crate::error::Result;

/// ComfyUI's defaults.
const PREDICTOR_ORDER: usize = 3;
const CORRECTOR_ORDER: usize = 4;

/// `(1 + tau^2) * integral_s^t exp((1 + tau^2) x) x^p dx`, with `exp((1 + tau^2) t)` factored
/// out, for `p = 0 .. order` (`compute_exponential_coeffs`).
fn exponential_coeffs(s: f64, t: f64, order: usize, tau: f64) -> Vec<f64> {
    let tau_mul = 1.0 + tau * tau;
    let h = t - s;
    let product: Vec<f64> = (0..order)
        .map(|p| t.powi(p as i32) - s.powi(p as i32) * (-tau_mul * h).exp())
        .collect();
    let ln_factorial = |n: usize| (1..=n).map(|k| (k as f64).ln()).sum::<f64>();
    (0..order)
        .map(|i| {
            (0..=i)
                .map(|j| {
                    let depth = (i - j) as f64;
                    let mut log_coeff = ln_factorial(i) - ln_factorial(j);
                    if tau > 0.0 {
                        log_coeff -= depth * tau_mul.ln();
                    }
                    let sign = if (i - j) % 2 == 0 { 1.0 } else { -1.0 };
                    sign * log_coeff.exp() * product[j]
                })
                .sum()
        })
        .collect()
}

/// The `b_i` of the Lagrange basis through `lambdas` (eqs. 15 and 18), times `alpha_t`.
fn b_coeffs(sigma_next: f32, lambdas: &[f64], lambda_s: f64, lambda_t: f64, tau: f64) -> Vec<f64> {
    let n = lambdas.len();
    let e = exponential_coeffs(lambda_s, lambda_t, n, tau);
    // The transposed Vandermonde matrix: row j holds lambda_i^j.
    let v: Vec<Vec<f64>> = (0..n)
        .map(|j| lambdas.iter().map(|l| l.powi(j as i32)).collect())
        .collect();
    let alpha_t = f64::from(sigma_next) * lambda_t.exp();
    super::uni_pc::solve(&v, &e)
        .into_iter()
        .map(|b| alpha_t * b)
        .collect()
}

/// `sum_k b_k * preds_k` over the last `b.len()` predictions (oldest first).
fn combine(preds: &[Tensor<4>], b: &[f64]) -> Tensor<4> {
    preds[preds.len() - b.len()..]
        .iter()
        .zip(b)
        .map(|(p, &c)| p.clone().mul_scalar(c))
        .reduce(|a, c| a + c)
        .expect("order >= 1")
}

/// `options.sde_interval = (start, end)`: noise (tau 1) while `start >= sigma > end`.
pub fn sa_solver(
    hooks: &mut Hooks<'_>,
    x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
) -> Result<Tensor<4>> {
    let n = sigmas.len() - 1;
    let lambdas: Vec<f64> = sigmas.iter().map(|&s| -f64::from(s.ln())).collect();
    let tau_of = |sigma: f32| match options.sde_interval {
        Some((start, end)) if start >= sigma && sigma > end => 1.0,
        _ => 0.0,
    };
    let lower_order_to_end = sigmas[n] == 0.0;
    let mut x_cur = x.clone();
    let mut x_pred = x;
    let (mut h, mut tau) = (0.0f64, 0.0f64);
    let mut noise: Option<Tensor<4>> = None;
    let mut preds: Vec<Tensor<4>> = Vec::with_capacity(CORRECTOR_ORDER);
    for i in 0..n {
        let denoised = (hooks.denoise)(&x_pred, sigmas[i])?;
        preds.push(denoised.clone());
        if preds.len() > CORRECTOR_ORDER {
            preds.remove(0);
        }
        let mut predictor_order = PREDICTOR_ORDER.min(preds.len());
        let mut corrector_order = if i == 0 || sigmas[i + 1] == 0.0 {
            0
        } else {
            CORRECTOR_ORDER.min(preds.len())
        };
        if lower_order_to_end {
            predictor_order = predictor_order.min(n - 1 - i);
            corrector_order = corrector_order.min(n - i);
        }
        // Corrector: the current state again, now with the prediction at it.
        x_cur = if corrector_order == 0 {
            x_pred.clone()
        } else {
            let window = &lambdas[i + 1 - corrector_order..=i];
            let b = b_coeffs(sigmas[i], window, lambdas[i - 1], lambdas[i], tau);
            let decay = f64::from(sigmas[i]) / f64::from(sigmas[i - 1]) * (-(tau * tau) * h).exp();
            let mut corrected = x_cur.mul_scalar(decay) + combine(&preds, &b);
            if let (true, Some(noise)) = (tau > 0.0 && options.s_noise > 0.0, &noise) {
                corrected = corrected + noise.clone();
            }
            corrected
        };
        // Predictor: the next state.
        x_pred = if sigmas[i + 1] == 0.0 {
            denoised.clone()
        } else {
            tau = tau_of(sigmas[i + 1]);
            let window = &lambdas[i + 1 - predictor_order..=i];
            let b = b_coeffs(sigmas[i + 1], window, lambdas[i], lambdas[i + 1], tau);
            h = lambdas[i + 1] - lambdas[i];
            let decay = f64::from(sigmas[i + 1]) / f64::from(sigmas[i]) * (-(tau * tau) * h).exp();
            let mut predicted = x_cur.clone().mul_scalar(decay) + combine(&preds, &b);
            if tau > 0.0 && options.s_noise > 0.0 {
                let amount = f64::from(sigmas[i + 1])
                    * (-(-2.0 * tau * tau * h).exp_m1()).sqrt()
                    * f64::from(options.s_noise);
                let drawn = hooks.noise.draw(&predicted).mul_scalar(amount);
                predicted = predicted + drawn.clone();
                noise = Some(drawn);
            }
            predicted
        };
        x_pred = hooks.step_done(i, sigmas, x_pred, denoised)?;
    }
    Ok(x_pred)
}
