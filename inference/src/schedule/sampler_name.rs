//! Samplers by the names artists know: ComfyUI's (`dpmpp_2m_sde`) and A1111's
//! (`DPM++ 2M SDE`), each mapped to an Ember [`Algorithm`].

use std::fmt;
use std::str::FromStr;

use super::named::{ScheduleName, find_by_name};
use crate::error::{Error, Result};
use crate::sampling::{Algorithm, UniPcFlavor, UniPcOptions, UniPcVariant};

/// A sampler, by the name ComfyUI gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum SamplerName {
    Euler,
    EulerAncestral,
    Heun,
    Dpm2,
    Dpm2Ancestral,
    Lms,
    DpmPp2SAncestral,
    DpmPpSde,
    DpmPp2M,
    DpmPp2MSde,
    DpmPp2MSdeHeun,
    DpmPp3MSde,
    HeunPp2,
    Ipndm,
    IpndmV,
    ResMultistep,
    ResMultistepAncestral,
    GradientEstimation,
    ErSde,
    Deis,
    SaSolver,
    DpmFast,
    DpmAdaptive,
    UniPc,
    UniPcBh2,
    EulerCfgPp,
    EulerAncestralCfgPp,
    DpmPp2SAncestralCfgPp,
    DpmPp2MCfgPp,
    Ddpm,
    Lcm,
    Ddim,
    Pndm,
}

/// What a name stands for: ComfyUI name, A1111 name, algorithm, default eta.
struct Entry(&'static str, &'static str, Algorithm, f32);

impl SamplerName {
    /// Every sampler Ember runs, in ComfyUI's menu order.
    pub const ALL: [SamplerName; 33] = [
        SamplerName::Euler,
        SamplerName::EulerAncestral,
        SamplerName::Heun,
        SamplerName::Dpm2,
        SamplerName::Dpm2Ancestral,
        SamplerName::Lms,
        SamplerName::DpmPp2SAncestral,
        SamplerName::DpmPpSde,
        SamplerName::DpmPp2M,
        SamplerName::DpmPp2MSde,
        SamplerName::DpmPp2MSdeHeun,
        SamplerName::DpmPp3MSde,
        SamplerName::HeunPp2,
        SamplerName::Ipndm,
        SamplerName::IpndmV,
        SamplerName::ResMultistep,
        SamplerName::ResMultistepAncestral,
        SamplerName::GradientEstimation,
        SamplerName::ErSde,
        SamplerName::Deis,
        SamplerName::SaSolver,
        SamplerName::DpmFast,
        SamplerName::DpmAdaptive,
        SamplerName::UniPc,
        SamplerName::UniPcBh2,
        SamplerName::EulerCfgPp,
        SamplerName::EulerAncestralCfgPp,
        SamplerName::DpmPp2SAncestralCfgPp,
        SamplerName::DpmPp2MCfgPp,
        SamplerName::Ddpm,
        SamplerName::Lcm,
        SamplerName::Ddim,
        SamplerName::Pndm,
    ];

    fn entry(self) -> Entry {
        use Algorithm as A;
        use UniPcVariant::{Bh1, Bh2};
        match self {
            SamplerName::Euler => Entry("euler", "Euler", A::Euler, 0.0),
            SamplerName::EulerAncestral => {
                Entry("euler_ancestral", "Euler a", A::EulerAncestral, 1.0)
            }
            SamplerName::Heun => Entry("heun", "Heun", A::Heun, 0.0),
            SamplerName::Dpm2 => Entry("dpm_2", "DPM2", A::Dpm2, 0.0),
            SamplerName::Dpm2Ancestral => Entry("dpm_2_ancestral", "DPM2 a", A::Dpm2Ancestral, 1.0),
            SamplerName::Lms => Entry("lms", "LMS", A::Lms, 0.0),
            SamplerName::DpmPp2SAncestral => {
                Entry("dpmpp_2s_ancestral", "DPM++ 2S a", A::DpmPp2SAncestral, 1.0)
            }
            SamplerName::DpmPpSde => Entry("dpmpp_sde", "DPM++ SDE", A::DpmPpSde, 1.0),
            SamplerName::DpmPp2M => Entry("dpmpp_2m", "DPM++ 2M", A::DpmPp2M, 0.0),
            SamplerName::DpmPp2MSde => Entry("dpmpp_2m_sde", "DPM++ 2M SDE", A::DpmPp2MSde, 1.0),
            SamplerName::DpmPp2MSdeHeun => Entry(
                "dpmpp_2m_sde_heun",
                "DPM++ 2M SDE Heun",
                A::DpmPp2MSdeHeun,
                1.0,
            ),
            SamplerName::DpmPp3MSde => Entry("dpmpp_3m_sde", "DPM++ 3M SDE", A::DpmPp3MSde, 1.0),
            // A1111 has none of these seven (nor DEIS); the names are ComfyUI's, spelled out.
            SamplerName::HeunPp2 => Entry("heunpp2", "Heun++ 2", A::HeunPp2, 0.0),
            SamplerName::Ipndm => Entry("ipndm", "iPNDM", A::Ipndm, 0.0),
            SamplerName::IpndmV => Entry("ipndm_v", "iPNDM v", A::IpndmV, 0.0),
            SamplerName::ResMultistep => {
                Entry("res_multistep", "RES Multistep", A::ResMultistep, 0.0)
            }
            SamplerName::ResMultistepAncestral => Entry(
                "res_multistep_ancestral",
                "RES Multistep a",
                A::ResMultistep,
                1.0,
            ),
            SamplerName::GradientEstimation => Entry(
                "gradient_estimation",
                "Gradient Estimation",
                A::GradientEstimation,
                0.0,
            ),
            SamplerName::ErSde => Entry("er_sde", "ER-SDE", A::ErSde, 0.0),
            SamplerName::Deis => Entry("deis", "DEIS", A::Deis, 0.0),
            SamplerName::SaSolver => Entry("sa_solver", "SA-Solver", A::SaSolver, 0.0),
            SamplerName::DpmFast => Entry("dpm_fast", "DPM fast", A::DpmFast, 0.0),
            SamplerName::DpmAdaptive => Entry(
                "dpm_adaptive",
                "DPM adaptive",
                A::DpmAdaptive { order: 3 },
                0.0,
            ),
            SamplerName::UniPc => Entry("uni_pc", "UniPC", A::UniPc(comfy_unipc(Bh1)), 0.0),
            SamplerName::UniPcBh2 => {
                Entry("uni_pc_bh2", "UniPC BH2", A::UniPc(comfy_unipc(Bh2)), 0.0)
            }
            SamplerName::EulerCfgPp => {
                Entry("euler_cfg_pp", "Euler CFG++", A::EulerAncestralCfgPp, 0.0)
            }
            SamplerName::EulerAncestralCfgPp => Entry(
                "euler_ancestral_cfg_pp",
                "Euler a CFG++",
                A::EulerAncestralCfgPp,
                1.0,
            ),
            SamplerName::DpmPp2SAncestralCfgPp => Entry(
                "dpmpp_2s_ancestral_cfg_pp",
                "DPM++ 2S a CFG++",
                A::DpmPp2SAncestralCfgPp,
                1.0,
            ),
            SamplerName::DpmPp2MCfgPp => {
                Entry("dpmpp_2m_cfg_pp", "DPM++ 2M CFG++", A::DpmPp2MCfgPp, 0.0)
            }
            SamplerName::Ddpm => Entry("ddpm", "DDPM", A::Ddpm, 0.0),
            SamplerName::Lcm => Entry("lcm", "LCM", A::Lcm, 0.0),
            // DDIM is Euler ancestral with eta (see `sampling::ancestral`), deterministic by default.
            SamplerName::Ddim => Entry("ddim", "DDIM", A::EulerAncestral, 0.0),
            SamplerName::Pndm => Entry("pndm", "PLMS", A::Plms, 0.0),
        }
    }
    /// A1111's "Automatic" schedule for this sampler: the `scheduler` of its
    /// `sd_samplers_kdiffusion` options (Karras for DPM++ 2M, SDE, 2S a and DPM2,
    /// exponential for the DPM++ 2M/3M SDE ones), its own timesteps for DDIM, else the
    /// model's discrete sigmas (normal).
    pub fn a1111_automatic_schedule(self) -> ScheduleName {
        match self {
            SamplerName::DpmPp2M
            | SamplerName::DpmPpSde
            | SamplerName::DpmPp2SAncestral
            | SamplerName::Dpm2
            | SamplerName::Dpm2Ancestral => ScheduleName::Karras,
            SamplerName::DpmPp2MSde | SamplerName::DpmPp2MSdeHeun | SamplerName::DpmPp3MSde => {
                ScheduleName::Exponential
            }
            SamplerName::Ddim => ScheduleName::DdimUniform,
            _ => ScheduleName::Normal,
        }
    }

    /// ComfyUI's name (`dpmpp_2m`).
    pub fn comfy_name(self) -> &'static str {
        self.entry().0
    }

    /// A1111's display name (`DPM++ 2M`), used in the UI and in PNG metadata.
    pub fn a1111_name(self) -> &'static str {
        self.entry().1
    }

    /// Parses a ComfyUI or A1111 name (case-insensitive).
    pub fn parse(name: &str) -> Result<Self> {
        find_by_name(
            &Self::ALL,
            name,
            |s| [s.comfy_name(), s.a1111_name()],
            "sampler",
        )
    }

    /// The sampling algorithm behind the name.
    pub fn algorithm(self) -> Algorithm {
        self.entry().2
    }

    /// The `eta` a sampler uses when none is given (ancestral and SDE samplers 1, DDIM 0).
    pub fn default_eta(self) -> f32 {
        self.entry().3
    }
}

/// ComfyUI's `sample_unipc`: order min(3, steps - 1), a final sigma of 0 run as 0.001.
fn comfy_unipc(variant: UniPcVariant) -> UniPcOptions {
    UniPcOptions {
        variant,
        max_order: None,
        flavor: UniPcFlavor::Comfy,
    }
}

impl fmt::Display for SamplerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.comfy_name())
    }
}

impl FromStr for SamplerName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}
