//! One-line tooltips for the sampler and schedule menus: what each does and how many steps
//! suit it.

use inference::schedule::named::{SamplerName, ScheduleName};

/// A short description of each sampler for its tooltip.
pub fn sampler_hint(sampler: SamplerName) -> &'static str {
    match sampler {
        SamplerName::Euler => "Deterministic, first order. Simple and predictable; 20–30 steps.",
        SamplerName::EulerAncestral => {
            "Ancestral (adds noise each step): varied, never fully converges; 20–40 steps."
        }
        SamplerName::Heun => "Deterministic, second order (two model calls a step); 10–20 steps.",
        SamplerName::Dpm2 => "Deterministic, second order (two model calls a step); 10–20 steps.",
        SamplerName::Dpm2Ancestral => {
            "Ancestral, second order (two model calls a step): varied; 15–30 steps."
        }
        SamplerName::Lms => "Deterministic, linear multistep; 20–30 steps.",
        SamplerName::DpmPp2SAncestral => {
            "Ancestral, second order (two model calls a step): varied; 15–30 steps."
        }
        SamplerName::DpmPpSde => {
            "SDE (adds noise), second order (two model calls a step): detailed; 10–20 steps."
        }
        SamplerName::DpmPp2M => "Deterministic, second-order multistep; 20–30 steps with Karras.",
        SamplerName::DpmPp2MSde | SamplerName::DpmPp2MSdeHeun => {
            "SDE (adds noise), second-order multistep: detailed; 20–30 steps, Karras or Exponential."
        }
        SamplerName::DpmPp3MSde => {
            "SDE (adds noise), third-order multistep; 30+ steps, Exponential schedule."
        }
        SamplerName::HeunPp2 => {
            "Deterministic, Heun with a third look-ahead (three model calls a step); 10–20 steps."
        }
        SamplerName::Ipndm | SamplerName::IpndmV => {
            "Deterministic, fourth-order multistep; good at few steps (10–20)."
        }
        SamplerName::ResMultistep => {
            "Deterministic, second-order exponential multistep; 20–30 steps."
        }
        SamplerName::ResMultistepAncestral => {
            "Ancestral, second-order exponential multistep: varied; 20–30 steps."
        }
        SamplerName::GradientEstimation => {
            "Deterministic, Euler with a gradient correction; 10–20 steps."
        }
        SamplerName::ErSde => "SDE (adds noise), third-order ER-SDE; 20–30 steps.",
        SamplerName::SaSolver => {
            "Stochastic Adams predictor-corrector (noise mid-schedule); 15–30 steps."
        }
        SamplerName::Deis => "Deterministic, third-order exponential multistep; 10–20 steps.",
        SamplerName::DpmFast => {
            "Deterministic DPM-Solver with its own steps (3rd order); the step count is model calls."
        }
        SamplerName::DpmAdaptive => {
            "Adaptive: picks its own steps to a set accuracy, ignores the step count; slow."
        }
        SamplerName::UniPc | SamplerName::UniPcBh2 => {
            "Deterministic predictor-corrector, up to third order; very good at 8–20 steps."
        }
        SamplerName::EulerCfgPp | SamplerName::DpmPp2MCfgPp => {
            "CFG++: guidance that stays on the image manifold; use CFG 1–2; 20–30 steps."
        }
        SamplerName::EulerAncestralCfgPp | SamplerName::DpmPp2SAncestralCfgPp => {
            "CFG++ with ancestral noise; use CFG 1–2; 20–30 steps."
        }
        SamplerName::Ddpm => "Stochastic, the original DDPM step; needs many steps (100+).",
        SamplerName::Lcm => "For LCM / Turbo models and LoRAs: 4–8 steps at CFG 1–2.",
        SamplerName::Ddim => "Deterministic (eta 0); the original SD sampler; 20–50 steps.",
        SamplerName::Pndm => "Deterministic, pseudo linear multistep (PLMS); 20–50 steps.",
    }
}

pub fn schedule_hint(schedule: ScheduleName) -> &'static str {
    match schedule {
        ScheduleName::Normal => "Evenly spaced timesteps (the model's own schedule).",
        ScheduleName::Karras => "More steps at low noise (Karras et al.); good with DPM++.",
        ScheduleName::Exponential => "Sigmas evenly spaced in log space.",
        ScheduleName::SgmUniform => "Evenly spaced timesteps, as SGM/SDXL Turbo use.",
        ScheduleName::Simple => "ComfyUI's simple: every n-th sigma of the model's table.",
        ScheduleName::DdimUniform => "DDIM's uniform timestep spacing.",
        ScheduleName::KlOptimal => "KL-optimal spacing (Align Your Steps paper).",
        ScheduleName::LinearQuadratic => "Linear, then quadratic (from Mochi / Genmo).",
        ScheduleName::Beta => "Beta(0.6, 0.6) quantiles: more steps at both ends of the range.",
        ScheduleName::AlignYourSteps => {
            "NVIDIA's optimised SD 1.x levels (Align Your Steps); good at 10–20 steps."
        }
    }
}
