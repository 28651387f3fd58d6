//! diffusers `scheduler_config.json` files: what each scheduler class does with them.
//!
//! The sampler maths lives in [`crate::sampling`]; this file reproduces the rest of a
//! diffusers scheduler: its training table (float32 arithmetic), `set_timesteps` (timestep
//! spacing, sigma interpolation, Karras sigmas, the final sigma) and the timestep values the
//! UNet is called with (`parse` reads the file). Source: diffusers 0.42
//! `schedulers/scheduling_*.py`.

mod parse;
mod spacing;

use super::{
    BetaSchedule, BrownianPlan, DiscreteSchedule, LatentScaling, Plan, TableArithmetic, TimestepMap,
};
use crate::error::{Error, Result};
use crate::rng::brownian;
use crate::sampling::{Algorithm, AlgorithmOptions, UniPcFlavor, UniPcOptions, UniPcVariant};

/// What the UNet predicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Prediction {
    /// The noise (SD 1.x, SD 2.x base, SDXL).
    #[default]
    Epsilon,
    /// v = alpha * noise - sigma * x0 (SD 2.x 768-v).
    V,
}

/// The scheduler classes Ember reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SchedulerClass {
    Ddim,
    Pndm,
    EulerDiscrete,
    EulerAncestralDiscrete,
    HeunDiscrete,
    LmsDiscrete,
    DpmSolverMultistep,
    KDpm2Discrete,
    KDpm2AncestralDiscrete,
    DpmSolverSde,
    Ddpm,
    UniPcMultistep,
    DeisMultistep,
    Lcm,
}

impl SchedulerClass {
    const ALL: [(SchedulerClass, &'static str); 14] = [
        (SchedulerClass::Ddim, "DDIMScheduler"),
        (SchedulerClass::Pndm, "PNDMScheduler"),
        (SchedulerClass::EulerDiscrete, "EulerDiscreteScheduler"),
        (
            SchedulerClass::EulerAncestralDiscrete,
            "EulerAncestralDiscreteScheduler",
        ),
        (SchedulerClass::HeunDiscrete, "HeunDiscreteScheduler"),
        (SchedulerClass::LmsDiscrete, "LMSDiscreteScheduler"),
        (
            SchedulerClass::DpmSolverMultistep,
            "DPMSolverMultistepScheduler",
        ),
        (SchedulerClass::KDpm2Discrete, "KDPM2DiscreteScheduler"),
        (
            SchedulerClass::KDpm2AncestralDiscrete,
            "KDPM2AncestralDiscreteScheduler",
        ),
        (SchedulerClass::DpmSolverSde, "DPMSolverSDEScheduler"),
        (SchedulerClass::Ddpm, "DDPMScheduler"),
        (SchedulerClass::UniPcMultistep, "UniPCMultistepScheduler"),
        (SchedulerClass::DeisMultistep, "DEISMultistepScheduler"),
        (SchedulerClass::Lcm, "LCMScheduler"),
    ];

    /// The diffusers class name.
    pub fn class_name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(c, _)| *c == self)
            .map(|(_, n)| *n)
            .unwrap_or("?")
    }

    fn default_spacing(self) -> Spacing {
        match self {
            SchedulerClass::Ddim | SchedulerClass::Pndm | SchedulerClass::Ddpm => Spacing::Leading,
            _ => Spacing::Linspace,
        }
    }

    fn scaling(self) -> LatentScaling {
        match self {
            SchedulerClass::Ddim
            | SchedulerClass::Pndm
            | SchedulerClass::DpmSolverMultistep
            | SchedulerClass::UniPcMultistep
            | SchedulerClass::DeisMultistep
            | SchedulerClass::Lcm
            | SchedulerClass::Ddpm => LatentScaling::VariancePreserving,
            _ => LatentScaling::VarianceExploding,
        }
    }
}

/// `timestep_spacing` (Table 2 of arXiv:2305.08891).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Spacing {
    Linspace,
    Leading,
    Trailing,
}

/// A parsed `scheduler_config.json`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SchedulerConfig {
    pub class: SchedulerClass,
    pub num_train_timesteps: usize,
    pub betas: BetaSchedule,
    pub prediction: Prediction,
    pub spacing: Spacing,
    pub steps_offset: usize,
    pub set_alpha_to_one: bool,
    pub use_karras_sigmas: bool,
    /// DPM-Solver: 1 or 2; UniPC: 1 to 3.
    pub solver_order: usize,
    /// LCM: `original_inference_steps` and `timestep_scaling`.
    pub original_inference_steps: usize,
    pub timestep_scaling: f64,
    /// UniPC: its B(h) (`solver_type` "bh1" or "bh2").
    pub unipc_variant: UniPcVariant,
    /// DPM-Solver: `algorithm_type` "sde-dpmsolver++" (DPM++ 2M SDE) rather than "dpmsolver++".
    pub sde: bool,
    /// `DPMSolverSDEScheduler`'s Brownian-tree entropy (`noise_sampler_seed`); `None` = the
    /// image's seed (diffusers would draw one at random).
    pub noise_sampler_seed: Option<u64>,
    /// `rescale_betas_zero_snr`: the training table is rescaled to zero terminal SNR.
    pub zero_snr: bool,
}

impl SchedulerConfig {
    /// The training table with diffusers' float32 arithmetic (rescaled to zero terminal
    /// SNR when the config says so).
    pub fn table(&self) -> Result<DiscreteSchedule> {
        let arithmetic = TableArithmetic::DiffusersF32;
        let table = DiscreteSchedule::new(self.betas, self.num_train_timesteps, arithmetic)?;
        Ok(if self.zero_snr {
            table.rescaled_to_zero_terminal_snr(arithmetic)
        } else {
            table
        })
    }

    /// What `set_timesteps(steps)` gives, as a sampling plan. `eta` is DDIM's.
    pub fn plan(&self, steps: usize, eta: f32) -> Result<Plan> {
        if steps == 0 || steps > self.num_train_timesteps {
            return Err(Error::settings(format!(
                "steps must be between 1 and {} for this scheduler, got {steps}",
                self.num_train_timesteps
            )));
        }
        let table = self.table()?;
        let transfer = matches!(self.class, SchedulerClass::Ddim | SchedulerClass::Pndm)
            .then(|| self.alpha_transfer(&table, steps));
        let (sigmas, timesteps) = match self.class {
            SchedulerClass::Ddim | SchedulerClass::Pndm => {
                let transfer = transfer.as_ref().expect("made above");
                (transfer.step_sigmas(), Vec::new())
            }
            SchedulerClass::Ddpm => self.ddpm_schedule(&table, steps),
            SchedulerClass::DpmSolverMultistep | SchedulerClass::UniPcMultistep => {
                self.dpm_solver_schedule(&table, steps)
            }
            // DEIS has no `final_sigmas_type`: it ends at the table's first sigma, not at 0.
            SchedulerClass::Lcm => self.lcm_schedule(&table, steps)?,
            SchedulerClass::DeisMultistep => {
                let (mut sigmas, timesteps) = self.dpm_solver_schedule(&table, steps);
                *sigmas.last_mut().expect("steps >= 1") = table.sigma_min();
                (sigmas, timesteps)
            }
            _ => self.euler_family_schedule(&table, steps),
        };
        let s0 = f64::from(sigmas[0]);
        let initial_noise_scale = match (self.class.scaling(), self.spacing) {
            (LatentScaling::VariancePreserving, _) | (_, Spacing::Leading) => {
                (1.0 + s0 * s0).sqrt() as f32
            }
            _ => sigmas[0],
        };
        let (algorithm, eta) = match self.class {
            SchedulerClass::Ddim => (Algorithm::EulerAncestral, eta),
            SchedulerClass::Pndm => (Algorithm::Plms, 0.0),
            SchedulerClass::EulerDiscrete => (Algorithm::Euler, 0.0),
            SchedulerClass::EulerAncestralDiscrete => (Algorithm::EulerAncestral, 1.0),
            SchedulerClass::HeunDiscrete => (Algorithm::Heun, 0.0),
            SchedulerClass::LmsDiscrete => (Algorithm::Lms, 0.0),
            SchedulerClass::DpmSolverMultistep => match (self.sde, self.solver_order) {
                (false, 1) => (Algorithm::Euler, 0.0),
                (false, _) => (Algorithm::DpmPp2M, 0.0),
                (true, _) => (Algorithm::DpmPp2MSde, 1.0),
            },
            SchedulerClass::KDpm2Discrete => (Algorithm::Dpm2, 0.0),
            SchedulerClass::KDpm2AncestralDiscrete => (Algorithm::Dpm2Ancestral, 1.0),
            SchedulerClass::DpmSolverSde => (Algorithm::DpmPpSde, 1.0),
            SchedulerClass::Ddpm => (Algorithm::Ddpm, 0.0),
            SchedulerClass::Lcm => (Algorithm::Lcm, 0.0),
            SchedulerClass::DeisMultistep => (
                Algorithm::DeisLogRho {
                    order: self.solver_order as u8,
                },
                0.0,
            ),
            SchedulerClass::UniPcMultistep => (
                Algorithm::UniPc(UniPcOptions {
                    variant: self.unipc_variant,
                    max_order: Some(self.solver_order),
                    flavor: UniPcFlavor::Diffusers,
                }),
                0.0,
            ),
        };
        let karras = if self.use_karras_sigmas {
            " Karras"
        } else {
            ""
        };
        // diffusers' trees span the whole schedule, even when img2img starts part-way.
        let brownian = (self.class == SchedulerClass::DpmSolverSde).then(|| BrownianPlan {
            entropy: self.noise_sampler_seed,
            range: brownian::sigma_range(&sigmas),
        });
        Ok(Plan {
            algorithm,
            options: AlgorithmOptions {
                eta,
                ..AlgorithmOptions::default()
            },
            timesteps: match &transfer {
                Some(transfer) => {
                    let (sigmas, timesteps) = transfer.timestep_pairs();
                    TimestepMap::Table {
                        sigmas,
                        timesteps,
                        table,
                    }
                }
                None => TimestepMap::Table {
                    sigmas: sigmas[..steps].to_vec(),
                    timesteps,
                    table,
                },
            },
            transfer,
            sigmas,
            initial_noise_scale,
            scaling: self.class.scaling(),
            label: format!("{}{karras}", self.class.class_name()),
            brownian,
            lcm_timestep_scaling: (self.class == SchedulerClass::Lcm)
                .then_some(self.timestep_scaling),
        })
    }
}
