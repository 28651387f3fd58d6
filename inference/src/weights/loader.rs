//! Loading a whole model: the entry point, and what both layouts share (strict loading of
//! every network, the prediction type, assembling the `Model`; architectures in
//! [`super::configs`]).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use burn::store::burn_pack::Tensor as PackTensor;
use burn::tensor::Device;

use super::apply::{ComponentReport, FileName, NamedTensor, apply_strict};
use super::configs::{Configs, check_unet_channels};
use super::detect::Detected;
use crate::device::Precision;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::model::{Model, ModelInfo, TextEncoder};
use crate::models::clip::ClipTextModel;
use crate::models::unet::{UNet, UNetConfig};
use crate::models::vae::Vae;
use crate::schedule::diffusers::{Prediction, SchedulerConfig};
use crate::text::ClipTokenizer;

/// How to load a model.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// A diffusers-style folder whose `unet/`, `vae/`, `text_encoder*/` `config.json` give
    /// the architecture of a single-file checkpoint of non-standard size (and whose
    /// `scheduler/` gives its prediction type).
    pub config_dir: Option<PathBuf>,
    pub device: Device,
    /// Float format of the loaded weights (files in other formats are converted).
    pub precision: Precision,
    /// Overrides the prediction type the files say or imply (`--prediction`).
    pub prediction: Option<Prediction>,
    /// Keep the VAE in f32 when `precision` is half, unless its config says it is f16-safe
    /// (`force_upcast: false`): diffusers' rule and A1111's automatic "no half VAE", what
    /// `--precision auto` does on a GPU. Without it a half VAE that overflows falls back to f32.
    pub vae_upcast: bool,
}

impl LoadOptions {
    /// Options for `device` in `precision`, nothing overridden.
    pub fn new(device: Device, precision: Precision) -> Self {
        Self {
            config_dir: None,
            device,
            precision,
            prediction: None,
            vae_upcast: false,
        }
    }

    /// The float format a VAE of `config` loads in.
    pub fn vae_precision(&self, config: &crate::models::vae::VaeConfig) -> Precision {
        if self.vae_upcast && config.force_upcast {
            Precision::F32
        } else {
            self.precision
        }
    }
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
    let mut stage = Stages::new(progress);
    stage.next()?;
    if meta.is_dir() {
        super::folder::load(path, options, &mut stage)
    } else {
        super::single_file::load(path, options, &mut stage)
    }
}

/// Loading stages for progress reports: the file, then each network.
pub(super) struct Stages<'a> {
    progress: &'a mut dyn FnMut(usize, usize) -> ControlFlow<()>,
    done: usize,
    total: usize,
}

impl<'a> Stages<'a> {
    /// Stages reported to `progress`.
    pub fn new(progress: &'a mut dyn FnMut(usize, usize) -> ControlFlow<()>) -> Self {
        Self {
            progress,
            done: 0,
            total: 4,
        }
    }

    /// Reports the stage about to start; `Err(Cancelled)` when the caller asked to stop.
    pub fn next(&mut self) -> Result<()> {
        let flow = (self.progress)(self.done, self.total);
        self.done += 1;
        match flow {
            ControlFlow::Continue(()) => Ok(()),
            ControlFlow::Break(()) => Err(Error::Cancelled),
        }
    }
}

/// Every network with its weights, and what loading each found.
pub(super) struct Networks {
    encoders: Vec<ClipTextModel>,
    unet: UNet,
    vae: Vae,
    pub reports: Vec<ComponentReport>,
    /// The UNet's and text encoders' tensors, to read weights again after a LoRA.
    sources: super::WeightSources,
}

/// A single file's own name for a module path of network `i` that it lacks.
pub(super) type NetworkFileNames<'a> = &'a dyn Fn(usize, &str) -> Option<String>;

/// Where each network's tensors come from.
pub(super) struct Sources<'a> {
    /// One per text encoder, in the family's order.
    pub encoders: Vec<(Vec<NamedTensor>, &'a Path)>,
    pub unet: (Vec<NamedTensor>, &'a Path),
    pub vae: (Vec<NamedTensor>, &'a Path),
    /// The architecture came from a preset: a shape mismatch probably means a checkpoint of
    /// another size, and the error says how to describe it.
    pub from_preset: bool,
    /// A single file's own name for a module path of network `i` (encoders, UNet, VAE) that
    /// it lacks (see [`super::file_names`]).
    pub file_names: Option<NetworkFileNames<'a>>,
    /// Every tensor comes from a `.safetensors` file, which the model may read again
    /// ([`super::restore`]).
    pub rereadable: bool,
}

/// A report name for encoder `i` of a family (`text encoder`, `text encoder 2`).
pub(super) fn encoder_name(family: Family, i: usize) -> String {
    family.spec().encoders[i].folder.replace('_', " ")
}

impl Networks {
    /// The loaded UNet (for checks before the model is assembled).
    pub fn unet(&self) -> &UNet {
        &self.unet
    }

    /// Loads every network strictly (see [`apply_strict`]).
    pub fn load(
        configs: &Configs,
        sources: Sources<'_>,
        options: &LoadOptions,
        stages: &mut Stages<'_>,
    ) -> Result<Self> {
        check_unet_channels(configs, sources.unet.1)?;
        let from_preset = sources.from_preset;
        let file_names = sources.file_names;
        let namer = |i: usize| file_names.map(|f| move |name: &str| f(i, name));
        let encoder_count = sources.encoders.len();
        let rereadable = sources.rereadable;
        let mut kept = super::WeightSources::default();
        let mut keep = |network, tensors: &[NamedTensor]| {
            if rereadable {
                let tensors = tensors.iter().map(|t| t.tensor.clone()).collect();
                kept.keep(network, tensors, options.precision.dtype());
            }
        };
        let hint = |e: Error| match e {
            Error::Weights { path, message } if from_preset && message.contains("has shape") => {
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
        stages.total = 3 + configs.encoders.len();
        let (d, dtype) = (&options.device, options.precision.dtype());
        let mut reports = Vec::new();
        let mut encoders = Vec::new();
        for (i, ((tensors, path), config)) in sources
            .encoders
            .into_iter()
            .zip(&configs.encoders)
            .enumerate()
        {
            stages.next()?;
            let name = encoder_name(configs.family, i);
            let names = namer(i);
            let names = names.as_ref().map(|f| f as FileName<'_>);
            keep(crate::lora::Network::TextEncoder(i), &tensors);
            let (network, report) =
                apply_strict(config.init(d), tensors, (&name, path), dtype, names).map_err(hint)?;
            encoders.push(network);
            reports.push(report);
        }
        stages.next()?;
        let (tensors, path) = sources.unet;
        let names = namer(encoder_count);
        let names = names.as_ref().map(|f| f as FileName<'_>);
        keep(crate::lora::Network::Unet, &tensors);
        let (unet, report) =
            apply_strict(configs.unet.init(d), tensors, ("UNet", path), dtype, names)
                .map_err(hint)?;
        reports.push(report);
        stages.next()?;
        let (tensors, path) = sources.vae;
        let names = namer(encoder_count + 1);
        let names = names.as_ref().map(|f| f as FileName<'_>);
        let vae_dtype = options.vae_precision(&configs.vae).dtype();
        let (vae, report) = apply_strict(
            configs.vae.init(d),
            tensors,
            ("VAE", path),
            vae_dtype,
            names,
        )
        .map_err(hint)?;
        reports.push(report);
        Ok(Self {
            encoders,
            unet,
            vae,
            reports,
            sources: kept,
        })
    }

    /// The loaded model. The prediction type is `options.prediction`, else what the files
    /// said (`info.detected.prediction`), else epsilon.
    pub fn into_model(
        self,
        configs: Configs,
        mut info: ModelInfo,
        tokenizers: Vec<ClipTokenizer>,
        scheduler: Option<SchedulerConfig>,
        zero_empty_negative: bool,
        options: &LoadOptions,
    ) -> Model {
        let said = info.detected.prediction;
        if let (Some(wanted), Some(said)) = (options.prediction, said)
            && wanted != said
        {
            info.report.warnings.push(format!(
                "the model's files say {} prediction; running it as {} as asked",
                prediction_name(said),
                prediction_name(wanted)
            ));
        }
        let prediction = options.prediction.or(said).unwrap_or_default();
        info.detected.prediction = Some(prediction);
        let spec = configs.family.spec();
        let encoders = spec
            .encoders
            .iter()
            .zip(tokenizers)
            .zip(self.encoders)
            .map(|((spec, tokenizer), network)| TextEncoder::new(spec, tokenizer, network))
            .collect();
        Model {
            info,
            encoders,
            unet: self.unet,
            unet_config: configs.unet.clone(),
            vae: self.vae,
            native_size: configs.native_size(),
            vae_config: configs.vae.clone(),
            default_scheduler: scheduler,
            prediction,
            zero_empty_negative,
            device: options.device.clone(),
            precision: options.precision,
            vae_precision: options.vae_precision(&configs.vae),
            sources: self.sources,
            lora: Default::default(),
            controlnets: Vec::new(),
            vae_f32: Default::default(),
            unet_f32: Default::default(),
            swapped_vae: Default::default(),
        }
    }
}

/// `epsilon` or `v`, as `--prediction` takes them.
pub fn prediction_name(p: Prediction) -> &'static str {
    match p {
        Prediction::Epsilon => "epsilon",
        Prediction::V => "v",
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

/// What `detected` looks like once a folder or file has been read; shared by both layouts.
pub(super) fn detected_with(
    family: Family,
    unet: &UNetConfig,
    prediction: Option<Prediction>,
    zero_terminal_snr: bool,
) -> Detected {
    Detected {
        prediction,
        zero_terminal_snr,
        ..Detected::plain(family, unet.in_channels)
    }
}
