//! DPM-Solver in `t = -ln sigma` with its own step sizes: k-diffusion `sample_dpm_fast`
//! (A1111 "DPM fast": fixed steps of order 3, 3, …, 2, 1 spending the step count as model
//! calls) and `sample_dpm_adaptive` ("DPM adaptive": embedded orders 2/3 or 1/2 with a PID
//! step-size controller that really accepts and rejects steps). Ported from ComfyUI
//! `comfy/k_diffusion/sampling.py` @ 02159d81 (`DPMSolver`), in float32 as it runs there
//! (the accept/reject decisions depend on it).
//!
//! Both use only the first and the next-to-last sigma of the list (as ComfyUI's KSampler
//! passes them); `dpm_fast` spends `len - 1` model calls.

use burn::tensor::Tensor;

use super::{AlgorithmOptions, Hooks, StepState, add_noise, ancestral_step};
use crate::error::{Error, Result};
use crate::schedule::torch_linspace_f32;

fn sigma_of(t: f32) -> f32 {
    (-t).exp()
}

fn t_of(sigma: f32) -> f32 {
    -sigma.ln()
}

/// The model as a noise predictor, with the call's denoised output kept for reports.
struct Eps<'h, 'a> {
    hooks: &'h mut Hooks<'a>,
    last_denoised: Option<Tensor<4>>,
}

impl Eps<'_, '_> {
    fn at(&mut self, x: &Tensor<4>, t: f32) -> Result<Tensor<4>> {
        let sigma = sigma_of(t);
        let denoised = (self.hooks.denoise)(x, sigma)?;
        let eps = (x.clone() - denoised.clone()).div_scalar(sigma);
        self.last_denoised = Some(denoised);
        Ok(eps)
    }
}

/// One DPM-Solver step of `order` from `t` to `t_next`, given `eps` at `(x, t)`.
/// `eps_r1` is k-diffusion's `eps_cache['eps_r1']`: the first intermediate evaluation,
/// shared between the two steps of an adaptive attempt (both put it at `t + h / 3`).
#[allow(clippy::too_many_arguments)]
fn dpm_step(
    eps_fn: &mut Eps<'_, '_>,
    x: &Tensor<4>,
    eps: &Tensor<4>,
    eps_r1: &mut Option<Tensor<4>>,
    t: f32,
    t_next: f32,
    order: usize,
    r1_for_order2: f32,
) -> Result<Tensor<4>> {
    let h = t_next - t;
    let sigma_next = sigma_of(t_next);
    let first = x.clone() - eps.clone().mul_scalar(sigma_next * h.exp_m1());
    match order {
        1 => Ok(first),
        2 => {
            let r1 = r1_for_order2;
            let s1 = t + r1 * h;
            let u1 = x.clone() - eps.clone().mul_scalar(sigma_of(s1) * (r1 * h).exp_m1());
            let eps_r1 = cached(eps_fn, eps_r1, &u1, s1)?;
            Ok(first - (eps_r1 - eps.clone()).mul_scalar(sigma_next / (2.0 * r1) * h.exp_m1()))
        }
        _ => {
            let (r1, r2) = (1.0f32 / 3.0, 2.0f32 / 3.0);
            let (s1, s2) = (t + r1 * h, t + r2 * h);
            let u1 = x.clone() - eps.clone().mul_scalar(sigma_of(s1) * (r1 * h).exp_m1());
            let eps_r1 = cached(eps_fn, eps_r1, &u1, s1)?;
            let u2 = x.clone()
                - eps.clone().mul_scalar(sigma_of(s2) * (r2 * h).exp_m1())
                - (eps_r1 - eps.clone())
                    .mul_scalar(sigma_of(s2) * (r2 / r1) * ((r2 * h).exp_m1() / (r2 * h) - 1.0));
            let eps_r2 = eps_fn.at(&u2, s2)?;
            Ok(first - (eps_r2 - eps.clone()).mul_scalar(sigma_next / r2 * (h.exp_m1() / h - 1.0)))
        }
    }
}

fn cached(
    eps_fn: &mut Eps<'_, '_>,
    slot: &mut Option<Tensor<4>>,
    x: &Tensor<4>,
    t: f32,
) -> Result<Tensor<4>> {
    if slot.is_none() {
        *slot = Some(eps_fn.at(x, t)?);
    }
    Ok(slot.clone().expect("just filled"))
}

/// The sigma range ComfyUI derives from a list: `(sigmas[-2], sigmas[0])`.
fn sigma_range(sigmas: &[f32]) -> Result<(f32, f32)> {
    let sigma_min = sigmas[sigmas.len().saturating_sub(2)];
    let sigma_max = sigmas[0];
    if sigma_min <= 0.0 || sigma_max <= 0.0 || sigmas.len() < 3 {
        return Err(Error::settings(
            "DPM fast and DPM adaptive need at least two steps with sigma above 0",
        ));
    }
    Ok((sigma_min, sigma_max))
}

/// `(t_next_, su)`: where a step to `t_next` really lands and the noise it then adds.
fn ancestral_target(t: f32, t_next: f32, t_end: f32, options: AlgorithmOptions) -> (f32, f32) {
    if options.eta == 0.0 {
        return (t_next, 0.0);
    }
    let (down, _) = ancestral_step(sigma_of(t), sigma_of(t_next), options.eta);
    let landed = t_end.min(t_of(down));
    let su = (sigma_of(t_next).powi(2) - sigma_of(landed).powi(2)).sqrt();
    (landed, su)
}

pub fn dpm_fast(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
) -> Result<Tensor<4>> {
    let (sigma_min, sigma_max) = sigma_range(sigmas)?;
    let nfe = sigmas.len() - 1;
    let (t_start, t_end) = (t_of(sigma_max), t_of(sigma_min));
    let m = nfe / 3 + 1;
    let ts = torch_linspace_f32(t_start, t_end, m + 1);
    let orders: Vec<usize> = if nfe.is_multiple_of(3) {
        [vec![3; m - 2], vec![2, 1]].concat()
    } else {
        [vec![3; m - 1], vec![nfe % 3]].concat()
    };
    let mut eps_fn = Eps {
        hooks,
        last_denoised: None,
    };
    for (i, &order) in orders.iter().enumerate() {
        let (t, t_next) = (ts[i], ts[i + 1]);
        let (t_next_, su) = ancestral_target(t, t_next, t_end, options);
        let eps = eps_fn.at(&x, t)?;
        let denoised = eps_fn.last_denoised.clone().expect("just evaluated");
        x = dpm_step(&mut eps_fn, &x, &eps, &mut None, t, t_next_, order, 0.5)?;
        x = add_noise(eps_fn.hooks, x, su, options);
        x = eps_fn.hooks.report(StepState {
            intermediate: false,
            index: i,
            total: orders.len(),
            sigma: sigma_of(t),
            sigma_next: sigma_of(t_next),
            x,
            denoised,
        })?;
    }
    Ok(x)
}

/// k-diffusion's `PIDStepSizeController` with its defaults (integral control only).
struct Pid {
    h: f64,
    b1: f64,
    b2: f64,
    b3: f64,
    accept_safety: f64,
    errs: Vec<f64>,
}

impl Pid {
    fn new(h: f64, order: f64) -> Self {
        let (p, i, d) = (0.0, 1.0, 0.0);
        Self {
            h,
            b1: (p + i + d) / order,
            b2: -(p + 2.0 * d) / order,
            b3: d / order,
            accept_safety: 0.81,
            errs: Vec::new(),
        }
    }

    /// Scales `h` by the error and says whether the step that made it is accepted.
    fn propose(&mut self, error: f32) -> bool {
        let inv_error = 1.0 / (f64::from(error) + 1e-8);
        if self.errs.is_empty() {
            self.errs = vec![inv_error; 3];
        }
        self.errs[0] = inv_error;
        let factor =
            self.errs[0].powf(self.b1) * self.errs[1].powf(self.b2) * self.errs[2].powf(self.b3);
        let factor = 1.0 + (factor - 1.0).atan();
        let accept = factor >= self.accept_safety;
        if accept {
            self.errs[2] = self.errs[1];
            self.errs[1] = self.errs[0];
        }
        self.h *= factor;
        accept
    }
}

/// DPM-Solver-23 (or -12 with `order` 2): each attempt takes a low- and a high-order step of
/// the same evaluations, and the PID controller accepts it or shrinks `h` and retries.
/// Progress is reported per accepted step; the total is unknown until the end, so the
/// reported total is the sigma list's step count or the steps so far, whichever is larger.
pub fn dpm_adaptive(
    hooks: &mut Hooks<'_>,
    mut x: Tensor<4>,
    sigmas: &[f32],
    options: AlgorithmOptions,
    order: usize,
) -> Result<Tensor<4>> {
    const RTOL: f32 = 0.05;
    const ATOL: f32 = 0.0078;
    const H_INIT: f64 = 0.05;
    /// A run that needs more attempts than this is not converging; stop with an error.
    const MAX_ATTEMPTS: usize = 10_000;
    let (sigma_min, sigma_max) = sigma_range(sigmas)?;
    let (t_start, t_end) = (t_of(sigma_max), t_of(sigma_min));
    let numel = x.shape().num_elements() as f32;
    let mut s = t_start;
    let mut x_prev = x.clone();
    let pid_order = if options.eta > 0.0 { 1.5 } else { order as f64 };
    let mut pid = Pid::new(H_INIT, pid_order);
    let mut accepted = 0;
    let mut eps_fn = Eps {
        hooks,
        last_denoised: None,
    };
    let mut attempts = 0;
    while s < t_end - 1e-5 {
        attempts += 1;
        if attempts > MAX_ATTEMPTS {
            return Err(Error::settings(
                "DPM adaptive did not converge (over 10000 attempts); use another sampler",
            ));
        }
        let t = t_end.min((f64::from(s) + pid.h) as f32);
        let (t_, su) = ancestral_target(s, t, t_end, options);
        let eps = eps_fn.at(&x, s)?;
        let denoised = eps_fn.last_denoised.clone().expect("just evaluated");
        let r1 = &mut None;
        let (x_low, x_high) = if order == 2 {
            let low = dpm_step(&mut eps_fn, &x, &eps, r1, s, t_, 1, 0.5)?;
            let high = dpm_step(&mut eps_fn, &x, &eps, r1, s, t_, 2, 0.5)?;
            (low, high)
        } else {
            let low = dpm_step(&mut eps_fn, &x, &eps, r1, s, t_, 2, 1.0 / 3.0)?;
            let high = dpm_step(&mut eps_fn, &x, &eps, r1, s, t_, 3, 0.5)?;
            (low, high)
        };
        // delta = max(atol, rtol * max(|x_low|, |x_prev|)); error = rms((low - high) / delta).
        let delta = x_low
            .clone()
            .abs()
            .max_pair(x_prev.clone().abs())
            .mul_scalar(RTOL)
            .clamp_min(ATOL);
        let scaled = (x_low.clone() - x_high.clone()) / delta;
        let error = scaled.clone().mul(scaled).sum().into_scalar::<f32>().sqrt() / numel.sqrt();
        if pid.propose(error) {
            x_prev = x_low;
            x = add_noise(eps_fn.hooks, x_high, su, options);
            let sigma = sigma_of(s);
            s = t;
            x = eps_fn.hooks.report(StepState {
                intermediate: false,
                index: accepted,
                total: (sigmas.len() - 1).max(accepted + 1),
                sigma,
                sigma_next: sigma_of(s),
                x,
                denoised,
            })?;
            accepted += 1;
        }
    }
    Ok(x)
}
