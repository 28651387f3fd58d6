//! The sampling algorithms by name, what each needs of the pipeline (unconditional
//! predictions, Brownian noise, model calls per step), and the options some take.

use super::UniPcOptions;

/// A sampling algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// First-order Euler (k-diffusion `sample_euler`).
    Euler,
    /// Euler with ancestral noise (`sample_euler_ancestral`; DDIM with `eta` is the same
    /// update, see [`super::ancestral`]).
    EulerAncestral,
    /// Heun's second-order method (`sample_heun`).
    Heun,
    /// Linear multistep of order 4 (`sample_lms`).
    Lms,
    /// DPM-Solver++(2M) (`sample_dpmpp_2m`).
    DpmPp2M,
    /// diffusers' PNDM with `skip_prk_steps`: one Heun step, then Adams-Bashforth on epsilon.
    Plms,
    /// DPM-Solver-2 midpoint steps (`sample_dpm_2`).
    Dpm2,
    /// DPM-2 with ancestral noise (`sample_dpm_2_ancestral`).
    Dpm2Ancestral,
    /// DPM-Solver++(2S) with ancestral noise (`sample_dpmpp_2s_ancestral`).
    DpmPp2SAncestral,
    /// Stochastic DPM-Solver++ (`sample_dpmpp_sde`).
    DpmPpSde,
    /// DPM-Solver++(2M) SDE, midpoint correction (`sample_dpmpp_2m_sde`).
    DpmPp2MSde,
    /// DPM-Solver++(2M) SDE, Heun correction (`sample_dpmpp_2m_sde`, `solver_type='heun'`).
    DpmPp2MSdeHeun,
    /// DPM-Solver++(3M) SDE (`sample_dpmpp_3m_sde`).
    DpmPp3MSde,
    /// DDPM's ancestral posterior step (ComfyUI `sample_ddpm`).
    Ddpm,
    /// Latent Consistency Model steps (ComfyUI `sample_lcm`).
    Lcm,
    /// Heun++ (ComfyUI `sample_heunpp2`).
    HeunPp2,
    /// Improved PNDM, fixed-step coefficients (ComfyUI `sample_ipndm`).
    Ipndm,
    /// Improved PNDM, variable-step coefficients (ComfyUI `sample_ipndm_v`).
    IpndmV,
    /// RES second-order multistep; ancestral with `eta > 0` (ComfyUI `sample_res_multistep`).
    ResMultistep,
    /// Gradient estimation (ComfyUI `sample_gradient_estimation`).
    GradientEstimation,
    /// ER-SDE-Solver-3 (ComfyUI `sample_er_sde`).
    ErSde,
    /// UniPC predictor-corrector (ComfyUI `sample_unipc`, diffusers `UniPCMultistepScheduler`).
    UniPc(UniPcOptions),
    /// DPM-Solver-fast: its own steps, the step count spent as model calls
    /// (`sample_dpm_fast`).
    DpmFast,
    /// Adaptive DPM-Solver-23 (`order` 3) or -12 (`order` 2) (`sample_dpm_adaptive`).
    DpmAdaptive { order: u8 },
    /// DEIS in ComfyUI's "tab" mode (`sample_deis`).
    Deis,
    /// diffusers' DEIS multistep ("logrho"), order 1 or 2.
    DeisLogRho { order: u8 },
    /// SA-Solver, stochastic Adams predictor-corrector (`sample_sa_solver`).
    SaSolver,
    /// Euler ancestral CFG++ (`sample_euler_ancestral_cfg_pp`; eta 0 is `euler_cfg_pp`).
    EulerAncestralCfgPp,
    /// DPM-Solver++(2S) ancestral CFG++ (`sample_dpmpp_2s_ancestral_cfg_pp`).
    DpmPp2SAncestralCfgPp,
    /// DPM-Solver++(2M) CFG++ (`sample_dpmpp_2m_cfg_pp`).
    DpmPp2MCfgPp,
}

impl Algorithm {
    /// Whether ComfyUI and A1111 feed this sampler torchsde's Brownian tree by default
    /// (`BrownianTreeNoiseSampler` in their `sample_dpmpp_*sde`) rather than fresh draws.
    pub fn brownian_by_default(self) -> bool {
        matches!(
            self,
            Algorithm::DpmPpSde
                | Algorithm::DpmPp2MSde
                | Algorithm::DpmPp2MSdeHeun
                | Algorithm::DpmPp3MSde
        )
    }

    /// Model calls per step as A1111 counts them for prompt schedules: 2 for the samplers
    /// its list marks second order (Heun, DPM2, DPM2 a, DPM++ 2S a, DPM++ SDE; the CFG++ 2S
    /// likewise), 3 for Heun++ (which A1111 lacks: its calls per step), 1 for the rest.
    pub fn schedule_multiplier(self) -> usize {
        match self {
            Algorithm::Heun
            | Algorithm::Dpm2
            | Algorithm::Dpm2Ancestral
            | Algorithm::DpmPp2SAncestral
            | Algorithm::DpmPp2SAncestralCfgPp
            | Algorithm::DpmPpSde => 2,
            Algorithm::HeunPp2 => 3,
            _ => 1,
        }
    }

    /// Whether the sampler reads the unconditional prediction (CFG++), so the pipeline must
    /// run the negative prompt even at CFG scale 1.
    pub fn needs_uncond(self) -> bool {
        matches!(
            self,
            Algorithm::EulerAncestralCfgPp
                | Algorithm::DpmPp2SAncestralCfgPp
                | Algorithm::DpmPp2MCfgPp
        )
    }
}

/// Options of the algorithms that take any.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AlgorithmOptions {
    /// Ancestral / SDE noise amount (0 = deterministic). Used by the ancestral and SDE
    /// algorithms.
    pub eta: f32,
    /// Multiplier on the ancestral noise.
    pub s_noise: f32,
    /// Euler's "churn" (Karras et al. 2022, Algorithm 2; A1111's `s_churn` setting): noise
    /// added before a step while `s_tmin <= sigma <= s_tmax`. 0 (the default) adds none.
    pub s_churn: f32,
    pub s_tmin: f32,
    pub s_tmax: f32,
    /// SA-Solver's stochastic interval `(start, end)`: SDE steps while
    /// `start >= sigma > end`; `None` runs it as an ODE.
    pub sde_interval: Option<(f32, f32)>,
}

impl Default for AlgorithmOptions {
    fn default() -> Self {
        Self {
            eta: 1.0,
            s_noise: 1.0,
            s_churn: 0.0,
            s_tmin: 0.0,
            s_tmax: f32::INFINITY,
            sde_interval: None,
        }
    }
}
