//! Sigma schedules and sampling plans.
//!
//! A [`Plan`] is everything a generation needs besides the models: the sampler, the sigma
//! list, the timestep the UNet is told at each sigma, and how the sample is scaled at the
//! start and the end. Two front ends make plans:
//! - [`named`]: ComfyUI's sampler and schedule names (`euler` + `karras`, ...), with
//!   ComfyUI's float64 training table and integer timesteps;
//! - [`diffusers`]: a diffusers `scheduler_config.json`, reproducing what that scheduler
//!   class does (its timestep spacing, sigma interpolation and timestep values).

mod ays;
mod beta;
pub mod diffusers;
mod discrete;
pub mod named;
mod sampler_name;
mod transfer;

pub use transfer::{AlphaTransfer, TransferKind};

pub use discrete::{
    BetaSchedule, DiscreteSchedule, TableArithmetic, linspace_f64, torch_linspace_f32,
};

use burn::tensor::Tensor;

use crate::error::{Error, Result};
use crate::sampling::{self, Algorithm, AlgorithmOptions, Hooks};

/// How the UNet's timestep input is derived from a sigma.
#[derive(Clone, Debug)]
pub enum TimestepMap {
    /// diffusers: the scheduler's own timestep for each sigma of its list; any other sigma
    /// (DPM2's midpoints) through `_sigma_to_t`.
    Table {
        sigmas: Vec<f32>,
        timesteps: Vec<f64>,
        table: DiscreteSchedule,
    },
    /// ComfyUI: the training timestep whose log-sigma is nearest (an integer).
    Nearest(DiscreteSchedule),
}

impl TimestepMap {
    /// The number of training timesteps behind the map.
    pub fn train_timesteps(&self) -> usize {
        match self {
            TimestepMap::Table { table, .. } | TimestepMap::Nearest(table) => table.len(),
        }
    }
}

impl TimestepMap {
    /// The timestep to pass to the UNet for a call at noise level `sigma`.
    pub fn timestep(&self, sigma: f32) -> f64 {
        match self {
            TimestepMap::Table {
                sigmas,
                timesteps,
                table,
            } => sigmas
                .iter()
                .zip(timesteps)
                .find(|(s, _)| **s == sigma)
                .map(|(_, t)| *t)
                .unwrap_or_else(|| table.sigma_to_t(f64::from(sigma))),
            TimestepMap::Nearest(table) => table.nearest_timestep(sigma) as f64,
        }
    }
}

/// Where the pipeline's latents live between steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatentScaling {
    /// `x = x0 + sigma * noise` (k-diffusion, ComfyUI, diffusers' Euler family).
    VarianceExploding,
    /// `x * sqrt(alpha_cumprod)` (diffusers' DDIM, PNDM, DPM-Solver): the sampler still works
    /// in sigma scaling; the decoder gets `x / sqrt(1 + sigma_last^2)`.
    VariancePreserving,
}

/// A complete sampling recipe for one generation.
#[derive(Clone, Debug)]
pub struct Plan {
    pub algorithm: Algorithm,
    pub options: AlgorithmOptions,
    /// Noise levels, one more than the number of steps.
    pub sigmas: Vec<f32>,
    pub timesteps: TimestepMap,
    /// A pure-noise start is `noise * initial_noise_scale`.
    pub initial_noise_scale: f32,
    pub scaling: LatentScaling,
    /// Human-readable name of the sampler (for logs and metadata).
    pub label: String,
    /// diffusers' `LCMScheduler` boundary condition: with `Some(scaling)`, the denoiser's
    /// prediction becomes `c_out * x0 + c_skip * x_vp` at timestep `t * scaling`
    /// (see [`Plan::boundary_condition`]).
    pub lcm_timestep_scaling: Option<f64>,
    /// `Some`: the SDE samplers' noise comes from Brownian trees (see
    /// [`crate::rng::brownian`]) rather than fresh draws from the image's generator.
    pub brownian: Option<BrownianPlan>,
    /// `Some` for diffusers' DDIM and PNDM: their integer-timestep transfers, which the
    /// sampler follows call by call instead of `algorithm` (see [`AlphaTransfer`]).
    pub transfer: Option<AlphaTransfer>,
}

/// How the Brownian trees of a generation are seeded and over which noise levels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BrownianPlan {
    /// `None`: one tree per image, seeded with the image's seed (A1111's convention; for one
    /// image also ComfyUI's). `Some`: one tree over the whole batch with this entropy
    /// (diffusers' `noise_sampler_seed`).
    pub entropy: Option<u64>,
    /// The trees' `(sigma_min, sigma_max)`; `None`: the smallest non-zero and the largest
    /// sigma the sampler runs (after img2img trims the list), as k-diffusion takes them.
    pub range: Option<(f32, f32)>,
}

impl Plan {
    /// LCM's consistency-model boundary condition (`c_skip`, `c_out` with sigma_data 0.5)
    /// applied to a prediction `x0` of the sample `x` at noise level `sigma`; the identity for
    /// every other plan. At diffusion timesteps (`t * 10 >= ~100`) it changes x0 by under
    /// 1e-4 relative, but it is part of what LCMScheduler computes.
    pub fn boundary_condition(&self, x: &Tensor<4>, x0: Tensor<4>, sigma: f32) -> Tensor<4> {
        let Some(scaling) = self.lcm_timestep_scaling else {
            return x0;
        };
        const SIGMA_DATA: f64 = 0.5;
        let t = self.timesteps.timestep(sigma) * scaling;
        let c_skip = SIGMA_DATA * SIGMA_DATA / (t * t + SIGMA_DATA * SIGMA_DATA);
        let c_out = t / (t * t + SIGMA_DATA * SIGMA_DATA).sqrt();
        let x_vp = x.clone().div_scalar(f64::from(1.0 + sigma * sigma).sqrt());
        x0.mul_scalar(c_out) + x_vp.mul_scalar(c_skip)
    }

    /// Number of sampler steps.
    pub fn steps(&self) -> usize {
        self.sigmas.len() - 1
    }

    /// Keeps only the last `keep` steps (img2img / inpainting with `strength < 1`).
    /// A partial start begins at `x0 + sigmas[0] * noise`, so the pure-noise scale no longer
    /// applies.
    pub fn keep_last_steps(&mut self, keep: usize) {
        let drop = self.steps().saturating_sub(keep);
        match &mut self.transfer {
            // diffusers slices the call list (PNDM's repeated call included) and starts
            // the scheduler's bookkeeping afresh there.
            Some(transfer) => {
                transfer.drop_first(drop);
                self.sigmas = transfer.step_sigmas();
            }
            None => {
                self.sigmas.drain(..drop);
            }
        }
    }

    /// Runs the plan's sampler over steps `range` of [`Plan::sigmas`] from `x` (at the
    /// range's first sigma).
    pub fn sample(
        &self,
        hooks: &mut Hooks<'_>,
        x: Tensor<4>,
        range: std::ops::Range<usize>,
    ) -> Result<Tensor<4>> {
        let sigmas = &self.sigmas[range.start..=range.end];
        let Some(transfer) = &self.transfer else {
            return sampling::run(self.algorithm, self.options, hooks, x, sigmas);
        };
        let pndm = transfer.kind == TransferKind::Pndm;
        let calls = transfer.calls();
        let calls = match (pndm, range.start, range.end == self.steps()) {
            (false, _, _) => &calls[range.clone()],
            (true, 0, true) => &calls[..],
            (true, _, _) => {
                return Err(Error::settings(
                    "PNDMScheduler cannot hand a run over between two models part-way; \
                     choose another scheduler for a refiner run",
                ));
            }
        };
        let options = (self.options.eta, transfer.combines_v);
        sampling::run_transfers(pndm, hooks, x, sigmas, calls, options)
    }

    /// How many leading steps the first model of a two-model run takes at `fraction`: the
    /// steps starting at a timestep at or above diffusers' `denoising_end` cutoff
    /// `round(T - fraction * T)` (T training timesteps); the second model takes the rest,
    /// as `denoising_start` gives it.
    pub fn steps_before_switch(&self, fraction: f32) -> usize {
        let train = self.timesteps.train_timesteps() as f64;
        let cutoff = (train - f64::from(fraction) * train).round_ties_even();
        self.sigmas[..self.steps()]
            .iter()
            .take_while(|&&sigma| self.timesteps.timestep(sigma) >= cutoff)
            .count()
    }

    /// The factor that turns a sample at noise level `sigma` (sampler scaling) into the
    /// latents diffusers' scheduler would hold: `1 / sqrt(1 + sigma^2)` for schedulers that
    /// keep `x * sqrt(alpha_cumprod)`, else 1.
    pub fn scale_at(&self, sigma: f32) -> f32 {
        match self.scaling {
            LatentScaling::VarianceExploding => 1.0,
            LatentScaling::VariancePreserving => {
                (1.0 / (1.0 + f64::from(sigma).powi(2)).sqrt()) as f32
            }
        }
    }

    /// The factor that turns the sampler's final sample into the latents the VAE decodes.
    pub fn output_scale(&self) -> f32 {
        self.scale_at(*self.sigmas.last().expect("non-empty sigma list"))
    }
}
