//! A VAE on its own (A1111's `models/VAE/`, ComfyUI's `models/vae/`): a `.safetensors`,
//! `.pt` or `.ckpt` file in the original LDM key layout (`vae-ft-mse-840000-ema-pruned`,
//! `sdxl_vae.safetensors`) or in diffusers' (`diffusion_pytorch_model.safetensors`), or a
//! diffusers `AutoencoderKL` folder; read strictly into the architecture of the model it
//! will stand in for.

use std::path::{Path, PathBuf};

use super::apply::{ComponentReport, NamedTensor, apply_strict};
use super::keymap;
use super::loader::LoadOptions;
use super::source::TensorFile;
use crate::device::Precision;
use crate::error::{Error, Result};
use crate::models::vae::{Vae, VaeConfig};

/// A VAE read from its own file or folder.
pub struct VaeFile {
    pub path: PathBuf,
    /// As A1111 writes it in `VAE:`: the file name with its extension, or the folder's.
    pub name: String,
    pub vae: Vae,
    /// The architecture it was read into (the model's), with the file's own
    /// `force_upcast` where a folder's `config.json` gives one.
    pub config: VaeConfig,
    pub precision: Precision,
    pub report: ComponentReport,
    /// Keys that are not the VAE's: kept out, and said.
    pub ignored: Vec<String>,
}

/// Reads the VAE at `path` into the architecture `like` (the model's VAE's: a VAE file
/// carries no architecture, and must fit the model it decodes for).
pub fn load(path: &Path, like: &VaeConfig, options: &LoadOptions) -> Result<VaeFile> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::invalid_model(path, "no such VAE file or folder"),
        _ => Error::io(path, e),
    })?;
    let mut config = like.clone();
    // Released VAEs overflow in f16 (the black image); only a config can say otherwise.
    config.force_upcast = true;
    let weights = if meta.is_dir() {
        let (weights, folder_config) = folder_files(path)?;
        if let Some(own) = folder_config {
            check_architecture(path, &own, like)?;
            config.force_upcast = own.force_upcast;
        }
        weights
    } else {
        path.to_path_buf()
    };
    let file = TensorFile::open(&weights)?;
    let levels = config.block_out_channels.len();
    let mut tensors = Vec::new();
    let mut ignored = Vec::new();
    let mut unknown = Vec::new();
    for mut tensor in file.tensors {
        let key = tensor.name.clone();
        if key.starts_with("model.diffusion_model.") {
            return Err(Error::invalid_model(
                path,
                "this is a whole checkpoint (it has a UNet), not a VAE; load it as the model, \
                 or choose a VAE file",
            ));
        }
        let bare = ["first_stage_model.", "vae."]
            .iter()
            .find_map(|p| key.strip_prefix(p))
            .unwrap_or(&key);
        // A1111 drops a trained VAE's loss network and EMA counters the same way.
        if bare.starts_with("loss.") || bare.starts_with("model_ema.") {
            ignored.push(key);
            continue;
        }
        let Some((diffusers_key, conv_as_linear)) = vae_key(bare, levels) else {
            unknown.push(key);
            continue;
        };
        if conv_as_linear && tensor.shape.len() == 4 {
            // A [C, C, 1, 1] conv weight holds the same bytes as a [C, C] Linear.
            tensor.shape = tensor.shape.as_slice()[..2].to_vec().into();
        }
        tensor.name = keymap::diffusers_to_module(&diffusers_key);
        tensors.push(NamedTensor {
            tensor,
            file_key: key,
        });
    }
    if tensors.is_empty() {
        return Err(Error::invalid_model(
            path,
            "not a VAE: none of its tensors is a VAE encoder's or decoder's",
        ));
    }
    let precision = options.vae_precision(&config);
    let (vae, mut report) = apply_strict(
        config.init(&options.device),
        tensors,
        ("VAE", weights.as_path()),
        precision.dtype(),
        None,
    )
    .map_err(|e| fit_hint(e, like))?;
    report.unused.extend(unknown);
    Ok(VaeFile {
        path: path.to_path_buf(),
        name: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        vae,
        config,
        precision,
        report,
        ignored,
    })
}

/// A key of either layout as its diffusers key, and whether it is a 1x1 convolution stored
/// where diffusers has a Linear.
fn vae_key(key: &str, levels: usize) -> Option<(String, bool)> {
    let diffusers_layout = [
        ".down_blocks.",
        ".up_blocks.",
        ".mid_block.",
        ".conv_norm_out.",
    ]
    .iter()
    .any(|part| key.contains(part));
    if !diffusers_layout {
        return keymap::ldm_vae_to_diffusers(key, levels);
    }
    // diffusers before 0.14 named the mid-block attention's layers `query`, `key`,
    // `value`, `proj_attn` (sd-vae-ft-mse's folder still does); diffusers renames them.
    const DEPRECATED: [(&str, &str); 4] = [
        (".query.", ".to_q."),
        (".key.", ".to_k."),
        (".value.", ".to_v."),
        (".proj_attn.", ".to_out.0."),
    ];
    let renamed = DEPRECATED
        .iter()
        .find(|(old, _)| key.contains(old))
        .map_or_else(|| key.to_string(), |(old, new)| key.replacen(old, new, 1));
    let conv_as_linear = renamed.contains(".attentions.")
        && renamed.ends_with(".weight")
        && !renamed.contains("group_norm");
    Some((renamed, conv_as_linear))
}

/// A diffusers VAE folder's weights and its config, if it has one.
fn folder_files(dir: &Path) -> Result<(PathBuf, Option<VaeConfig>)> {
    if dir.join("model_index.json").is_file() || dir.join("unet").is_dir() {
        return Err(Error::invalid_model(
            dir,
            "this is a whole model folder, not a VAE; load it as the model, or choose its vae/ \
             folder",
        ));
    }
    let weights = ["safetensors", "fp16.safetensors", "bin", "fp16.bin"]
        .iter()
        .map(|ext| dir.join(format!("diffusion_pytorch_model.{ext}")))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Error::invalid_model(
                dir,
                "not a VAE folder: it has no diffusion_pytorch_model.safetensors",
            )
        })?;
    let config_file = dir.join("config.json");
    let config = if config_file.is_file() {
        let text = std::fs::read_to_string(&config_file).map_err(|e| Error::io(&config_file, e))?;
        Some(
            VaeConfig::from_json(&text)
                .map_err(|e| Error::invalid_model(&config_file, e.to_string()))?,
        )
    } else {
        None
    };
    Ok((weights, config))
}

/// A folder whose own config is another architecture than the model's VAE fails before
/// its weights are read, saying both.
fn check_architecture(path: &Path, own: &VaeConfig, like: &VaeConfig) -> Result<()> {
    if own.same_network(like) {
        return Ok(());
    }
    Err(Error::invalid_model(
        path,
        format!(
            "this VAE does not fit the model: it has {} latent channels and widths {:?}, the \
             model's VAE {} and {:?}; choose a VAE made for this model's family",
            own.latent_channels,
            own.block_out_channels,
            like.latent_channels,
            like.block_out_channels
        ),
    ))
}

/// A shape error means a VAE of another architecture (SD 3's 16 latent channels, say).
fn fit_hint(e: Error, like: &VaeConfig) -> Error {
    match e {
        Error::Weights { path, message } if message.contains("has shape") => Error::Weights {
            path,
            message: format!(
                "{message}: this VAE does not fit the model (whose VAE has {} latent channels); \
                 choose a VAE made for this model's family",
                like.latent_channels
            ),
        },
        other => other,
    }
}
