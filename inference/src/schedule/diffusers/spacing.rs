//! diffusers' `set_timesteps` arithmetic for each scheduler family: timestep spacing,
//! sigma interpolation or Karras sigmas, the final sigma, and the timesteps the UNet gets.

use super::{SchedulerClass, SchedulerConfig, Spacing};
use crate::sampling;
use crate::schedule::{AlphaTransfer, DiscreteSchedule, Plan, TransferKind, linspace_f64};

impl SchedulerConfig {
    /// DDIM, PNDM and DDPM: integer timesteps by `timestep_spacing`, descending.
    fn integer_timesteps(&self, steps: usize) -> Vec<i64> {
        let n = self.num_train_timesteps;
        match self.spacing {
            Spacing::Leading => (0..steps)
                .rev()
                .map(|i| (i * (n / steps) + self.steps_offset) as i64)
                .collect(),
            Spacing::Trailing => trailing(n, steps),
            Spacing::Linspace => linspace_f64(0.0, (n - 1) as f64, steps)
                .iter()
                .rev()
                .map(|t| t.round_ties_even() as i64)
                .collect(),
        }
    }

    /// DDIM and PNDM: each call transfers to `t - N // steps` (to `final_alpha_cumprod`
    /// past the start).
    pub(super) fn alpha_transfer(&self, table: &DiscreteSchedule, steps: usize) -> AlphaTransfer {
        let kind = if self.class == SchedulerClass::Pndm {
            TransferKind::Pndm
        } else {
            TransferKind::Ddim
        };
        let final_alpha_cumprod = if self.set_alpha_to_one {
            1.0
        } else {
            table.alphas_cumprod[0]
        };
        let timesteps = self.integer_timesteps(steps);
        AlphaTransfer::new(
            kind,
            &timesteps,
            self.num_train_timesteps,
            table,
            final_alpha_cumprod,
        )
    }

    /// DDPM: each step lands on the next listed timestep, the last one on `alpha_cumprod`
    /// 1 (`previous_timestep` is -1 there).
    pub(super) fn ddpm_schedule(
        &self,
        table: &DiscreteSchedule,
        steps: usize,
    ) -> (Vec<f32>, Vec<f64>) {
        to_zero(table, self.integer_timesteps(steps))
    }

    /// LCM: `steps` of the `original_inference_steps` skipping schedule (every
    /// `N / original` timesteps, `t = k * N / original - 1`), evenly picked from the top.
    pub(super) fn lcm_schedule(
        &self,
        table: &DiscreteSchedule,
        steps: usize,
    ) -> crate::error::Result<(Vec<f32>, Vec<f64>)> {
        let n = self.num_train_timesteps;
        let original = self.original_inference_steps;
        if original == 0 || original > n || steps > original {
            return Err(crate::error::Error::settings(format!(
                "LCMScheduler: {steps} steps need original_inference_steps ({original}) \
                 between {steps} and {n}"
            )));
        }
        let k = n / original;
        let origin: Vec<i64> = (1..=original).rev().map(|i| (i * k) as i64 - 1).collect();
        let timesteps: Vec<i64> = (0..steps)
            .map(|i| origin[(i as f64 * original as f64 / steps as f64).floor() as usize])
            .collect();
        Ok(to_zero(table, timesteps))
    }

    /// Euler, Euler ancestral, Heun, LMS: float32 timesteps, sigmas interpolated linearly in
    /// the table (or Karras sigmas with `_sigma_to_t` timesteps), then a final 0.
    pub(super) fn euler_family_schedule(
        &self,
        table: &DiscreteSchedule,
        steps: usize,
    ) -> (Vec<f32>, Vec<f64>) {
        let n = self.num_train_timesteps;
        let timesteps: Vec<f64> = match self.spacing {
            Spacing::Linspace => linspace_f64(0.0, (n - 1) as f64, steps)
                .iter()
                .rev()
                .map(|&t| f64::from(t as f32))
                .collect(),
            Spacing::Leading => (0..steps)
                .rev()
                .map(|i| (i * (n / steps) + self.steps_offset) as f64)
                .collect(),
            Spacing::Trailing => trailing(n, steps).into_iter().map(|t| t as f64).collect(),
        };
        let (sigmas, timesteps) = if self.use_karras_sigmas {
            // `_convert_to_karras` spans the spaced schedule's own sigmas (interpolated at
            // its first and last timestep), not the whole table: they differ for leading
            // and trailing spacing.
            let range = (
                table.sigma_interp(timesteps[timesteps.len() - 1]),
                table.sigma_interp(timesteps[0]),
            );
            let sigmas = karras_f64(range, steps);
            // KDPM2 (and its ancestral twin) round these timesteps; the others keep them.
            let round = matches!(
                self.class,
                SchedulerClass::KDpm2Discrete | SchedulerClass::KDpm2AncestralDiscrete
            );
            let timesteps = sigmas
                .iter()
                .map(|&s| {
                    let t = table.sigma_to_t(s);
                    if round {
                        t.round_ties_even()
                    } else {
                        f64::from(t as f32)
                    }
                })
                .collect();
            (sigmas, timesteps)
        } else {
            (
                timesteps.iter().map(|&t| table.sigma_interp(t)).collect(),
                timesteps,
            )
        };
        let mut sigmas: Vec<f32> = sigmas.into_iter().map(|s| s as f32).collect();
        sigmas.push(0.0);
        (sigmas, timesteps)
    }

    /// DPM-Solver multistep: integer timesteps from `steps + 1` points, interpolated sigmas
    /// (or Karras sigmas with rounded `_sigma_to_t` timesteps), then a final 0.
    pub(super) fn dpm_solver_schedule(
        &self,
        table: &DiscreteSchedule,
        steps: usize,
    ) -> (Vec<f32>, Vec<f64>) {
        let n = self.num_train_timesteps;
        let timesteps: Vec<i64> = match self.spacing {
            Spacing::Linspace => {
                let mut t: Vec<i64> = linspace_f64(0.0, (n - 1) as f64, steps + 1)
                    .iter()
                    .rev()
                    .map(|t| t.round_ties_even() as i64)
                    .collect();
                t.pop();
                t
            }
            Spacing::Leading => (1..=steps)
                .rev()
                .map(|i| (i * (n / (steps + 1)) + self.steps_offset) as i64)
                .collect(),
            Spacing::Trailing => trailing(n, steps),
        };
        let (sigmas, timesteps): (Vec<f64>, Vec<f64>) = if self.use_karras_sigmas {
            // DPM-Solver converts the whole (flipped) table.
            let range = (f64::from(table.sigma_min()), f64::from(table.sigma_max()));
            let sigmas = karras_f64(range, steps);
            let timesteps = sigmas
                .iter()
                .map(|&s| table.sigma_to_t(s).round_ties_even())
                .collect();
            (sigmas, timesteps)
        } else {
            let sigmas = timesteps
                .iter()
                .map(|&t| table.sigma_interp(t as f64))
                .collect();
            (sigmas, timesteps.into_iter().map(|t| t as f64).collect())
        };
        let mut sigmas: Vec<f32> = sigmas.into_iter().map(|s| s as f32).collect();
        sigmas.push(0.0);
        (sigmas, timesteps)
    }

    /// The timesteps diffusers exposes as `scheduler.timesteps` (the UNet calls in loop
    /// order), for comparison with diffusers' tables.
    pub fn loop_timesteps(&self, plan: &Plan) -> Vec<f64> {
        let n = plan.steps();
        let t: Vec<f64> = plan.sigmas[..n]
            .iter()
            .map(|&s| plan.timesteps.timestep(s))
            .collect();
        match self.class {
            SchedulerClass::HeunDiscrete => {
                let mut out = vec![t[0]];
                for &ti in &t[1..] {
                    out.extend([ti, ti]);
                }
                out
            }
            // Second-order classes interleave each step's midpoint call (none on the last).
            SchedulerClass::KDpm2Discrete
            | SchedulerClass::KDpm2AncestralDiscrete
            | SchedulerClass::DpmSolverSde => {
                let s = &plan.sigmas;
                let mut out = Vec::with_capacity(2 * n);
                for i in 0..n {
                    out.push(t[i]);
                    if s[i + 1] > 0.0 {
                        let mid = match self.class {
                            SchedulerClass::DpmSolverSde => sampling::sde_midpoint(s[i], s[i + 1]),
                            SchedulerClass::KDpm2Discrete => sampling::log_midpoint(s[i], s[i + 1]),
                            _ => {
                                let (down, _) = sampling::ancestral_step(s[i], s[i + 1], 1.0);
                                sampling::log_midpoint(s[i], down)
                            }
                        };
                        out.push(plan.timesteps.timestep(mid));
                    }
                }
                out
            }
            SchedulerClass::Pndm => {
                let mut out = vec![t[0]];
                if n > 1 {
                    out.push(t[1]);
                }
                out.extend_from_slice(&t[1..]);
                out
            }
            _ => t,
        }
    }
}

impl SchedulerConfig {
    /// The sigmas diffusers exposes as `scheduler.sigmas` (Heun repeats the inner ones).
    pub fn loop_sigmas(&self, plan: &Plan) -> Vec<f32> {
        let s = &plan.sigmas;
        match self.class {
            // KDPM2 doubles the final 0 too: `cat(s[:1], s[1:].repeat_interleave(2), s[-1:])`.
            SchedulerClass::KDpm2Discrete | SchedulerClass::KDpm2AncestralDiscrete => {
                let mut out = vec![s[0]];
                for &si in &s[1..] {
                    out.extend([si, si]);
                }
                out.push(s[s.len() - 1]);
                out
            }
            SchedulerClass::HeunDiscrete | SchedulerClass::DpmSolverSde if s.len() > 2 => {
                let mut out = vec![s[0]];
                for &si in &s[1..s.len() - 1] {
                    out.extend([si, si]);
                }
                out.push(s[s.len() - 1]);
                out
            }
            _ => s.clone(),
        }
    }
}

/// The sigmas of integer `timesteps` (their own `alphas_cumprod`), then a final 0, and the
/// timesteps as the UNet gets them.
fn to_zero(table: &DiscreteSchedule, timesteps: Vec<i64>) -> (Vec<f32>, Vec<f64>) {
    let mut sigmas: Vec<f32> = timesteps
        .iter()
        .map(|&t| DiscreteSchedule::sigma_of_alpha_cumprod(table.alphas_cumprod[t as usize]) as f32)
        .collect();
    sigmas.push(0.0);
    (sigmas, timesteps.into_iter().map(|t| t as f64).collect())
}

/// `round(arange(N, 0, -N / steps)) - 1` (trailing spacing).
fn trailing(n: usize, steps: usize) -> Vec<i64> {
    let ratio = n as f64 / steps as f64;
    let mut out = Vec::with_capacity(steps);
    let mut t = n as f64;
    while t > 0.0 && out.len() < steps {
        out.push(t.round_ties_even() as i64 - 1);
        t = n as f64 - ratio * out.len() as f64;
    }
    out
}

/// diffusers `_convert_to_karras` (float64 numpy) over `(sigma_min, sigma_max)`, rho 7.
fn karras_f64((sigma_min, sigma_max): (f64, f64), steps: usize) -> Vec<f64> {
    let rho = 7.0;
    let (min_inv, max_inv) = (sigma_min.powf(1.0 / rho), sigma_max.powf(1.0 / rho));
    linspace_f64(0.0, 1.0, steps)
        .into_iter()
        .map(|ramp| (max_inv + ramp * (min_inv - max_inv)).powf(rho))
        .collect()
}
