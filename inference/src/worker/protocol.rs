//! The worker's plain-data protocol: what the UI asks, what the worker answers.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::api::{GenerateRequest, ModelCapabilities, Stage};
use crate::imaging::ImageRgb8;

/// Identifies one generation job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u64);

/// A shared flag the UI sets to stop a job; the worker checks it every step.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A fresh token.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the job to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether a stop was asked for.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Which of the worker's two model slots a command or event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ModelRole {
    /// The model generations start from.
    #[default]
    Main,
    /// The model that takes over at a request's refiner switch (the SDXL refiner).
    Refiner,
}

/// What the UI asks of the worker.
#[derive(Debug)]
pub enum Command {
    /// Load a model into a slot (replacing the slot's model, which is freed first).
    LoadModel {
        path: PathBuf,
        config_dir: Option<PathBuf>,
        role: ModelRole,
        cancel: CancelToken,
    },
    /// Generate; `cancel` stops it within one step.
    Generate {
        job: JobId,
        request: Box<GenerateRequest>,
        cancel: CancelToken,
    },
    /// Upscale an image with an ESRGAN model (the Extras view); `cancel` stops it within
    /// one tile.
    Upscale {
        job: JobId,
        request: Box<crate::upscale::UpscaleRequest>,
        cancel: CancelToken,
    },
    /// Free a slot's model.
    Unload(ModelRole),
    /// Finish the current command and end the thread.
    Shutdown,
}

/// What loading found, for the model panel.
#[derive(Clone, Debug)]
pub struct ModelSummary {
    pub path: PathBuf,
    pub name: String,
    /// `SD 1.x`, `SDXL refiner`, `SD 2.x v-prediction`, ...
    pub family: String,
    /// What requests may ask of it (family, sizes, prompts).
    pub capabilities: ModelCapabilities,
    /// `diffusers folder (safetensors)`, `single file (safetensors)`, ...
    pub layout: String,
    pub native_size: (u32, u32),
    pub inpainting: bool,
    /// Load warnings (unused tensors, conversions, ...).
    pub notes: Vec<String>,
    /// The model's own default sampler, for the UI to show (A1111 name).
    pub default_sampler: Option<String>,
}

/// A model to load again after the engine moved to the CPU ([`Event::GpuLost`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelToReload {
    pub role: ModelRole,
    pub path: PathBuf,
    pub config_dir: Option<PathBuf>,
}

/// What the worker reports.
#[derive(Clone, Debug)]
pub enum Event {
    ModelLoading {
        path: PathBuf,
        role: ModelRole,
        step: usize,
        total: usize,
    },
    ModelLoaded {
        summary: Box<ModelSummary>,
        role: ModelRole,
        elapsed: Duration,
    },
    ModelFailed {
        path: PathBuf,
        role: ModelRole,
        error: String,
        /// The model still in the slot (a failed load keeps the one before it).
        kept: Option<Box<ModelSummary>>,
        /// The file is not its family's released size and needs a config folder
        /// (`Command::LoadModel { config_dir }`) to load.
        needs_config: bool,
        /// The load was cancelled (its token), not failed: a newer load of the same file
        /// may be waiting behind it.
        cancelled: bool,
    },
    ModelUnloaded(ModelRole),
    /// The GPU stopped working for good; the engine goes on on the CPU without its models
    /// (their weights were on the GPU). `reload` lists them, to load again there: the
    /// models that were loaded, and a load the loss interrupted in place of its slot's
    /// model (that load ends with this event, not `ModelFailed`). Sent before the failed
    /// job's `Failed`, so the loads the UI sends come before its next job.
    GpuLost {
        error: String,
        reload: Vec<ModelToReload>,
    },
    JobStarted {
        job: JobId,
    },
    Progress {
        job: JobId,
        stage: Stage,
        step: usize,
        total: usize,
        elapsed: Duration,
    },
    Finished {
        job: JobId,
        images: Vec<ResultImage>,
        request: Box<GenerateRequest>,
        elapsed: Duration,
        warnings: Vec<String>,
    },
    /// An upscale job's result.
    Upscaled {
        job: JobId,
        image: ResultImage,
        elapsed: Duration,
    },
    Cancelled {
        job: JobId,
    },
    /// Something the user should know about a job before it ends (it will take long).
    Notice {
        job: JobId,
        message: String,
    },
    Failed {
        job: JobId,
        error: String,
    },
    /// The worker itself failed (a panic outside any job or load, which each catch their
    /// own) and serves no more: nothing sent from now on is done. The last event.
    Stopped {
        error: String,
    },
}

impl Event {
    /// The job an event is about, if any.
    pub fn job(&self) -> Option<JobId> {
        match self {
            Event::JobStarted { job }
            | Event::Progress { job, .. }
            | Event::Finished { job, .. }
            | Event::Upscaled { job, .. }
            | Event::Cancelled { job }
            | Event::Notice { job, .. }
            | Event::Failed { job, .. } => Some(*job),
            _ => None,
        }
    }
}

/// One finished image with what makes it reproducible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultImage {
    pub image: ImageRgb8,
    pub seed: u64,
    /// A1111's `parameters` text for the PNG (model name and hash included); empty when
    /// there is none (an upscaled image without metadata).
    pub parameters: String,
    /// A1111's `extras` text (what an upscale did).
    pub extras: Option<String>,
}

/// A live preview: the newest one replaces any the UI has not shown yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preview {
    pub job: JobId,
    pub step: usize,
    pub image: ImageRgb8,
}
