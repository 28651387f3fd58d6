//! What the worker drives: the [`Engine`] trait (the seam tests replace with a fake) and
//! [`BurnEngine`], the real one.

use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;

use burn::tensor::Device;

use super::protocol::ModelSummary;
use crate::api::{GenerateRequest, Generation, Progress, SamplerChoice, Stage};
use crate::device::Precision;
use crate::error::Result;
use crate::imaging::ImageRgb8;
use crate::model::{Layout, Model};
use crate::pipeline::{Observer, StepLatents, generate};
use crate::preview::latent_preview;
use crate::weights::{self, LoadOptions};

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
    /// Frees the current model, then loads one. `progress(done, total)` may return `Break`
    /// to cancel between stages.
    fn load(
        &mut self,
        path: &Path,
        config_dir: Option<&Path>,
        progress: &mut dyn FnMut(usize, usize) -> ControlFlow<()>,
    ) -> Result<ModelSummary>;

    /// Frees the current model.
    fn unload(&mut self);

    /// Runs a generation; `progress` returning `Break` cancels it.
    fn generate(
        &mut self,
        request: &GenerateRequest,
        progress: &mut dyn FnMut(EngineProgress) -> ControlFlow<()>,
    ) -> Result<Generation>;

    /// A1111's `parameters` text for image `index` of `request` on the loaded model.
    fn parameters(&mut self, request: &GenerateRequest, index: usize) -> String;
}

/// The real engine: Burn models on one device.
pub struct BurnEngine {
    model: Option<Model>,
    /// The loaded single file's A1111 hash, computed on first use (hashing takes seconds).
    model_hash: Option<String>,
    device: Device,
    precision: Precision,
}

impl BurnEngine {
    /// An engine with no model yet.
    pub fn new(device: Device, precision: Precision) -> Self {
        Self {
            model: None,
            model_hash: None,
            device,
            precision,
        }
    }
}

/// Turns the pipeline's callbacks into [`EngineProgress`] with previews of the model's
/// current prediction of the clean image.
struct PreviewObserver<'a> {
    progress: &'a mut dyn FnMut(EngineProgress) -> ControlFlow<()>,
    pending: Option<ImageRgb8>,
}

impl Observer for PreviewObserver<'_> {
    fn progress(&mut self, p: Progress) -> ControlFlow<()> {
        let preview = self.pending.take();
        (self.progress)(EngineProgress {
            stage: p.stage,
            step: p.step,
            total: p.total,
            elapsed: p.elapsed,
            preview,
        })
    }

    fn step(&mut self, latents: &StepLatents<'_>) {
        self.pending = Some(latent_preview(latents.denoised));
    }
}

impl Engine for BurnEngine {
    fn load(
        &mut self,
        path: &Path,
        config_dir: Option<&Path>,
        progress: &mut dyn FnMut(usize, usize) -> ControlFlow<()>,
    ) -> Result<ModelSummary> {
        // Free the old model first so two never share memory.
        self.unload();
        let options = LoadOptions {
            config_dir: config_dir.map(Path::to_path_buf),
            device: self.device.clone(),
            precision: self.precision,
        };
        let model = weights::loader::load_observed(path, &options, progress)?;
        let info = &model.info;
        let layout = match info.layout {
            Layout::DiffusersFolder(f) => format!("diffusers folder ({})", f.name()),
            Layout::SingleFile(f) => format!("single file ({})", f.name()),
        };
        let default_sampler = match model.default_sampler() {
            SamplerChoice::Diffusers(config) => Some(config.class.class_name().to_string()),
            SamplerChoice::Named { .. } => None,
        };
        let summary = ModelSummary {
            path: info.path.clone(),
            name: info.name.clone(),
            family: info.detected.to_string(),
            layout,
            native_size: model.native_size,
            inpainting: model.is_inpainting(),
            notes: info.report.notes(),
            default_sampler,
        };
        self.model = Some(model);
        Ok(summary)
    }

    fn unload(&mut self) {
        self.model = None;
        self.model_hash = None;
    }

    fn generate(
        &mut self,
        request: &GenerateRequest,
        progress: &mut dyn FnMut(EngineProgress) -> ControlFlow<()>,
    ) -> Result<Generation> {
        let model = self
            .model
            .as_ref()
            .ok_or_else(|| crate::Error::settings("no model is loaded; load a checkpoint first"))?;
        generate(
            model,
            request,
            &mut PreviewObserver {
                progress,
                pending: None,
            },
        )
    }

    fn parameters(&mut self, request: &GenerateRequest, index: usize) -> String {
        let Some(model) = &self.model else {
            return String::new();
        };
        if self.model_hash.is_none() && matches!(model.info.layout, Layout::SingleFile(_)) {
            // A hash that cannot be computed is left out of the metadata, as A1111 does.
            self.model_hash = crate::hashing::model_hash(
                &model.info.path,
                crate::hashing::cache_dir().as_deref(),
            )
            .ok();
        }
        crate::metadata::for_generation(request, &model.info, self.model_hash.as_deref(), index)
            .to_text()
    }
}
