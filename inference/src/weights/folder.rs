//! diffusers model folders (`model_index.json`, `unet/`, `vae/`, `text_encoder*/`,
//! `tokenizer*/`, `scheduler/`) of every family.

use std::path::{Path, PathBuf};

use super::apply::NamedTensor;
use super::configs::Configs;
use super::keymap::{self, KeyTarget};
use super::loader::{LoadOptions, Networks, Sources, Stages, detected_with, display_name};
use super::source::{FileFormat, TensorFile};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::model::{Layout, LoadReport, Model, ModelInfo};
use crate::models::clip::{ClipActivation, ClipConfig};
use crate::schedule::diffusers::SchedulerConfig;
use crate::text::ClipTokenizer;

/// Pipeline classes of SD 1.x and 2.x folders (the text encoder tells them apart).
const SD_PIPELINES: [&str; 3] = [
    "StableDiffusionPipeline",
    "StableDiffusionInpaintPipeline",
    "StableDiffusionImg2ImgPipeline",
];
/// Pipeline classes of SDXL folders (base or refiner: the text encoders tell them apart).
const SDXL_PIPELINES: [&str; 3] = [
    "StableDiffusionXLPipeline",
    "StableDiffusionXLImg2ImgPipeline",
    "StableDiffusionXLInpaintPipeline",
];

/// The weight files of a folder of `family`, in network order (text encoders, UNet, VAE).
pub(super) fn component_files(dir: &Path, family: Family) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = family
        .spec()
        .encoders
        .iter()
        .map(|e| component_file(dir, e.folder, "model"))
        .collect::<Result<_>>()?;
    files.push(component_file(dir, "unet", "diffusion_pytorch_model")?);
    files.push(component_file(dir, "vae", "diffusion_pytorch_model")?);
    Ok(files)
}

/// The weights of one diffusers component: the first of the usual file names present.
pub(super) fn component_file(dir: &Path, component: &str, stem: &str) -> Result<PathBuf> {
    let folder = dir.join(component);
    ["safetensors", "fp16.safetensors", "bin", "fp16.bin"]
        .iter()
        .map(|ext| folder.join(format!("{stem}.{ext}")))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error::invalid_model(
                dir,
                format!("incomplete diffusers folder: {component}/{stem}.safetensors is missing"),
            )
        })
}

/// What `model_index.json` and the folder's layout say.
pub(super) struct Index {
    pub family: Family,
    /// `force_zeros_for_empty_prompt` (SDXL folders say it; false for SD 1.x/2.x).
    pub zero_empty_negative: bool,
}

/// Whether `model_index.json` lists a component (`["transformers", "CLIPTextModel"]`, not
/// `[null, null]`) and its folder exists.
fn has_component(dir: &Path, index: &serde_json::Value, name: &str) -> bool {
    let listed = match &index[name] {
        serde_json::Value::Array(a) => a.iter().any(|v| !v.is_null()),
        serde_json::Value::Null => true,
        _ => false,
    };
    listed && dir.join(name).is_dir()
}

/// Reads `model_index.json` and works out the family before anything heavy is read.
pub(super) fn read_index(dir: &Path) -> Result<Index> {
    if std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .next()
        .is_none()
    {
        return Err(Error::invalid_model(
            dir,
            "the folder is empty; choose a diffusers model folder or a checkpoint file",
        ));
    }
    let index_path = dir.join("model_index.json");
    let Ok(text) = std::fs::read_to_string(&index_path) else {
        return Err(Error::invalid_model(
            dir,
            "not a diffusers model folder (no model_index.json); choose a checkpoint file or a folder with model_index.json",
        ));
    };
    let index: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Error::invalid_model(&index_path, format!("not valid JSON ({e})")))?;
    let class = index["_class_name"].as_str().unwrap_or("");
    let family = if SDXL_PIPELINES.contains(&class) {
        if has_component(dir, &index, "text_encoder") {
            Family::Sdxl
        } else {
            Family::SdxlRefiner
        }
    } else if SD_PIPELINES.contains(&class) {
        let config = dir.join("text_encoder").join("config.json");
        let open_clip = std::fs::read_to_string(&config)
            .ok()
            .and_then(|t| ClipConfig::from_json(&t).ok())
            .is_some_and(|c| c.activation == ClipActivation::Gelu);
        if open_clip { Family::Sd2 } else { Family::Sd1 }
    } else {
        return Err(Error::unsupported_model(
            dir,
            format!("pipeline class {class:?} is not a Stable Diffusion 1.x, 2.x or XL pipeline"),
        ));
    };
    let spec = family.spec();
    let mut required = vec!["unet", "vae"];
    for e in spec.encoders {
        required.extend([e.folder, e.tokenizer_folder]);
    }
    for component in required {
        if !dir.join(component).is_dir() {
            return Err(Error::invalid_model(
                dir,
                format!("incomplete {family} diffusers folder: {component}/ is missing"),
            ));
        }
    }
    Ok(Index {
        family,
        zero_empty_negative: index["force_zeros_for_empty_prompt"]
            .as_bool()
            .unwrap_or(spec.zero_empty_negative),
    })
}

/// Loads a diffusers folder.
pub(super) fn load(dir: &Path, options: &LoadOptions, stages: &mut Stages<'_>) -> Result<Model> {
    let Index {
        family,
        zero_empty_negative,
    } = read_index(dir)?;
    let spec = family.spec();
    let configs = Configs::from_dir(dir, family, None)?;
    configs.check_fit(dir)?;
    let tokenizers = spec
        .encoders
        .iter()
        .map(|e| ClipTokenizer::from_folder(&dir.join(e.tokenizer_folder)))
        .collect::<Result<Vec<_>>>()?;
    let mut report = LoadReport::default();
    let scheduler_file = dir.join("scheduler").join("scheduler_config.json");
    // The model's own facts (prediction type, zero terminal SNR) must be read whatever the
    // scheduler class: a broken file is an error, never a silent epsilon model. A class or
    // setting Ember does not run only costs the folder's default sampler (a warning).
    let (facts, scheduler) = match std::fs::read_to_string(&scheduler_file) {
        Ok(text) => {
            let facts = SchedulerConfig::model_facts(&text)
                .map_err(|e| Error::invalid_model(&scheduler_file, e.to_string()))?;
            let scheduler = SchedulerConfig::from_json(&text)
                .map_err(|e| {
                    report.warnings.push(format!(
                        "scheduler/scheduler_config.json: {e}; using Ember's default sampler"
                    ))
                })
                .ok();
            (Some(facts), scheduler)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, None),
        Err(e) => return Err(Error::io(&scheduler_file, e)),
    };

    let files = component_files(dir, family)?;
    let encoders = spec.encoders.len();
    let mut tensors: Vec<Vec<NamedTensor>> = (0..files.len()).map(|_| Vec::new()).collect();
    let mut total = 0;
    let mut format = FileFormat::Safetensors;
    let mut rereadable = true;
    for (network, file_path) in files.iter().enumerate() {
        let file = TensorFile::open(file_path)?;
        format = file.format;
        rereadable &= format == FileFormat::Safetensors;
        total += file.tensors.len();
        for mut tensor in file.tensors {
            let key = tensor.name.clone();
            // Only the text encoders' files carry buffers no module needs.
            let target = if network < encoders {
                keymap::transformers_clip_key(&key)
            } else {
                KeyTarget::Module(key.clone())
            };
            match target {
                KeyTarget::Module(k) => {
                    tensor.name = keymap::diffusers_to_module(&k);
                    tensors[network].push(NamedTensor {
                        tensor,
                        file_key: key,
                    });
                }
                KeyTarget::Ignored => report.ignored.push(key),
                KeyTarget::Unknown => report.unknown.push(key),
            }
        }
    }
    let vae = (
        tensors.pop().unwrap_or_default(),
        files[encoders + 1].as_path(),
    );
    let unet = (tensors.pop().unwrap_or_default(), files[encoders].as_path());
    let sources = Sources {
        encoders: tensors
            .into_iter()
            .zip(files.iter().map(PathBuf::as_path))
            .collect(),
        unet,
        vae,
        from_preset: false,
        file_names: None,
        rereadable,
    };
    let networks = Networks::load(&configs, sources, options, stages)?;
    report.components = networks.reports.clone();
    let detected = detected_with(
        family,
        &configs.unet,
        facts.map(|(prediction, _)| prediction),
        facts.is_some_and(|(_, zero_snr)| zero_snr),
    );
    let info = ModelInfo {
        path: dir.to_path_buf(),
        name: display_name(dir),
        layout: Layout::DiffusersFolder(format),
        detected,
        tensor_count: total,
        report,
    };
    Ok(networks.into_model(
        configs,
        info,
        tokenizers,
        scheduler,
        zero_empty_negative,
        options,
    ))
}
