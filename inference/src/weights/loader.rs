//! Loading a whole model: the entry point, and what both layouts share (configs, strict
//! loading of the three networks, assembling the `Model`).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use burn::store::burn_pack::Tensor as PackTensor;
use burn::tensor::Device;

use super::apply::{ComponentReport, NamedTensor, apply_strict};
use crate::device::Precision;
use crate::error::{Error, Result};
use crate::model::{Model, ModelInfo};
use crate::models::clip::{ClipConfig, ClipTextModel};
use crate::models::unet::{UNet, UNetConfig};
use crate::models::vae::{Vae, VaeConfig};
use crate::schedule::diffusers::{Prediction, SchedulerConfig};
use crate::text::ClipTokenizer;

/// How to load a model.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// A diffusers-style folder whose `unet/`, `vae/`, `text_encoder/` `config.json` give
    /// the architecture of a single-file checkpoint of non-standard size.
    pub config_dir: Option<PathBuf>,
    pub device: Device,
    /// Float format of the loaded weights (files in other formats are converted).
    pub precision: Precision,
}

/// Loads a diffusers folder, a `.safetensors` checkpoint or a `.ckpt` pickle.
pub fn load(path: &Path, options: &LoadOptions) -> Result<Model> {
    load_observed(path, options, &mut |_, _| ControlFlow::Continue(()))
}

/// [`load`], reporting `progress(done, total)` between stages (reading the file, then each
/// network); `Break` cancels with [`Error::Cancelled`].
pub fn load_observed(
    path: &Path,
    options: &LoadOptions,
    progress: &mut dyn FnMut(usize, usize) -> ControlFlow<()>,
) -> Result<Model> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::invalid_model(path, "no such file or folder"),
        _ => Error::io(path, e),
    })?;
    let mut stage = Stages { progress, done: 0 };
    stage.next()?;
    if meta.is_dir() {
        super::folder::load(path, options, &mut stage)
    } else {
        super::single_file::load(path, options, &mut stage)
    }
}

/// Loading stages for progress reports: the file, then the three networks.
pub(super) struct Stages<'a> {
    progress: &'a mut dyn FnMut(usize, usize) -> ControlFlow<()>,
    done: usize,
}

impl Stages<'_> {
    const TOTAL: usize = 4;

    /// Reports the stage about to start; `Err(Cancelled)` when the caller asked to stop.
    pub fn next(&mut self) -> Result<()> {
        let flow = (self.progress)(self.done, Self::TOTAL);
        self.done += 1;
        match flow {
            ControlFlow::Continue(()) => Ok(()),
            ControlFlow::Break(()) => Err(Error::Cancelled),
        }
    }
}

/// The architectures of a model's three networks.
pub(super) struct Configs {
    pub unet: UNetConfig,
    pub vae: VaeConfig,
    pub clip: ClipConfig,
}

impl Configs {
    /// Configs from a diffusers-style folder. A component without a `config.json` takes
    /// its config from `preset`, or is an error without one.
    pub fn from_dir(dir: &Path, preset: Option<Configs>) -> Result<Self> {
        let (unet, vae, clip) = match preset {
            Some(p) => (Some(p.unet), Some(p.vae), Some(p.clip)),
            None => (None, None, None),
        };
        Ok(Self {
            unet: read_config(dir, "unet", UNetConfig::from_json, unet)?,
            vae: read_config(dir, "vae", VaeConfig::from_json, vae)?,
            clip: read_config(dir, "text_encoder", ClipConfig::from_json, clip)?,
        })
    }

    /// The size the UNet was trained at, in pixels.
    fn native_size(&self) -> (u32, u32) {
        let side = (self.unet.sample_size * self.vae.factor()) as u32;
        (side, side)
    }
}

/// Parses `dir/component/config.json`, or returns `fallback` when the file is absent.
fn read_config<T>(
    dir: &Path,
    component: &str,
    parse: fn(&str) -> Result<T>,
    fallback: Option<T>,
) -> Result<T> {
    let path = dir.join(component).join("config.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => parse(&text).map_err(|e| Error::invalid_model(&path, e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => fallback.ok_or_else(|| {
            Error::invalid_model(
                dir,
                format!("incomplete diffusers folder: {component}/config.json is missing"),
            )
        }),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// The three networks with their weights, and what loading each found.
pub(super) struct Networks {
    text_encoder: ClipTextModel,
    unet: UNet,
    vae: Vae,
    pub reports: Vec<ComponentReport>,
}

/// Where each network's tensors come from: `[text encoder, UNet, VAE]`.
pub(super) struct Sources<'a> {
    pub tensors: [Vec<NamedTensor>; 3],
    pub paths: [&'a Path; 3],
    /// The architecture came from a preset: a shape mismatch probably means a checkpoint of
    /// another size, and the error says how to describe it.
    pub from_preset: bool,
}

impl Networks {
    /// Loads every network strictly (see [`apply_strict`]).
    pub fn load(
        configs: &Configs,
        sources: Sources<'_>,
        options: &LoadOptions,
        stages: &mut Stages<'_>,
    ) -> Result<Self> {
        let hint = |e: Error| match e {
            Error::Weights { path, message }
                if sources.from_preset && message.contains("has shape") =>
            {
                Error::Weights {
                    path,
                    message: format!(
                        "{message}. This checkpoint is not the standard size: pass --config DIR, a diffusers-style \
                     folder whose unet/, vae/ and text_encoder/ config.json describe it"
                    ),
                }
            }
            other => other,
        };
        let (d, dtype) = (&options.device, options.precision.dtype());
        let [clip, unet, vae] = sources.tensors;
        let [clip_path, unet_path, vae_path] = sources.paths;
        stages.next()?;
        let (text_encoder, r1) =
            apply_strict(configs.clip.init(d), clip, "text encoder", clip_path, dtype)
                .map_err(hint)?;
        stages.next()?;
        let (unet, r2) =
            apply_strict(configs.unet.init(d), unet, "UNet", unet_path, dtype).map_err(hint)?;
        stages.next()?;
        let (vae, r3) =
            apply_strict(configs.vae.init(d), vae, "VAE", vae_path, dtype).map_err(hint)?;
        Ok(Self {
            text_encoder,
            unet,
            vae,
            reports: vec![r1, r2, r3],
        })
    }

    /// The loaded model.
    pub fn into_model(
        self,
        configs: Configs,
        info: ModelInfo,
        tokenizer: ClipTokenizer,
        scheduler: Option<SchedulerConfig>,
        options: &LoadOptions,
    ) -> Model {
        let prediction = scheduler
            .as_ref()
            .map_or(Prediction::Epsilon, |s| s.prediction);
        Model {
            info,
            tokenizer,
            text_encoder: self.text_encoder,
            unet: self.unet,
            vae: self.vae,
            native_size: configs.native_size(),
            text_layers: configs.clip.num_hidden_layers,
            vae_config: configs.vae,
            default_scheduler: scheduler,
            prediction,
            device: options.device.clone(),
            precision: options.precision,
        }
    }
}

/// The name A1111 shows: the file name without extension, or the folder name.
pub(super) fn display_name(path: &Path) -> String {
    path.file_stem()
        .or_else(|| path.file_name())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Tensor names and shapes of a file.
pub fn tensor_shapes(tensors: &[PackTensor]) -> HashMap<String, Vec<usize>> {
    tensors
        .iter()
        .map(|t| (t.name.clone(), t.shape.as_slice().to_vec()))
        .collect()
}
