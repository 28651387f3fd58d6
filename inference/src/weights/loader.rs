//! Loading a whole model from a diffusers folder or a single-file checkpoint.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use burn::store::burn_pack::Tensor as PackTensor;
use burn::tensor::Device;
use serde_json::Value;

use super::apply::{ComponentReport, NamedTensor, apply_strict};
use super::detect::{Detected, Family, NotDetected, detect};
use super::keymap::{self, KeyTarget, UNetLayout};
use super::source::{FileFormat, TensorFile};
use crate::device::Precision;
use crate::error::{Error, Result};
use crate::model::{Layout, LoadReport, Model, ModelInfo};
use crate::models::clip::ClipConfig;
use crate::models::unet::UNetConfig;
use crate::models::vae::VaeConfig;
use crate::schedule::diffusers::{Prediction, SchedulerConfig};
use crate::text::{ClipTokenizer, PadToken};

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
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::invalid_model(path, "no such file or folder"),
        _ => Error::io(path, e),
    })?;
    if meta.is_dir() {
        load_folder(path, options)
    } else {
        load_single_file(path, options)
    }
}

/// The architectures of a model's three networks.
struct Configs {
    unet: UNetConfig,
    vae: VaeConfig,
    clip: ClipConfig,
}

fn read_json_config(dir: &Path, component: &str) -> Result<Option<String>> {
    let path = dir.join(component).join("config.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// Configs from a diffusers-style folder; components without a `config.json` use `preset`.
fn configs_from_dir(dir: &Path, preset: Configs) -> Result<Configs> {
    let wrap = |component: &str, e: Error| {
        Error::invalid_model(&dir.join(component).join("config.json"), e.to_string())
    };
    Ok(Configs {
        unet: match read_json_config(dir, "unet")? {
            Some(t) => UNetConfig::from_json(&t).map_err(|e| wrap("unet", e))?,
            None => preset.unet,
        },
        vae: match read_json_config(dir, "vae")? {
            Some(t) => VaeConfig::from_json(&t).map_err(|e| wrap("vae", e))?,
            None => preset.vae,
        },
        clip: match read_json_config(dir, "text_encoder")? {
            Some(t) => ClipConfig::from_json(&t).map_err(|e| wrap("text_encoder", e))?,
            None => preset.clip,
        },
    })
}

fn assemble(
    configs: &Configs,
    parts: [Vec<NamedTensor>; 3],
    paths: [&Path; 3],
    options: &LoadOptions,
    preset_hint: bool,
) -> Result<(
    crate::models::clip::ClipTextModel,
    crate::models::unet::UNet,
    crate::models::vae::Vae,
    Vec<ComponentReport>,
)> {
    let [clip_tensors, unet_tensors, vae_tensors] = parts;
    let hint = |e: Error| match e {
        Error::Weights { path, message } if preset_hint && message.contains("has shape") => {
            Error::Weights {
                path,
                message: format!(
                    "{message}. This checkpoint is not the standard size: pass --config DIR, a diffusers-style folder \
                 whose unet/, vae/ and text_encoder/ config.json describe it"
                ),
            }
        }
        other => other,
    };
    let d = &options.device;
    let (text_encoder, r1) = apply_strict(
        configs.clip.init(d),
        clip_tensors,
        "text encoder",
        paths[0],
        options.precision.dtype(),
    )
    .map_err(hint)?;
    let (unet, r2) = apply_strict(
        configs.unet.init(d),
        unet_tensors,
        "UNet",
        paths[1],
        options.precision.dtype(),
    )
    .map_err(hint)?;
    let (vae, r3) = apply_strict(
        configs.vae.init(d),
        vae_tensors,
        "VAE",
        paths[2],
        options.precision.dtype(),
    )
    .map_err(hint)?;
    Ok((text_encoder, unet, vae, vec![r1, r2, r3]))
}

/// DDPM buffers and EMA copies that real single-file checkpoints carry beside the networks.
fn is_known_extra(key: &str) -> bool {
    const BUFFERS: [&str; 11] = [
        "betas",
        "alphas_cumprod",
        "alphas_cumprod_prev",
        "sqrt_alphas_cumprod",
        "sqrt_one_minus_alphas_cumprod",
        "log_one_minus_alphas_cumprod",
        "sqrt_recip_alphas_cumprod",
        "sqrt_recipm1_alphas_cumprod",
        "posterior_variance",
        "posterior_log_variance_clipped",
        "posterior_mean_coef1",
    ];
    BUFFERS.contains(&key)
        || key == "posterior_mean_coef2"
        || key == "logvar"
        || key == "lvlb_weights"
        || key.starts_with("model_ema.")
}

fn load_single_file(path: &Path, options: &LoadOptions) -> Result<Model> {
    let file = TensorFile::open(path)?;
    let shapes: HashMap<String, Vec<usize>> = file
        .tensors
        .iter()
        .map(|t| (t.name.clone(), t.shape.as_slice().to_vec()))
        .collect();
    let detected = detect(&shapes).map_err(|e| match e {
        NotDetected::Known(what) => Error::invalid_model(path, format!("this is {what}")),
        NotDetected::Unknown => Error::invalid_model(
            path,
            "not a Stable Diffusion checkpoint: none of the UNet, VAE and text-encoder keys of SD 1.x, SD 2.x or SDXL are there",
        ),
    })?;
    if detected.family != Family::Sd1 {
        return Err(Error::unsupported_model(
            path,
            format!("this is an {detected} checkpoint; Ember runs SD 1.x checkpoints so far"),
        ));
    }
    let preset = Configs {
        unet: UNetConfig::sd15(detected.unet_in_channels),
        vae: VaeConfig::sd(),
        clip: ClipConfig::vit_l14(),
    };
    let (configs, preset_hint) = match &options.config_dir {
        Some(dir) => (configs_from_dir(dir, preset)?, false),
        None => (preset, true),
    };
    let layout = UNetLayout {
        layers_per_block: configs.unet.layers_per_block,
        up_attention: configs.unet.up_attention.clone(),
    };
    let levels = configs.vae.block_out_channels.len();
    let total = file.tensors.len();
    let mut parts: [Vec<NamedTensor>; 3] = Default::default();
    let mut report = LoadReport::default();
    for mut tensor in file.tensors {
        let key = tensor.name.clone();
        let target = if let Some(rest) = key.strip_prefix("model.diffusion_model.") {
            keymap::ldm_unet_to_diffusers(rest, &layout).map(|k| (1, k))
        } else if let Some(rest) = key.strip_prefix("first_stage_model.") {
            keymap::ldm_vae_to_diffusers(rest, levels).map(|(k, conv_as_linear)| {
                if conv_as_linear && tensor.shape.len() == 4 {
                    // A [C, C, 1, 1] conv weight holds the same bytes as a [C, C] Linear weight.
                    tensor.shape = tensor.shape.as_slice()[..2].to_vec().into();
                }
                (2, k)
            })
        } else if let Some(rest) = key.strip_prefix("cond_stage_model.transformer.") {
            match keymap::ldm_clip_to_transformers(rest) {
                KeyTarget::Module(k) => Some((0, k)),
                KeyTarget::Ignored => {
                    report.ignored.push(key);
                    continue;
                }
                KeyTarget::Unknown => None,
            }
        } else if is_known_extra(&key) {
            report.ignored.push(key);
            continue;
        } else {
            None
        };
        match target {
            Some((component, diffusers_key)) => {
                tensor.name = keymap::diffusers_to_module(&diffusers_key);
                parts[component].push(NamedTensor {
                    tensor,
                    file_key: key,
                });
            }
            None => report.unknown.push(key),
        }
    }
    let (text_encoder, unet, vae, components) =
        assemble(&configs, parts, [path; 3], options, preset_hint)?;
    report.components = components;
    report.unknown.sort();
    let info = ModelInfo {
        path: path.to_path_buf(),
        name: display_name(path),
        layout: Layout::SingleFile(file.format),
        detected,
        tensor_count: total,
        report,
    };
    Ok(Model {
        info,
        tokenizer: ClipTokenizer::bundled(PadToken::EndOfText)?,
        text_encoder,
        unet,
        vae,
        native_size: native_size(&configs),
        text_layers: configs.clip.num_hidden_layers,
        vae_config: configs.vae,
        default_scheduler: None,
        prediction: Prediction::Epsilon,
        device: options.device.clone(),
        precision: options.precision,
    })
}

/// The weights of one diffusers component: the first of the usual file names present.
fn component_file(dir: &Path, component: &str, stem: &str) -> Result<PathBuf> {
    let folder = dir.join(component);
    let candidates = [
        format!("{stem}.safetensors"),
        format!("{stem}.fp16.safetensors"),
        format!("{stem}.bin"),
        format!("{stem}.fp16.bin"),
    ];
    candidates
        .iter()
        .map(|name| folder.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error::invalid_model(
                dir,
                format!("incomplete diffusers folder: {component}/{stem}.safetensors is missing"),
            )
        })
}

fn load_folder(dir: &Path, options: &LoadOptions) -> Result<Model> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .count();
    if entries == 0 {
        return Err(Error::invalid_model(
            dir,
            "the folder is empty; choose a diffusers model folder or a checkpoint file",
        ));
    }
    let index_path = dir.join("model_index.json");
    let index: Value = match std::fs::read_to_string(&index_path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| Error::invalid_model(&index_path, format!("not valid JSON ({e})")))?,
        Err(_) => {
            return Err(Error::invalid_model(
                dir,
                "not a diffusers model folder (no model_index.json); choose a checkpoint file or a folder with model_index.json",
            ));
        }
    };
    let class = index["_class_name"].as_str().unwrap_or("");
    if class.contains("XL") {
        return Err(Error::unsupported_model(
            dir,
            format!("this is an SDXL pipeline ({class}); Ember runs SD 1.x models so far"),
        ));
    }
    if !matches!(
        class,
        "StableDiffusionPipeline"
            | "StableDiffusionInpaintPipeline"
            | "StableDiffusionImg2ImgPipeline"
    ) {
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
    let missing = |c: &str| {
        Error::invalid_model(
            dir,
            format!("incomplete diffusers folder: {c}/config.json is missing"),
        )
    };
    let unet_text = read_json_config(dir, "unet")?.ok_or_else(|| missing("unet"))?;
    let vae_text = read_json_config(dir, "vae")?.ok_or_else(|| missing("vae"))?;
    let clip_text =
        read_json_config(dir, "text_encoder")?.ok_or_else(|| missing("text_encoder"))?;
    let tokenizer = ClipTokenizer::from_folder(&dir.join("tokenizer"))?;
    let configs = configs_from_dir(
        dir,
        Configs {
            unet: UNetConfig::from_json(&unet_text)?,
            vae: VaeConfig::from_json(&vae_text)?,
            clip: ClipConfig::from_json(&clip_text)?,
        },
    )?;
    let family = if tokenizer.pad_token() == PadToken::Exclamation {
        Family::Sd2
    } else {
        Family::Sd1
    };
    if family != Family::Sd1 {
        return Err(Error::unsupported_model(
            dir,
            "this is an SD 2.x pipeline; Ember runs SD 1.x models so far",
        ));
    }
    let scheduler =
        match std::fs::read_to_string(dir.join("scheduler").join("scheduler_config.json")) {
            Ok(text) => Some(SchedulerConfig::from_json(&text)),
            Err(_) => None,
        };

    let files = [
        component_file(dir, "text_encoder", "model")?,
        component_file(dir, "unet", "diffusion_pytorch_model")?,
        component_file(dir, "vae", "diffusion_pytorch_model")?,
    ];
    let mut parts: [Vec<NamedTensor>; 3] = Default::default();
    let mut report = LoadReport::default();
    let mut total = 0;
    let mut format = FileFormat::Safetensors;
    for (i, file_path) in files.iter().enumerate() {
        let file = TensorFile::open(file_path)?;
        format = file.format;
        total += file.tensors.len();
        for mut tensor in file.tensors {
            let key = tensor.name.clone();
            let target = if i == 0 {
                keymap::transformers_clip_key(&key)
            } else {
                KeyTarget::Module(key.clone())
            };
            match target {
                KeyTarget::Module(k) => {
                    tensor.name = keymap::diffusers_to_module(&k);
                    parts[i].push(NamedTensor {
                        tensor,
                        file_key: key,
                    });
                }
                KeyTarget::Ignored => report.ignored.push(key),
                KeyTarget::Unknown => report.unknown.push(key),
            }
        }
    }
    let (text_encoder, unet, vae, components) = assemble(
        &configs,
        parts,
        [files[0].as_path(), files[1].as_path(), files[2].as_path()],
        options,
        false,
    )?;
    report.components = components;
    let (default_scheduler, prediction) = match scheduler {
        Some(Ok(config)) => (Some(config.clone()), config.prediction),
        Some(Err(e)) => {
            report.warnings.push(format!(
                "scheduler/scheduler_config.json: {e}; using Ember's default sampler"
            ));
            (None, Prediction::Epsilon)
        }
        None => (None, Prediction::Epsilon),
    };
    let in_channels = configs.unet.in_channels;
    let info = ModelInfo {
        path: dir.to_path_buf(),
        name: display_name(dir),
        layout: Layout::DiffusersFolder(format),
        detected: Detected {
            family,
            inpainting: in_channels == 9,
            unet_in_channels: in_channels,
        },
        tensor_count: total,
        report,
    };
    Ok(Model {
        info,
        tokenizer,
        text_encoder,
        unet,
        vae,
        native_size: native_size(&configs),
        text_layers: configs.clip.num_hidden_layers,
        vae_config: configs.vae,
        default_scheduler,
        prediction,
        device: options.device.clone(),
        precision: options.precision,
    })
}

/// The size the UNet was trained at, in pixels.
fn native_size(configs: &Configs) -> (u32, u32) {
    let side = (configs.unet.sample_size * configs.vae.factor()) as u32;
    (side, side)
}

/// The name A1111 shows: the file name without extension, or the folder name.
fn display_name(path: &Path) -> String {
    path.file_stem()
        .or_else(|| path.file_name())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Tensor names and shapes of a file, for `ember info`.
pub fn tensor_shapes(tensors: &[PackTensor]) -> HashMap<String, Vec<usize>> {
    tensors
        .iter()
        .map(|t| (t.name.clone(), t.shape.as_slice().to_vec()))
        .collect()
}
