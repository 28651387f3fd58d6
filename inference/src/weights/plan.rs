//! What loading a model will take, read from its files' headers without loading a weight:
//! the family, the network architectures and the parameter count (for the memory check
//! before a long load).

use std::path::Path;

use super::configs::Configs;
use super::folder::{component_files, read_index};
use super::loader::LoadOptions;
use super::single_file::detect_file;
use super::source::TensorFile;
use crate::error::Result;
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
    /// Those of the text encoders (which wait in the computer's memory while a GPU short
    /// of memory runs the UNet).
    pub encoder_parameters: u64,
}

/// Reads a model's headers and configs; cheap even for a 7 GB checkpoint.
pub fn plan(path: &Path, options: &LoadOptions) -> Result<LoadPlan> {
    if path.is_dir() {
        return plan_folder(path);
    }
    let file = TensorFile::open(path)?;
    let detected = detect_file(path, &file)?;
    let family = detected.family;
    let configs = super::fit::resolve(path, &file, &detected, options)?.configs;
    let spec = family.spec();
    let loaded = |key: &str| {
        key.starts_with("model.diffusion_model.")
            || key.starts_with("first_stage_model.")
            || spec.encoders.iter().any(|e| key.starts_with(e.file_prefix))
    };
    let count = |keep: &dyn Fn(&str) -> bool| -> u64 {
        file.tensors
            .iter()
            .filter(|t| keep(&t.name))
            .map(|t| t.shape.as_slice().iter().product::<usize>() as u64)
            .sum()
    };
    let encoder = |key: &str| spec.encoders.iter().any(|e| key.starts_with(e.file_prefix));
    Ok(LoadPlan {
        family,
        unet: configs.unet,
        vae: configs.vae,
        parameters: count(&loaded),
        encoder_parameters: count(&encoder),
    })
}

fn plan_folder(dir: &Path) -> Result<LoadPlan> {
    let family = read_index(dir)?.family;
    let configs = Configs::from_dir(dir, family, None)?;
    // The same files the loader reads.
    let files = component_files(dir, family)?;
    let (mut parameters, mut encoder_parameters) = (0u64, 0u64);
    for file in files {
        let count = TensorFile::open(&file)?
            .tensors
            .iter()
            .map(|t| t.shape.as_slice().iter().product::<usize>() as u64)
            .sum::<u64>();
        parameters += count;
        // `text_encoder/…`, `text_encoder_2/…`.
        let component = file.strip_prefix(dir).ok().and_then(|p| p.iter().next());
        if component.is_some_and(|c| c.to_string_lossy().starts_with("text_encoder")) {
            encoder_parameters += count;
        }
    }
    Ok(LoadPlan {
        family,
        unet: configs.unet,
        vae: configs.vae,
        parameters,
        encoder_parameters,
    })
}
