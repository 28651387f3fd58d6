//! diffusers model folders (`model_index.json`, `unet/`, `vae/`, `text_encoder/`,
//! `tokenizer/`, `scheduler/`).

use std::path::{Path, PathBuf};

use super::apply::NamedTensor;
use super::detect::{Detected, Family};
use super::keymap::{self, KeyTarget};
use super::loader::{Configs, LoadOptions, Networks, Sources, Stages, display_name};
use super::source::{FileFormat, TensorFile};
use crate::error::{Error, Result};
use crate::model::{Layout, LoadReport, Model, ModelInfo};
use crate::schedule::diffusers::SchedulerConfig;
use crate::text::{ClipTokenizer, PadToken};

/// Pipeline classes of SD 1.x folders.
const SD1_PIPELINES: [&str; 3] = [
    "StableDiffusionPipeline",
    "StableDiffusionInpaintPipeline",
    "StableDiffusionImg2ImgPipeline",
];

/// The weights of one diffusers component: the first of the usual file names present.
fn component_file(dir: &Path, component: &str, stem: &str) -> Result<PathBuf> {
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

/// Checks that `dir` is an SD 1.x diffusers folder before anything heavy is read.
fn check_pipeline(dir: &Path) -> Result<()> {
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
    if class.contains("XL") {
        return Err(Error::unsupported_model(
            dir,
            format!("this is an SDXL pipeline ({class}); Ember runs SD 1.x models so far"),
        ));
    }
    if !SD1_PIPELINES.contains(&class) {
        return Err(Error::unsupported_model(
            dir,
            format!("pipeline class {class:?} is not a Stable Diffusion 1.x pipeline"),
        ));
    }
    for component in ["unet", "vae", "text_encoder", "tokenizer"] {
        if !dir.join(component).is_dir() {
            return Err(Error::invalid_model(
                dir,
                format!("incomplete diffusers folder: {component}/ is missing"),
            ));
        }
    }
    Ok(())
}

/// Loads an SD 1.x diffusers folder.
pub(super) fn load(dir: &Path, options: &LoadOptions, stages: &mut Stages<'_>) -> Result<Model> {
    check_pipeline(dir)?;
    let tokenizer = ClipTokenizer::from_folder(&dir.join("tokenizer"))?;
    if tokenizer.pad_token() == PadToken::Exclamation {
        return Err(Error::unsupported_model(
            dir,
            "this is an SD 2.x pipeline; Ember runs SD 1.x models so far",
        ));
    }
    let configs = Configs::from_dir(dir, None)?;
    let mut report = LoadReport::default();
    let scheduler =
        match std::fs::read_to_string(dir.join("scheduler").join("scheduler_config.json")) {
            Ok(text) => SchedulerConfig::from_json(&text)
                .map_err(|e| {
                    report.warnings.push(format!(
                        "scheduler/scheduler_config.json: {e}; using Ember's default sampler"
                    ))
                })
                .ok(),
            Err(_) => None,
        };

    let files = [
        component_file(dir, "text_encoder", "model")?,
        component_file(dir, "unet", "diffusion_pytorch_model")?,
        component_file(dir, "vae", "diffusion_pytorch_model")?,
    ];
    let mut tensors: [Vec<NamedTensor>; 3] = Default::default();
    let mut total = 0;
    let mut format = FileFormat::Safetensors;
    for (network, file_path) in files.iter().enumerate() {
        let file = TensorFile::open(file_path)?;
        format = file.format;
        total += file.tensors.len();
        for mut tensor in file.tensors {
            let key = tensor.name.clone();
            // Only the text encoder's file carries buffers no module needs.
            let target = if network == 0 {
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
    let paths = [files[0].as_path(), files[1].as_path(), files[2].as_path()];
    let networks = Networks::load(
        &configs,
        Sources {
            tensors,
            paths,
            from_preset: false,
        },
        options,
        stages,
    )?;
    report.components = networks.reports.clone();
    let in_channels = configs.unet.in_channels;
    let info = ModelInfo {
        path: dir.to_path_buf(),
        name: display_name(dir),
        layout: Layout::DiffusersFolder(format),
        detected: Detected {
            family: Family::Sd1,
            inpainting: in_channels == 9,
            unet_in_channels: in_channels,
        },
        tensor_count: total,
        report,
    };
    Ok(networks.into_model(configs, info, tokenizer, scheduler, options))
}
