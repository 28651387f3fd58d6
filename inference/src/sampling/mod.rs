//! Samplers: small free functions over a `denoise(x, sigma) -> x0` closure, in the style of
//! k-diffusion and stable-diffusion.cpp.
//!
//! Sampler, sigma schedule and prediction type are independent choices: a sampler only sees
//! the sigma list and the denoiser; the schedule (see [`crate::schedule`]) makes the list; the
//! denoiser (see [`crate::pipeline::guidance`]) turns the UNet's epsilon or v output into x0.
//! Every sampler works on `x = x0 + sigma * noise` (the "variance exploding" scaling); the
//! diffusers schedulers that keep `x * sqrt(alpha_cumprod)` instead are the same maths in
//! another scaling, which the pipeline converts at the ends (see [`crate::schedule::Plan`]).
//!
//! Adding a sampler is one small file, a variant of [`Algorithm`] and one line in [`run`].

mod algorithm;
mod alpha_transfer;
mod ancestral;
mod cfg_pp;
mod ddpm_lcm;
mod deis;
mod dpm_2;
mod dpm_solver;
mod dpmpp_2m;
mod dpmpp_2s_ancestral;
mod dpmpp_sde;
mod er_sde;
mod euler;
mod gradient_estimation;
mod heun;
mod heunpp2;
mod ipndm;
mod lms;
mod plms;
#[cfg(test)]
mod properties;
mod res_multistep;
mod sa_solver;
mod uni_pc;

use std::ops::ControlFlow;

use burn::tensor::Tensor;

use crate::error::{Error, Result};

pub use algorithm::{Algorithm, AlgorithmOptions};
pub use alpha_transfer::Transfer;
pub use ancestral::ancestral_step;
pub use dpm_2::log_midpoint;
pub use dpmpp_sde::{SdeSolver, sde_midpoint, sde_noise_levels};
pub use lms::lms_coefficient;
pub use uni_pc::{UniPcFlavor, UniPcOptions, UniPcVariant};

/// Where the per-step noise of stochastic samplers comes from.
pub trait NoiseSource {
    /// A standard-normal tensor of the given shape, on the device of `like`.
    fn draw(&mut self, like: &Tensor<4>) -> Tensor<4>;

    /// Unit-variance noise for the stretch from `sigma` to `sigma_next`: k-diffusion's
    /// `noise_sampler(sigma, sigma_next)`, which the SDE samplers call. A Brownian-tree source
    /// returns the normalised increment of its Brownian motion over that stretch; every other
    /// source ignores the noise levels and draws.
    fn draw_between(&mut self, like: &Tensor<4>, sigma: f32, sigma_next: f32) -> Tensor<4> {
        let _ = (sigma, sigma_next);
        self.draw(like)
    }
}

/// What a sampler reports after each of its steps.
pub struct StepState {
    /// 0-based index of the step just completed (or under way, for an intermediate).
    pub index: usize,
    /// Number of steps in this run.
    pub total: usize,
    /// The noise level the step started from.
    pub sigma: f32,
    /// The noise level the step ended at.
    pub sigma_next: f32,
    /// The sample after the step. A callback may replace it (the inpainting blend does).
    pub x: Tensor<4>,
    /// The denoiser's last prediction of the clean sample in this step.
    pub denoised: Tensor<4>,
    /// A predictor's sample inside the step (at `sigma_next`), offered before the model is
    /// called on it, not a finished step: diffusers' inpainting blends after every
    /// scheduler call, these included. Progress and previews ignore it.
    pub intermediate: bool,
}

/// The three things a sampler talks to.
pub struct Hooks<'a> {
    /// `denoise(x, sigma)`: the model's prediction of the clean sample.
    pub denoise: &'a mut dyn FnMut(&Tensor<4>, f32) -> Result<Tensor<4>>,
    /// Noise for stochastic samplers.
    pub noise: &'a mut dyn NoiseSource,
    /// The unconditional prediction of the last `denoise` call, where there is one (CFG++
    /// samplers need it; see [`Algorithm::needs_uncond`]).
    pub uncond: &'a mut dyn FnMut() -> Option<Tensor<4>>,
    /// Called after every step, and with [`StepState::intermediate`] set for a two-call
    /// step's first-half sample; `Break` cancels the run.
    pub on_step: &'a mut dyn FnMut(&mut StepState) -> ControlFlow<()>,
}

impl Hooks<'_> {
    /// Reports step `index` and returns the (possibly replaced) sample, or `Cancelled`.
    fn step_done(
        &mut self,
        index: usize,
        sigmas: &[f32],
        x: Tensor<4>,
        denoised: Tensor<4>,
    ) -> Result<Tensor<4>> {
        let state = StepState {
            index,
            total: sigmas.len() - 1,
            sigma: sigmas[index],
            sigma_next: sigmas[index + 1],
            x,
            denoised,
            intermediate: false,
        };
        self.report(state)
    }

    /// Offers the predictor sample `x` of step `index`, at noise level `sigma`, to the step
    /// callback (see [`StepState::intermediate`]) and returns it, possibly replaced.
    fn intermediate(
        &mut self,
        index: usize,
        total: usize,
        (from, sigma): (f32, f32),
        x: Tensor<4>,
        denoised: &Tensor<4>,
    ) -> Result<Tensor<4>> {
        self.report(StepState {
            index,
            total,
            sigma: from,
            sigma_next: sigma,
            x,
            denoised: denoised.clone(),
            intermediate: true,
        })
    }

    /// Reports a step that is not one of the sigma list's (DPM fast / adaptive make their
    /// own steps) and returns the (possibly replaced) sample, or `Cancelled`.
    fn report(&mut self, mut state: StepState) -> Result<Tensor<4>> {
        match (self.on_step)(&mut state) {
            ControlFlow::Continue(()) => Ok(state.x),
            ControlFlow::Break(()) => Err(Error::Cancelled),
        }
    }
}

/// Runs `algorithm` from `x` (at noise level `sigmas[0]`) down the sigma list.
///
/// `sigmas` has one more entry than there are steps; its last entry is where the sample
/// ends (0 for a fully denoised sample).
pub fn run(
    algorithm: Algorithm,
    options: AlgorithmOptions,
    hooks: &mut Hooks<'_>,
    x: Tensor<4>,
    sigmas: &[f32],
) -> Result<Tensor<4>> {
    if sigmas.len() < 2 {
        return Err(Error::settings("a sampler needs at least one step"));
    }
    match algorithm {
        Algorithm::Euler => euler::euler(hooks, x, sigmas, options),
        Algorithm::EulerAncestral => ancestral::euler_ancestral(hooks, x, sigmas, options),
        Algorithm::Heun => heun::heun(hooks, x, sigmas),
        Algorithm::Lms => lms::lms(hooks, x, sigmas),
        Algorithm::DpmPp2M => dpmpp_2m::dpmpp_2m(hooks, x, sigmas),
        Algorithm::Plms => plms::plms(hooks, x, sigmas),
        Algorithm::Dpm2 => dpm_2::dpm_2(hooks, x, sigmas),
        Algorithm::Dpm2Ancestral => dpm_2::dpm_2_ancestral(hooks, x, sigmas, options),
        Algorithm::DpmPp2SAncestral => {
            dpmpp_2s_ancestral::dpmpp_2s_ancestral(hooks, x, sigmas, options)
        }
        Algorithm::DpmPpSde => dpmpp_sde::dpmpp_sde(hooks, x, sigmas, options),
        Algorithm::DpmPp2MSde => {
            dpmpp_sde::dpmpp_2m_sde(hooks, x, sigmas, options, SdeSolver::Midpoint)
        }
        Algorithm::DpmPp2MSdeHeun => {
            dpmpp_sde::dpmpp_2m_sde(hooks, x, sigmas, options, SdeSolver::Heun)
        }
        Algorithm::DpmPp3MSde => dpmpp_sde::dpmpp_3m_sde(hooks, x, sigmas, options),
        Algorithm::Ddpm => ddpm_lcm::ddpm(hooks, x, sigmas),
        Algorithm::Lcm => ddpm_lcm::lcm(hooks, x, sigmas, options),
        Algorithm::HeunPp2 => heunpp2::heunpp2(hooks, x, sigmas),
        Algorithm::Ipndm => ipndm::ipndm(hooks, x, sigmas),
        Algorithm::IpndmV => ipndm::ipndm_v(hooks, x, sigmas),
        Algorithm::ResMultistep => res_multistep::res_multistep(hooks, x, sigmas, options),
        Algorithm::GradientEstimation => gradient_estimation::gradient_estimation(hooks, x, sigmas),
        Algorithm::ErSde => er_sde::er_sde(hooks, x, sigmas, options),
        Algorithm::UniPc(unipc) => uni_pc::uni_pc(hooks, x, sigmas, unipc),
        Algorithm::Deis => deis::deis(hooks, x, sigmas),
        Algorithm::DeisLogRho { order } => deis::deis_logrho(hooks, x, sigmas, usize::from(order)),
        Algorithm::SaSolver => sa_solver::sa_solver(hooks, x, sigmas, options),
        Algorithm::DpmFast => dpm_solver::dpm_fast(hooks, x, sigmas, options),
        Algorithm::EulerAncestralCfgPp => cfg_pp::euler_ancestral_cfg_pp(hooks, x, sigmas, options),
        Algorithm::DpmPp2SAncestralCfgPp => {
            cfg_pp::dpmpp_2s_ancestral_cfg_pp(hooks, x, sigmas, options)
        }
        Algorithm::DpmPp2MCfgPp => cfg_pp::dpmpp_2m_cfg_pp(hooks, x, sigmas),
        Algorithm::DpmAdaptive { order } => {
            dpm_solver::dpm_adaptive(hooks, x, sigmas, options, usize::from(order))
        }
    }
}

/// diffusers' DDIM (`Ddim`) or PNDM (`Pndm`) model call by model call: `calls` has one
/// entry per call (PNDM makes one more call than steps), `sigmas` the step boundaries as
/// for [`run`]. See [`alpha_transfer`].
pub fn run_transfers(
    pndm: bool,
    hooks: &mut Hooks<'_>,
    x: Tensor<4>,
    sigmas: &[f32],
    calls: &[Transfer],
    (eta, combines_v): (f32, bool),
) -> Result<Tensor<4>> {
    let expected = if pndm && calls.len() > 1 {
        sigmas.len()
    } else {
        sigmas.len() - 1
    };
    if sigmas.len() < 2 || calls.len() != expected {
        return Err(Error::settings(format!(
            "{} model calls do not fit {} steps",
            calls.len(),
            sigmas.len().saturating_sub(1)
        )));
    }
    if pndm {
        alpha_transfer::pndm(hooks, x, sigmas, calls, combines_v)
    } else {
        alpha_transfer::ddim(hooks, x, sigmas, calls, eta)
    }
}

/// `(x - denoised) / sigma`: the ODE derivative dx/dsigma (k-diffusion `to_d`).
fn to_d(x: &Tensor<4>, denoised: &Tensor<4>, sigma: f32) -> Tensor<4> {
    (x.clone() - denoised.clone()).div_scalar(sigma)
}

/// `x + noise * s_noise * amount`, drawing only when the noise is used (k-diffusion draws
/// nothing on a step to sigma 0, where `amount` is 0).
fn add_noise(
    hooks: &mut Hooks<'_>,
    x: Tensor<4>,
    amount: f32,
    options: AlgorithmOptions,
) -> Tensor<4> {
    if options.eta > 0.0 && options.s_noise > 0.0 && amount > 0.0 {
        let noise = hooks.noise.draw(&x);
        x + noise.mul_scalar(amount * options.s_noise)
    } else {
        x
    }
}

/// [`add_noise`] for the SDE samplers, whose noise belongs to the stretch `from -> to` (see
/// [`NoiseSource::draw_between`]).
fn add_noise_between(
    hooks: &mut Hooks<'_>,
    x: Tensor<4>,
    amount: f32,
    options: AlgorithmOptions,
    (from, to): (f32, f32),
) -> Tensor<4> {
    if options.eta > 0.0 && options.s_noise > 0.0 && amount > 0.0 {
        let noise = hooks.noise.draw_between(&x, from, to);
        x + noise.mul_scalar(amount * options.s_noise)
    } else {
        x
    }
}
