//! UniPC (Zhao et al. 2023, arXiv 2302.04867): a multistep predictor with a corrector that
//! reuses the next model evaluation, in data prediction with the B(h) variants. Ported from
//! ComfyUI `comfy/extra_samplers/uni_pc.py` @ 0748e38f (`sample_unipc`, bh1 and bh2), which
//! also covers diffusers' `UniPCMultistepScheduler` (predict_x0, lower_order_final): the
//! same updates, with the solver order from the config and the last step to sigma 0.
//!
//! The state lives in the model's own scaling (`x_vp = x / sqrt(1 + sigma^2)`), and the
//! noise-schedule functions are evaluated in float32 exactly as written there: near
//! sigma = 0.001 (ComfyUI's stand-in for 0) `1 - exp(2 log alpha)` cancels, and the result
//! depends on that rounding.

use burn::tensor::Tensor;

use super::Hooks;
use crate::error::Result;

/// UniPC's B(h): `h` (bh1) or `e^h - 1` (bh2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum UniPcVariant {
    Bh1,
    Bh2,
}

/// Whose UniPC: the maths is the same; these details differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UniPcFlavor {
    /// ComfyUI `sample_unipc`: a final sigma of 0 is run as 0.001 (the result divided by its
    /// alpha), the schedule through `log alpha`, and the sample reported after a step is the
    /// corrected one.
    Comfy,
    /// diffusers `UniPCMultistepScheduler`: steps to 0 itself, `alpha = 1 / sqrt(1 + s^2)`,
    /// and a step reports the next prediction (the corrector runs in the following `step`).
    Diffusers,
}

/// How a UniPC run is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UniPcOptions {
    pub variant: UniPcVariant,
    /// The highest order; `None` is ComfyUI's `min(3, steps - 1)`.
    pub max_order: Option<usize>,
    pub flavor: UniPcFlavor,
}

/// The VP schedule of a sigma: alpha, std and the half log-SNR `lambda`, in float32 with
/// either implementation's arithmetic (they differ in rounding near sigma = 0).
#[derive(Clone, Copy)]
struct Vp {
    /// ComfyUI `SigmaConvert` (through `log alpha`); otherwise diffusers'
    /// `_sigma_to_alpha_sigma_t` (`alpha = 1 / sqrt(sigma^2 + 1)`, `std = sigma * alpha`).
    comfy: bool,
}

impl Vp {
    fn log_alpha(self, t: f32) -> f32 {
        0.5 * (1.0 / (t * t + 1.0)).ln()
    }

    fn alpha(self, t: f32) -> f32 {
        if self.comfy {
            self.log_alpha(t).exp()
        } else {
            1.0 / (t * t + 1.0).sqrt()
        }
    }

    fn std(self, t: f32) -> f32 {
        if self.comfy {
            (1.0 - (2.0 * self.log_alpha(t)).exp()).sqrt()
        } else {
            t * self.alpha(t)
        }
    }

    fn lambda(self, t: f32) -> f32 {
        if self.comfy {
            let l = self.log_alpha(t);
            l - 0.5 * (1.0 - (2.0 * l).exp()).ln()
        } else {
            self.alpha(t).ln() - self.std(t).ln()
        }
    }
}

/// One remembered model evaluation: its time (sigma), the data prediction, and the
/// denoiser's output for progress reports.
struct Eval {
    t: f32,
    model: Tensor<4>,
    denoised: Tensor<4>,
}

/// The data prediction at `x_vp` (ComfyUI's `predict_eps_sigma` then `data_prediction_fn`).
fn model_fn(hooks: &mut Hooks<'_>, vp: Vp, x_vp: &Tensor<4>, t: f32) -> Result<Eval> {
    let x = x_vp.clone().mul_scalar((t * t + 1.0).sqrt());
    let denoised = (hooks.denoise)(&x, t)?;
    let eps = (x - denoised.clone()).div_scalar(t);
    let model = (x_vp.clone() - eps.mul_scalar(vp.std(t))).div_scalar(vp.alpha(t));
    Ok(Eval { t, model, denoised })
}

pub fn uni_pc(
    hooks: &mut Hooks<'_>,
    x: Tensor<4>,
    sigmas: &[f32],
    options: UniPcOptions,
) -> Result<Tensor<4>> {
    let comfy = options.flavor == UniPcFlavor::Comfy;
    let mut ts = sigmas.to_vec();
    let last = ts.len() - 1;
    if comfy && ts[last] == 0.0 {
        ts[last] = 0.001;
    }
    let steps = last;
    let order = options
        .max_order
        .unwrap_or((ts.len() - 2).min(3))
        .clamp(1, steps);
    let vp = Vp { comfy };
    let mut x = x.div_scalar((1.0 + ts[0] * ts[0]).sqrt());
    let mut history = vec![model_fn(hooks, vp, &x, ts[0])?];
    // Update k lands at ts[k + 1]: a prediction, then (except on the last step) a model call
    // there and the correction it allows.
    for k in 0..steps {
        let target = k + 1;
        let step_order = if target < order {
            target
        } else {
            order.min(steps + 1 - target)
        };
        let update = Update::new(vp, &history, ts[target], step_order, options.variant);
        let predicted = update.predict(&x);
        if target == steps {
            x = report(hooks, vp, k, sigmas, &ts, predicted, &history)?;
            break;
        }
        let predicted = match options.flavor {
            UniPcFlavor::Diffusers => report(hooks, vp, k, sigmas, &ts, predicted, &history)?,
            UniPcFlavor::Comfy => predicted,
        };
        let evaluated = model_fn(hooks, vp, &predicted, ts[target])?;
        x = update.correct(&x, &evaluated);
        if history.len() == order {
            history.remove(0);
        }
        history.push(evaluated);
        if comfy {
            x = report(hooks, vp, k, sigmas, &ts, x, &history)?;
        }
    }
    Ok(x.div_scalar(vp.alpha(ts[steps])))
}

/// Reports step `k` in sigma scaling (`x_vp / alpha`) and takes back a replacement.
fn report(
    hooks: &mut Hooks<'_>,
    vp: Vp,
    k: usize,
    sigmas: &[f32],
    ts: &[f32],
    x_vp: Tensor<4>,
    history: &[Eval],
) -> Result<Tensor<4>> {
    let a = vp.alpha(ts[k + 1]);
    let denoised = history[history.len() - 1].denoised.clone();
    let x = hooks.step_done(k, sigmas, x_vp.div_scalar(a), denoised)?;
    Ok(x.mul_scalar(a))
}

/// One `multistep_uni_pc_bh_update` with data prediction, split at the model call.
struct Update {
    /// The first-order part `std_t / std_0 * x - alpha_t * (e^-h - 1) * m0`, needs `x`.
    scale_x: f32,
    scale_m0: f32,
    m0: Tensor<4>,
    /// `alpha_t * B(h)`.
    scale_res: f32,
    d1s: Vec<Tensor<4>>,
    rhos_p: Vec<f64>,
    rhos_c: Vec<f64>,
}

impl Update {
    fn new(vp: Vp, history: &[Eval], t: f32, order: usize, variant: UniPcVariant) -> Self {
        let prev = &history[history.len() - 1];
        let lambda_prev = vp.lambda(prev.t);
        let h = vp.lambda(t) - lambda_prev;
        let mut rks = Vec::with_capacity(order);
        let mut d1s = Vec::with_capacity(order);
        for i in 1..order {
            let older = &history[history.len() - 1 - i];
            let rk = (vp.lambda(older.t) - lambda_prev) / h;
            rks.push(rk);
            d1s.push((older.model.clone() - prev.model.clone()).div_scalar(rk));
        }
        rks.push(1.0);

        let hh = -h;
        let b_h = match variant {
            UniPcVariant::Bh1 => hh,
            UniPcVariant::Bh2 => hh.exp_m1(),
        };
        // The b recurrence cancels for small h; ComfyUI evaluates it in float64.
        let hh64 = f64::from(hh);
        let b_h64 = match variant {
            UniPcVariant::Bh1 => hh64,
            UniPcVariant::Bh2 => hh64.exp_m1(),
        };
        let mut h_phi_k = hh64.exp_m1() / hh64 - 1.0;
        let mut factorial = 1.0;
        let mut r = vec![vec![0f64; order]; order];
        let mut b = vec![0f64; order];
        for i in 0..order {
            for (j, &rk) in rks.iter().enumerate() {
                r[i][j] = f64::from(rk.powi(i as i32));
            }
            b[i] = f64::from((h_phi_k * factorial / b_h64) as f32);
            factorial *= (i + 2) as f64;
            h_phi_k = h_phi_k / hh64 - 1.0 / factorial;
        }
        let rhos_p = match order {
            1 => Vec::new(),
            2 => vec![0.5],
            _ => solve(&minor(&r, order - 1), &b[..order - 1]),
        };
        let rhos_c = if order == 1 { vec![0.5] } else { solve(&r, &b) };
        Self {
            scale_x: vp.std(t) / vp.std(prev.t),
            scale_m0: vp.alpha(t) * hh.exp_m1(),
            m0: prev.model.clone(),
            scale_res: vp.alpha(t) * b_h,
            d1s,
            rhos_p,
            rhos_c,
        }
    }

    fn first_order(&self, x: &Tensor<4>) -> Tensor<4> {
        x.clone().mul_scalar(self.scale_x) - self.m0.clone().mul_scalar(self.scale_m0)
    }

    fn residual(&self, rhos: &[f64]) -> Option<Tensor<4>> {
        self.d1s
            .iter()
            .zip(rhos)
            .map(|(d, &rho)| d.clone().mul_scalar(rho))
            .reduce(|a, b| a + b)
    }

    /// The predictor from `x`, the sample at the previous time.
    fn predict(&self, x: &Tensor<4>) -> Tensor<4> {
        let base = self.first_order(x);
        match self.residual(&self.rhos_p) {
            Some(res) => base - res.mul_scalar(self.scale_res),
            None => base,
        }
    }

    /// The corrected sample, from the same `x` and the model's value at the prediction.
    fn correct(&self, x: &Tensor<4>, evaluated: &Eval) -> Tensor<4> {
        let order = self.rhos_c.len();
        let d1_t = evaluated.model.clone() - self.m0.clone();
        let mut correction = d1_t.mul_scalar(self.rhos_c[order - 1]);
        if let Some(res) = self.residual(&self.rhos_c[..order - 1]) {
            correction = res + correction;
        }
        self.first_order(x) - correction.mul_scalar(self.scale_res)
    }
}

/// The top-left `n x n` block.
fn minor(m: &[Vec<f64>], n: usize) -> Vec<Vec<f64>> {
    m[..n].iter().map(|row| row[..n].to_vec()).collect()
}

/// Solves `m x = v` by Gaussian elimination with partial pivoting (at most 3 x 3 here).
pub(super) fn solve(m: &[Vec<f64>], v: &[f64]) -> Vec<f64> {
    let n = v.len();
    let mut a: Vec<Vec<f64>> = m
        .iter()
        .zip(v)
        .map(|(row, &rhs)| row.iter().copied().chain([rhs]).collect())
        .collect();
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))
            .unwrap_or(col);
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for row in a.iter_mut().skip(col + 1) {
            let f = row[col] / pivot_row[col];
            for (value, &p) in row.iter_mut().zip(&pivot_row).skip(col) {
                *value -= f * p;
            }
        }
    }
    let mut x = vec![0f64; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (a[row][n] - s) / a[row][row];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_functions_round_as_torch_does_at_the_final_sigma() {
        // torch's float32 values at t = 0.001 (reference `unipc_last_timestep_float32`).
        let vp = Vp { comfy: true };
        assert_eq!(vp.std(0.001), 0.000_976_562_5);
        assert_eq!(vp.alpha(0.001), 0.999_999_5);
    }

    #[test]
    fn solve_inverts_a_small_system() {
        let m = vec![
            vec![2.0, 1.0, 0.0],
            vec![1.0, 3.0, 1.0],
            vec![0.0, 1.0, 4.0],
        ];
        let x = solve(&m, &[3.0, 5.0, 5.0]);
        for (got, want) in x.iter().zip([1.0, 1.0, 1.0]) {
            assert!((got - want).abs() < 1e-12);
        }
    }
}
