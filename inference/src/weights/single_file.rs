//! Single-file checkpoints (original LDM / A1111 / civitai layout, `.safetensors` or `.ckpt`).

use std::path::Path;

use super::apply::NamedTensor;
use super::detect::{Family, NotDetected, detect};
use super::keymap::{self, KeyTarget, UNetLayout};
use super::loader::{Configs, LoadOptions, Networks, Sources, Stages, display_name, tensor_shapes};
use super::source::TensorFile;
use crate::error::{Error, Result};
use crate::model::{Layout, LoadReport, Model, ModelInfo};
use crate::models::clip::ClipConfig;
use crate::models::unet::UNetConfig;
use crate::models::vae::VaeConfig;
use crate::text::{ClipTokenizer, PadToken};

/// Which network a key belongs to (index into `Sources::tensors`).
const TEXT_ENCODER: usize = 0;
const UNET: usize = 1;
const VAE: usize = 2;

/// DDPM buffers and EMA copies that real single-file checkpoints carry beside the networks.
fn is_known_extra(key: &str) -> bool {
    const BUFFERS: [&str; 14] = [
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
        "posterior_mean_coef2",
        "logvar",
        "lvlb_weights",
    ];
    BUFFERS.contains(&key) || key.starts_with("model_ema.")
}

/// Loads an SD 1.x single-file checkpoint.
pub(super) fn load(path: &Path, options: &LoadOptions, stages: &mut Stages<'_>) -> Result<Model> {
    let file = TensorFile::open(path)?;
    let detected = detect(&tensor_shapes(&file.tensors)).map_err(|e| match e {
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
    let (configs, from_preset) = match &options.config_dir {
        Some(dir) => (Configs::from_dir(dir, Some(preset))?, false),
        None => (preset, true),
    };
    let layout = UNetLayout {
        layers_per_block: configs.unet.layers_per_block,
        up_attention: configs.unet.up_attention.clone(),
    };
    let levels = configs.vae.block_out_channels.len();
    let total = file.tensors.len();
    let mut tensors: [Vec<NamedTensor>; 3] = Default::default();
    let mut report = LoadReport::default();
    for mut tensor in file.tensors {
        let key = tensor.name.clone();
        let target = if let Some(rest) = key.strip_prefix("model.diffusion_model.") {
            keymap::ldm_unet_to_diffusers(rest, &layout).map(|k| (UNET, k))
        } else if let Some(rest) = key.strip_prefix("first_stage_model.") {
            keymap::ldm_vae_to_diffusers(rest, levels).map(|(k, conv_as_linear)| {
                if conv_as_linear && tensor.shape.len() == 4 {
                    // A [C, C, 1, 1] conv weight holds the same bytes as a [C, C] Linear weight.
                    tensor.shape = tensor.shape.as_slice()[..2].to_vec().into();
                }
                (VAE, k)
            })
        } else if let Some(rest) = key.strip_prefix("cond_stage_model.transformer.") {
            match keymap::ldm_clip_to_transformers(rest) {
                KeyTarget::Module(k) => Some((TEXT_ENCODER, k)),
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
            Some((network, diffusers_key)) => {
                tensor.name = keymap::diffusers_to_module(&diffusers_key);
                tensors[network].push(NamedTensor {
                    tensor,
                    file_key: key,
                });
            }
            None => report.unknown.push(key),
        }
    }
    let networks = Networks::load(
        &configs,
        Sources {
            tensors,
            paths: [path; 3],
            from_preset,
        },
        options,
        stages,
    )?;
    report.components = networks.reports.clone();
    report.unknown.sort();
    let info = ModelInfo {
        path: path.to_path_buf(),
        name: display_name(path),
        layout: Layout::SingleFile(file.format),
        detected,
        tensor_count: total,
        report,
    };
    Ok(networks.into_model(
        configs,
        info,
        ClipTokenizer::bundled(PadToken::EndOfText)?,
        None,
        options,
    ))
}
