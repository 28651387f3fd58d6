//! Loading a ControlNet, strictly like every other network: a diffusers folder
//! (`config.json` + `diffusion_pytorch_model.safetensors`) or an original single file
//! (`control_v11p_sd15_*.safetensors` / `.pth`, keys `control_model.*`).

use std::path::Path;

use super::apply::{NamedTensor, apply_strict};
use super::keymap::{UNetLayout, diffusers_to_module, ldm_unet_to_diffusers};
use super::loader::LoadOptions;
use super::source::TensorFile;
use crate::error::{Error, Result};
use crate::models::controlnet::{ControlNet, ControlNetConfig};

/// Weight file names a diffusers ControlNet folder may hold, preferred first.
const WEIGHT_FILES: [&str; 2] = [
    "diffusion_pytorch_model.safetensors",
    "diffusion_pytorch_model.bin",
];

/// A ControlNet from a diffusers folder or a single file.
pub fn load(path: &Path, options: &LoadOptions) -> Result<ControlNet> {
    if path.is_dir() {
        load_folder(path, options)
    } else {
        load_single_file(path, options)
    }
}

/// The `config.json` of a diffusers ControlNet folder.
fn read_config(dir: &Path) -> Result<ControlNetConfig> {
    let config_path = dir.join("config.json");
    let text = std::fs::read_to_string(&config_path).map_err(|e| Error::io(&config_path, e))?;
    ControlNetConfig::from_json(&text)
        .map_err(|e| Error::invalid_model(&config_path, e.to_string()))
}

/// The weights file of a diffusers ControlNet folder, if it has one.
pub fn folder_weights(dir: &Path) -> Option<std::path::PathBuf> {
    WEIGHT_FILES
        .iter()
        .map(|name| dir.join(name))
        .find(|p| p.is_file())
}

/// The architecture of the ControlNet at `path`: a folder's `config.json`; for a single
/// file, the `config.json` in its folder when there is one, else SD 1.5's.
pub fn config_of(path: &Path) -> Result<ControlNetConfig> {
    if path.is_dir() {
        return read_config(path);
    }
    match path.parent().filter(|d| d.join("config.json").is_file()) {
        Some(dir) => read_config(dir),
        None => Ok(ControlNetConfig {
            unet: crate::models::unet::UNetConfig::sd15(4),
            embedding_channels: vec![16, 32, 96, 256],
            conditioning_channels: 3,
        }),
    }
}

/// Why a ControlNet of `config` cannot guide a UNet of `unet`, if it cannot: its residuals
/// must have the UNet's skip connections' shapes and it must read the same conditioning.
pub fn check_fit(
    config: &ControlNetConfig,
    unet: &crate::models::unet::UNetConfig,
) -> std::result::Result<(), String> {
    let c = &config.unet;
    let family = |cross: usize, added: bool| match (cross, added) {
        (768, false) => " (SD 1.x)",
        (1024, false) => " (SD 2.x)",
        (2048, true) => " (SDXL)",
        _ => "",
    };
    if c.cross_attention_dim != unet.cross_attention_dim
        || c.addition.is_some() != unet.addition.is_some()
    {
        return Err(format!(
            "it reads {}-wide text{}{}, and the loaded model {}-wide{}{}: use a ControlNet made \
             for the model's family",
            c.cross_attention_dim,
            if c.addition.is_some() {
                " with pooled text and size ids"
            } else {
                ""
            },
            family(c.cross_attention_dim, c.addition.is_some()),
            unet.cross_attention_dim,
            if unet.addition.is_some() {
                " with pooled text and size ids"
            } else {
                ""
            },
            family(unet.cross_attention_dim, unet.addition.is_some()),
        ));
    }
    if c.block_out_channels != unet.block_out_channels
        || c.layers_per_block != unet.layers_per_block
    {
        return Err(format!(
            "its blocks have {:?} channels ({} layers each), the model's UNet {:?} ({}): it was \
             made for another architecture",
            c.block_out_channels,
            c.layers_per_block,
            unet.block_out_channels,
            unet.layers_per_block
        ));
    }
    Ok(())
}

/// A ControlNet from a diffusers folder.
pub fn load_folder(dir: &Path, options: &LoadOptions) -> Result<ControlNet> {
    let config = read_config(dir)?;
    let weights = folder_weights(dir).ok_or_else(|| {
        Error::invalid_model(
            dir,
            "a ControlNet folder without diffusion_pytorch_model weights",
        )
    })?;
    let file = TensorFile::open(&weights)?;
    let tensors = file
        .tensors
        .into_iter()
        .map(|mut tensor| {
            let key = tensor.name.clone();
            tensor.name = diffusers_to_module(&key);
            NamedTensor {
                tensor,
                file_key: key,
            }
        })
        .collect();
    let (network, _report) = apply_strict(
        config.init(&options.device),
        tensors,
        ("ControlNet", &weights),
        options.precision.dtype(),
        None,
    )?;
    Ok(network)
}

/// A ControlNet from an original single file. Its architecture is the `config.json` in the
/// file's folder when there is one (a diffusers ControlNet config), else SD 1.5's.
pub fn load_single_file(path: &Path, options: &LoadOptions) -> Result<ControlNet> {
    let config = config_of(path)?;
    let layout = UNetLayout {
        layers_per_block: config.unet.layers_per_block,
        up_attention: config.unet.up_attention.clone(),
    };
    let file = TensorFile::open(path)?;
    let mut tensors = Vec::with_capacity(file.tensors.len());
    for mut tensor in file.tensors {
        let key = tensor.name.clone();
        let Some(diffusers) = key
            .strip_prefix("control_model.")
            .and_then(|k| ldm_key(k, &layout))
        else {
            continue; // Not the ControlNet's (A1111 files hold nothing else).
        };
        tensor.name = diffusers_to_module(&diffusers);
        tensors.push(NamedTensor {
            tensor,
            file_key: key,
        });
    }
    if tensors.is_empty() {
        return Err(Error::invalid_model(
            path,
            "not a ControlNet: no `control_model.` tensors (a checkpoint or a LoRA?)",
        ));
    }
    let (network, _report) = apply_strict(
        config.init(&options.device),
        tensors,
        ("ControlNet", path),
        options.precision.dtype(),
        None,
    )?;
    Ok(network)
}

/// A single file's ControlNet key (without `control_model.`) as its diffusers key.
fn ldm_key(key: &str, layout: &UNetLayout) -> Option<String> {
    let (head, rest) = key.split_once('.')?;
    match head {
        "zero_convs" => {
            let (k, rest) = rest.split_once('.')?;
            let rest = rest.strip_prefix("0.")?;
            Some(format!("controlnet_down_blocks.{k}.{rest}"))
        }
        "middle_block_out" => Some(format!("controlnet_mid_block.{}", rest.strip_prefix("0.")?)),
        "input_hint_block" => {
            let (i, rest) = rest.split_once('.')?;
            let i: usize = i.parse().ok()?;
            let target = match i {
                0 => "conv_in".to_string(),
                14 => "conv_out".to_string(),
                i if i % 2 == 0 => format!("blocks.{}", i / 2 - 1),
                _ => return None,
            };
            Some(format!("controlnet_cond_embedding.{target}.{rest}"))
        }
        _ => ldm_unet_to_diffusers(key, layout),
    }
}
