//! What a generation tells its caller as it runs: progress, each step's sample for live
//! previews, and the question whether to stop.

use std::ops::ControlFlow;

use burn::tensor::Tensor;

use crate::api::Progress;

/// The sample after one sampler step (for live previews and tests).
pub struct StepLatents<'a> {
    /// 1-based step number.
    pub step: usize,
    pub total: usize,
    /// The noise level the sample is now at.
    pub sigma: f32,
    /// The sample, in the sampler's scaling (`x0 + sigma * noise`).
    pub x: &'a Tensor<4>,
    /// The model's latest prediction of the clean latents (what previews usually show).
    pub denoised: &'a Tensor<4>,
    /// `x * to_diffusers_scale` is the sample as diffusers' scheduler holds it.
    pub to_diffusers_scale: f32,
    /// UNet evaluations so far (second-order samplers make two per step).
    pub evaluations: usize,
}

/// Receives progress; returning `Break` cancels the generation (checked every step).
pub trait Observer {
    fn progress(&mut self, progress: Progress) -> ControlFlow<()>;

    /// Called after each step, before `progress`. Ignored by default.
    fn step(&mut self, _latents: &StepLatents<'_>) {}

    /// Asked between the UNet's blocks, inside a step: `true` cancels at once (a step of a
    /// large image can take minutes on the CPU). `false` by default.
    fn interrupted(&self) -> bool {
        false
    }
}

impl<F: FnMut(Progress) -> ControlFlow<()>> Observer for F {
    fn progress(&mut self, progress: Progress) -> ControlFlow<()> {
        self(progress)
    }
}
