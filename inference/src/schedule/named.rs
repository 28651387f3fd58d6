//! ComfyUI's schedule names and the sigma lists its schedulers compute; with
//! [`SamplerName`], the sampler names
//! (`comfy/samplers.py`, `comfy/k_diffusion/sampling.py`; formulas in
//! `../shared/reference/README.md`, `schedules.json` section).

use std::fmt;
use std::str::FromStr;

use super::{BrownianPlan, DiscreteSchedule, LatentScaling, Plan, TimestepMap, torch_linspace_f32};
use crate::error::{Error, Result};
use crate::sampling::AlgorithmOptions;

pub use super::sampler_name::SamplerName;

/// A sigma schedule, by the name ComfyUI gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ScheduleName {
    Normal,
    Karras,
    Exponential,
    SgmUniform,
    Simple,
    DdimUniform,
    KlOptimal,
    LinearQuadratic,
    Beta,
    AlignYourSteps,
}

impl ScheduleName {
    /// Every schedule Ember computes, in menu order.
    pub const ALL: [ScheduleName; 10] = [
        ScheduleName::Normal,
        ScheduleName::Karras,
        ScheduleName::Exponential,
        ScheduleName::SgmUniform,
        ScheduleName::Simple,
        ScheduleName::DdimUniform,
        ScheduleName::KlOptimal,
        ScheduleName::LinearQuadratic,
        ScheduleName::Beta,
        ScheduleName::AlignYourSteps,
    ];

    /// ComfyUI's name (`sgm_uniform`).
    pub fn comfy_name(self) -> &'static str {
        match self {
            ScheduleName::Normal => "normal",
            ScheduleName::Karras => "karras",
            ScheduleName::Exponential => "exponential",
            ScheduleName::SgmUniform => "sgm_uniform",
            ScheduleName::Simple => "simple",
            ScheduleName::DdimUniform => "ddim_uniform",
            ScheduleName::KlOptimal => "kl_optimal",
            ScheduleName::LinearQuadratic => "linear_quadratic",
            ScheduleName::Beta => "beta",
            // A node of its own in ComfyUI (AlignYourStepsScheduler), not a scheduler name.
            ScheduleName::AlignYourSteps => "align_your_steps",
        }
    }

    /// A1111's "Schedule type" name, used in PNG metadata.
    pub fn a1111_name(self) -> &'static str {
        match self {
            ScheduleName::Normal => "Normal",
            ScheduleName::Karras => "Karras",
            ScheduleName::Exponential => "Exponential",
            ScheduleName::SgmUniform => "SGM Uniform",
            ScheduleName::Simple => "Simple",
            ScheduleName::DdimUniform => "DDIM",
            ScheduleName::KlOptimal => "KL Optimal",
            ScheduleName::LinearQuadratic => "Linear Quadratic",
            ScheduleName::Beta => "Beta",
            ScheduleName::AlignYourSteps => "Align Your Steps",
        }
    }

    /// Parses a ComfyUI or A1111 name (case-insensitive).
    pub fn parse(name: &str) -> Result<Self> {
        find_by_name(
            &Self::ALL,
            name,
            |s| [s.comfy_name(), s.a1111_name()],
            "schedule",
        )
    }

    /// The sigma list for `steps` steps (`steps + 1` values, the last one 0), or more for
    /// `ddim_uniform`, which can take a step more than asked (as ComfyUI's does).
    pub fn sigmas(self, table: &DiscreteSchedule, steps: usize) -> Vec<f32> {
        let (sigma_min, sigma_max) = (f64::from(table.sigma_min()), f64::from(table.sigma_max()));
        match self {
            ScheduleName::Normal => normal(table, steps, false),
            ScheduleName::SgmUniform => normal(table, steps, true),
            ScheduleName::Karras => karras(steps, sigma_min, sigma_max, 7.0),
            ScheduleName::Exponential => exponential(steps, sigma_min, sigma_max),
            ScheduleName::Simple => simple(table, steps),
            ScheduleName::DdimUniform => ddim_uniform(table, steps),
            ScheduleName::KlOptimal => kl_optimal(steps, sigma_min, sigma_max),
            ScheduleName::LinearQuadratic => linear_quadratic(steps, sigma_max),
            ScheduleName::Beta => super::beta::beta_sigmas(table, steps),
            // NVIDIA's levels are for the SD 1.x training table, the only family Ember runs.
            ScheduleName::AlignYourSteps => super::ays::ays_sd1_sigmas(steps),
        }
    }
}

impl fmt::Display for ScheduleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.comfy_name())
    }
}

impl FromStr for ScheduleName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// The entry of `all` whose ComfyUI or A1111 name is `name` (case-insensitive); the error
/// lists the valid ComfyUI names.
pub(super) fn find_by_name<T: Copy>(
    all: &[T],
    name: &str,
    names: impl Fn(T) -> [&'static str; 2],
    what: &str,
) -> Result<T> {
    let wanted = name.trim().to_ascii_lowercase();
    all.iter()
        .copied()
        .find(|&v| names(v).iter().any(|n| n.to_ascii_lowercase() == wanted))
        .ok_or_else(|| {
            let valid: Vec<&str> = all.iter().map(|&v| names(v)[0]).collect();
            Error::settings(format!(
                "unknown {what} {name:?}; valid {what}s: {}",
                valid.join(", ")
            ))
        })
}

/// A ComfyUI-style plan: ComfyUI's sigma list and timesteps, and a pure-noise start of
/// `noise * sqrt(1 + sigma_max^2)` (ComfyUI's `noise_scaling` with full denoise).
pub fn plan(
    sampler: SamplerName,
    schedule: ScheduleName,
    steps: usize,
    eta: Option<f32>,
    table: DiscreteSchedule,
) -> Plan {
    let sigmas = ksampler_sigmas(sampler, schedule, &table, steps);
    let s0 = f64::from(sigmas[0]);
    Plan {
        algorithm: sampler.algorithm(),
        options: AlgorithmOptions {
            eta: eta.unwrap_or(sampler.default_eta()),
            // SA-Solver's SDE interval: ComfyUI's percent_to_sigma(0.2) .. (0.8).
            sde_interval: Some((
                table.sigma_at(f64::from(0.8f32 * 999.0)),
                table.sigma_at(f64::from(0.2f32 * 999.0)),
            )),
            ..AlgorithmOptions::default()
        },
        initial_noise_scale: (1.0 + s0 * s0).sqrt() as f32,
        sigmas,
        timesteps: TimestepMap::Nearest(table),
        scaling: LatentScaling::VarianceExploding,
        label: format!("{sampler} {schedule}"),
        lcm_timestep_scaling: None,
        transfer: None,
        brownian: sampler
            .algorithm()
            .brownian_by_default()
            .then_some(BrownianPlan {
                entropy: None,
                range: None,
            }),
    }
}

/// The sigma list ComfyUI's KSampler gives `sampler` for `steps` steps. DPM2, DPM2 a and
/// both UniPCs take the schedule for one step more with the next-to-last sigma removed (ComfyUI's
/// `DISCARD_PENULTIMATE_SIGMA_SAMPLERS`, A1111's `discard_next_to_last_sigma`), so their
/// last step, a plain Euler step, starts lower.
pub fn ksampler_sigmas(
    sampler: SamplerName,
    schedule: ScheduleName,
    table: &DiscreteSchedule,
    steps: usize,
) -> Vec<f32> {
    if matches!(
        sampler,
        SamplerName::Dpm2 | SamplerName::Dpm2Ancestral | SamplerName::UniPc | SamplerName::UniPcBh2
    ) {
        let mut sigmas = schedule.sigmas(table, steps + 1);
        let penultimate = sigmas.len() - 2;
        sigmas.remove(penultimate);
        sigmas
    } else {
        schedule.sigmas(table, steps)
    }
}

/// ComfyUI `normal_scheduler` (and `sgm_uniform` with `sgm = true`).
fn normal(table: &DiscreteSchedule, steps: usize, sgm: bool) -> Vec<f32> {
    let start = table.nearest_timestep(table.sigma_max()) as f32;
    let end = table.nearest_timestep(table.sigma_min()) as f32;
    let timesteps = if sgm {
        let mut t = torch_linspace_f32(start, end, steps + 1);
        t.pop();
        t
    } else {
        torch_linspace_f32(start, end, steps)
    };
    let mut sigmas: Vec<f32> = timesteps
        .iter()
        .map(|&t| table.sigma_at(f64::from(t)))
        .collect();
    sigmas.push(0.0);
    sigmas
}

/// k-diffusion `get_sigmas_karras`, appended 0.
pub fn karras(steps: usize, sigma_min: f64, sigma_max: f64, rho: f64) -> Vec<f32> {
    let (min_inv, max_inv) = (sigma_min.powf(1.0 / rho), sigma_max.powf(1.0 / rho));
    let mut sigmas: Vec<f32> = torch_linspace_f32(0.0, 1.0, steps)
        .into_iter()
        .map(|ramp| (max_inv + f64::from(ramp) * (min_inv - max_inv)).powf(rho) as f32)
        .collect();
    sigmas.push(0.0);
    sigmas
}

/// k-diffusion `get_sigmas_exponential`, appended 0.
pub fn exponential(steps: usize, sigma_min: f64, sigma_max: f64) -> Vec<f32> {
    let mut sigmas: Vec<f32> =
        torch_linspace_f32(sigma_max.ln() as f32, sigma_min.ln() as f32, steps)
            .into_iter()
            .map(f32::exp)
            .collect();
    sigmas.push(0.0);
    sigmas
}

/// The training steps of the table the named schedules read (every SD family's).
pub const TRAINING_STEPS: usize = 1000;

/// ComfyUI `simple_scheduler`: evenly strided entries of the training table.
fn simple(table: &DiscreteSchedule, steps: usize) -> Vec<f32> {
    let stride = table.len() as f64 / steps as f64;
    let mut sigmas: Vec<f32> = (0..steps)
        .map(|k| table.sigmas[table.len() - 1 - (k as f64 * stride) as usize])
        .collect();
    sigmas.push(0.0);
    sigmas
}

/// ComfyUI `ddim_scheduler`: table entries `1, 1 + s, 1 + 2s, ...` in decreasing order, then 0.
fn ddim_uniform(table: &DiscreteSchedule, steps: usize) -> Vec<f32> {
    let stride = (table.len() / steps).max(1);
    let mut sigmas: Vec<f32> = (1..table.len())
        .step_by(stride)
        .map(|i| table.sigmas[i])
        .collect();
    sigmas.reverse();
    sigmas.push(0.0);
    sigmas
}

/// ComfyUI `kl_optimal_scheduler`.
fn kl_optimal(steps: usize, sigma_min: f64, sigma_max: f64) -> Vec<f32> {
    let (atan_min, atan_max) = (sigma_min.atan() as f32, sigma_max.atan() as f32);
    let denom = steps.saturating_sub(1).max(1) as f32;
    let mut sigmas: Vec<f32> = (0..steps)
        .map(|i| {
            let a = i as f32 / denom;
            (a * atan_min + (1.0 - a) * atan_max).tan()
        })
        .collect();
    sigmas.push(0.0);
    sigmas
}

/// ComfyUI `linear_quadratic_schedule` (threshold 0.025, half the steps linear), scaled by
/// sigma_max as ComfyUI does for discrete models.
fn linear_quadratic(steps: usize, sigma_max: f64) -> Vec<f32> {
    let n = steps as f64;
    let threshold = 0.025;
    if steps == 1 {
        return vec![sigma_max as f32, 0.0];
    }
    let linear_steps = steps / 2;
    let ls = linear_steps as f64;
    let mut values: Vec<f64> = (0..linear_steps)
        .map(|i| i as f64 * threshold / ls)
        .collect();
    let diff = ls - threshold * n;
    let quad = diff / (ls * (n - ls).powi(2));
    let lin = threshold / ls - 2.0 * diff / (n - ls).powi(2);
    let constant = quad * ls * ls;
    values.extend((linear_steps..steps).map(|i| {
        let i = i as f64;
        quad * i * i + lin * i + constant
    }));
    values.push(1.0);
    values
        .into_iter()
        .map(|v| ((1.0 - v) * sigma_max) as f32)
        .collect()
}
