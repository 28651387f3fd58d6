//! Which architecture a single-file checkpoint gets: the family's released one, or, for a
//! file of another size, a config folder found beside it. A few telling shapes (the UNet's
//! first conv, each text encoder's embedding width, the VAE's first conv) decide, so a
//! models list can ask without loading a weight.

use std::path::{Path, PathBuf};

use super::configs::{Configs, check_unet_channels};
use super::detect::Detected;
use super::folder::read_index;
use super::loader::LoadOptions;
use super::source::TensorFile;
use crate::error::{Error, Result};

/// The architecture a file is loaded with, and where it came from.
pub(super) struct Resolved {
    pub configs: Configs,
    /// The released architecture (no config folder).
    pub from_preset: bool,
    /// The config folder used: the caller's, or one found beside the file.
    pub config_dir: Option<PathBuf>,
}

/// The configs for `file`: the caller's config folder; else the released architecture when
/// the file fits it; else a fitting config folder beside the file (see [`find_config_dir`]);
/// else [`Error::NeedsConfig`].
pub(super) fn resolve(
    path: &Path,
    file: &TensorFile,
    detected: &Detected,
    options: &LoadOptions,
) -> Result<Resolved> {
    let preset = || Configs::preset(detected.family, detected.unet_in_channels);
    // The file's own UNet input decides, whatever architecture describes the rest.
    check_unet_channels(&preset(), path)?;
    if let Some(dir) = &options.config_dir {
        return Ok(Resolved {
            configs: Configs::from_dir(dir, detected.family, Some(preset()))?,
            from_preset: false,
            config_dir: Some(dir.clone()),
        });
    }
    let released = preset();
    let Some(why) = mismatch(file, &released) else {
        return Ok(Resolved {
            configs: released,
            from_preset: true,
            config_dir: None,
        });
    };
    match find_config_dir(path, file, detected) {
        Some((dir, configs)) => Ok(Resolved {
            configs,
            from_preset: false,
            config_dir: Some(dir),
        }),
        None => Err(Error::NeedsConfig {
            path: path.to_path_buf(),
            message: format!(
                "{why}: this {} checkpoint is not the released size and no config folder \
                 beside it fits. Choose its config folder (a diffusers folder whose unet/, \
                 vae/ and text_encoder/ config.json describe it; --config DIR on the command line)",
                detected.family.spec().label
            ),
        }),
    }
}

/// Why `file` does not have the architecture `configs` describes, if it does not.
pub(super) fn mismatch(file: &TensorFile, configs: &Configs) -> Option<String> {
    let width = |name: &str, axis: usize| {
        file.tensors
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.shape.as_slice().get(axis).copied())
    };
    let unet = configs.unet.block_out_channels.first().copied();
    let found = width("model.diffusion_model.input_blocks.0.0.weight", 0);
    if found.is_some() && found != unet {
        return Some(format!(
            "the UNet's first layer has {} channels where this architecture has {}",
            found.unwrap_or_default(),
            unet.unwrap_or_default()
        ));
    }
    let addition = configs.unet.addition.as_ref().map(|a| a.input_dim);
    let found = width("model.diffusion_model.label_emb.0.0.weight", 1);
    if found.is_some() && found != addition {
        return Some(format!(
            "the UNet's added conditioning is {} wide where this architecture's is {}",
            found.unwrap_or_default(),
            addition.unwrap_or_default()
        ));
    }
    let vae = configs.vae.block_out_channels.first().copied();
    let found = width("first_stage_model.encoder.conv_in.weight", 0);
    if found.is_some() && found != vae {
        return Some(format!(
            "the VAE's first layer has {} channels where this architecture has {}",
            found.unwrap_or_default(),
            vae.unwrap_or_default()
        ));
    }
    let spec = configs.family.spec();
    for (encoder, config) in spec.encoders.iter().zip(&configs.encoders) {
        let found = file
            .tensors
            .iter()
            .find(|t| {
                t.name.starts_with(encoder.file_prefix)
                    && t.name.ends_with("token_embedding.weight")
            })
            .and_then(|t| t.shape.as_slice().get(1).copied());
        if found.is_some_and(|w| w != config.hidden_size) {
            return Some(format!(
                "the text encoder is {} wide where this architecture has {}",
                found.unwrap_or_default(),
                config.hidden_size
            ));
        }
    }
    None
}

/// A config folder that fits `file`: a folder of the file's stem beside it, else a
/// diffusers folder (with `model_index.json`) in the file's folder or the two above it
/// (A1111's `models/Stable-diffusion/…`), nearest first.
pub(super) fn find_config_dir(
    path: &Path,
    file: &TensorFile,
    detected: &Detected,
) -> Option<(PathBuf, Configs)> {
    let mut candidates = vec![path.with_extension("")];
    for dir in path.ancestors().skip(1).take(3) {
        let Ok(read) = std::fs::read_dir(dir) else {
            continue;
        };
        // Only folders of the same family (an SDXL base folder never describes a refiner).
        let mut found: Vec<PathBuf> = read
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("model_index.json").is_file())
            .filter(|p| read_index(p).is_ok_and(|i| i.family == detected.family))
            .collect();
        found.sort();
        candidates.extend(found);
    }
    let preset = || Configs::preset(detected.family, detected.unet_in_channels);
    candidates
        .into_iter()
        .filter(|d| d.is_dir())
        .find_map(|dir| {
            let configs = Configs::from_dir(&dir, detected.family, Some(preset())).ok()?;
            mismatch(file, &configs).is_none().then_some((dir, configs))
        })
}
