//! What the worker drives: the [`Engine`] trait (the seam tests replace with a fake);
//! [`super::BurnEngine`] is the real one.

use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;

use super::estimate::Cost;
use super::protocol::{ModelRole, ModelSummary, ModelToReload};
use crate::api::{GenerateRequest, Generation, Stage};
use crate::error::Result;
use crate::imaging::ImageRgb8;

/// A progress report from an engine, with the newest preview when there is one.
#[derive(Clone, Debug)]
pub struct EngineProgress {
    pub stage: Stage,
    pub step: usize,
    pub total: usize,
    pub elapsed: Duration,
    pub preview: Option<ImageRgb8>,
}

/// Loads models and generates; runs on the worker thread only.
pub trait Engine: Send {
    /// Loads a model into the slot. The slot's old model stays until the new one has loaded:
    /// when loading fails or is cancelled, [`Engine::loaded`] is still the old one.
    /// `progress(done, total)` may return `Break` to cancel between stages.
    fn load(
        &mut self,
        path: &Path,
        config_dir: Option<&Path>,
        role: ModelRole,
        progress: &mut dyn FnMut(usize, usize) -> ControlFlow<()>,
    ) -> Result<ModelSummary>;

    /// The slot's model, if one is loaded.
    fn loaded(&self, role: ModelRole) -> Option<ModelSummary>;

    /// Frees the slot's model.
    fn unload(&mut self, role: ModelRole);

    /// Runs a generation: `progress` may return `Break` to cancel after a step; `interrupted` is asked inside a
    /// step (between UNet blocks) and cancels at once when it says so.
    fn generate(
        &mut self,
        request: &GenerateRequest,
        progress: &mut dyn FnMut(EngineProgress) -> ControlFlow<()>,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Generation>;

    /// What `request` will cost, asked before it starts: `Err` refuses it (it cannot fit in
    /// memory); `time` is announced when long. Nothing known by default.
    /// `interrupted` stops a measurement it needs (a cancel or shutdown meanwhile).
    fn cost(
        &mut self,
        request: &GenerateRequest,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Option<Cost>> {
        let _ = (request, interrupted);
        Ok(None)
    }

    /// Upscales an image with an ESRGAN model; `on_tile(done, total)` may cancel. Engines
    /// without upscalers refuse.
    fn upscale(
        &mut self,
        request: &crate::upscale::UpscaleRequest,
        on_tile: &mut dyn FnMut(usize, usize) -> ControlFlow<()>,
    ) -> Result<(ImageRgb8, String)> {
        let _ = (request, on_tile);
        Err(crate::Error::settings("this engine has no upscalers"))
    }

    /// After the GPU was lost ([`crate::Error::DeviceLost`]): goes on on the CPU, without
    /// the models (their weights were on the GPU), and returns them to load again there.
    /// `None` where there is nothing to fall back to (the engine is on the CPU already).
    fn fall_back_to_cpu(&mut self) -> Option<Vec<ModelToReload>> {
        None
    }

    /// A1111's `parameters` text for image `index` of `generation`, made from `request` on
    /// the loaded models.
    fn parameters(
        &mut self,
        request: &GenerateRequest,
        generation: &Generation,
        index: usize,
    ) -> String;
}
