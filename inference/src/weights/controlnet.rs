//! Loading a ControlNet from a diffusers folder (`config.json` +
//! `diffusion_pytorch_model.safetensors`), strictly like every other network.

use std::path::Path;

use super::apply::{NamedTensor, apply_strict};
use super::keymap::diffusers_to_module;
use super::loader::LoadOptions;
use super::source::TensorFile;
use crate::error::{Error, Result};
use crate::models::controlnet::{ControlNet, ControlNetConfig};

/// Weight file names a diffusers ControlNet folder may hold, preferred first.
const WEIGHT_FILES: [&str; 2] = [
    "diffusion_pytorch_model.safetensors",
    "diffusion_pytorch_model.bin",
];

/// A ControlNet from a diffusers folder.
pub fn load_folder(dir: &Path, options: &LoadOptions) -> Result<ControlNet> {
    let config_path = dir.join("config.json");
    let text = std::fs::read_to_string(&config_path).map_err(|e| Error::io(&config_path, e))?;
    let config = ControlNetConfig::from_json(&text)
        .map_err(|e| Error::invalid_model(&config_path, e.to_string()))?;
    let weights = WEIGHT_FILES
        .iter()
        .map(|name| dir.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
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
