//! What loading a model will take, read from its files' headers without loading a weight:
//! the family, the network architectures and the parameter count (for the memory check
//! before a long load).

use std::path::Path;

use super::detect::{NotDetected, detect};
use super::folder::read_index;
use super::loader::{Configs, LoadOptions, tensor_shapes};
use super::source::TensorFile;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::models::unet::UNetConfig;
use crate::models::vae::VaeConfig;

/// A model as its files describe it.
#[derive(Clone, Debug)]
pub struct LoadPlan {
    pub family: Family,
    pub unet: UNetConfig,
    pub vae: VaeConfig,
    /// Parameters of the networks Ember loads (text encoders, UNet, VAE).
    pub parameters: u64,
}

/// Reads a model's headers and configs; cheap even for a 7 GB checkpoint.
pub fn plan(path: &Path, options: &LoadOptions) -> Result<LoadPlan> {
    if path.is_dir() {
        return plan_folder(path);
    }
    let file = TensorFile::open(path)?;
    let detected = detect(&tensor_shapes(&file.tensors)).map_err(|e| match e {
        NotDetected::Known(what) => Error::invalid_model(path, format!("this is {what}")),
        NotDetected::Unknown => Error::invalid_model(path, "not a Stable Diffusion checkpoint"),
    })?;
    let family = detected.family;
    let preset = Configs::preset(family, detected.unet_in_channels);
    let configs = match &options.config_dir {
        Some(dir) => Configs::from_dir(dir, family, Some(preset))?,
        None => preset,
    };
    let spec = family.spec();
    let loaded = |key: &str| {
        key.starts_with("model.diffusion_model.")
            || key.starts_with("first_stage_model.")
            || spec.encoders.iter().any(|e| key.starts_with(e.file_prefix))
    };
    let parameters = file
        .tensors
        .iter()
        .filter(|t| loaded(&t.name))
        .map(|t| t.shape.as_slice().iter().product::<usize>() as u64)
        .sum();
    Ok(LoadPlan {
        family,
        unet: configs.unet,
        vae: configs.vae,
        parameters,
    })
}

fn plan_folder(dir: &Path) -> Result<LoadPlan> {
    let family = read_index(dir)?.family;
    let configs = Configs::from_dir(dir, family, None)?;
    let mut parts: Vec<&str> = family.spec().encoders.iter().map(|e| e.folder).collect();
    parts.extend(["unet", "vae"]);
    let mut parameters = 0u64;
    for part in parts {
        let Ok(entries) = std::fs::read_dir(dir.join(part)) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.extension()
                .is_some_and(|x| x == "safetensors" || x == "bin")
            {
                parameters += TensorFile::open(&p)?
                    .tensors
                    .iter()
                    .map(|t| t.shape.as_slice().iter().product::<usize>() as u64)
                    .sum::<u64>();
                break;
            }
        }
    }
    Ok(LoadPlan {
        family,
        unet: configs.unet,
        vae: configs.vae,
        parameters,
    })
}
