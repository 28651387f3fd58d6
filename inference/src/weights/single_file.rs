//! Single-file checkpoints (original LDM / SGM / A1111 / civitai layout, `.safetensors` or
//! `.ckpt`) of every family: keys routed to their networks and renamed, OpenCLIP encoders
//! converted, the prediction type worked out.

use std::path::Path;

use burn::store::burn_pack::Tensor as PackTensor;

use super::apply::NamedTensor;
use super::configs::Configs;
use super::detect::{Detected, NotDetected, V_PRED_KEY, ZTSNR_KEY, detect};
use super::keymap::{self, KeyTarget, OpenClipTarget, UNetLayout};
use super::loader::{LoadOptions, Networks, Sources, Stages, display_name, tensor_shapes};
use super::prediction;
use super::source::TensorFile;
use crate::error::{Error, Result};
use crate::family::{EncoderFileLayout, Family};
use crate::model::{Layout, LoadReport, Model, ModelInfo};
use crate::schedule::diffusers::Prediction;
use crate::text::ClipTokenizer;

/// DDPM buffers, EMA copies and markers that real single-file checkpoints carry beside the
/// networks.
fn is_known_extra(key: &str) -> bool {
    const BUFFERS: [&str; 16] = [
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
        V_PRED_KEY,
        ZTSNR_KEY,
    ];
    BUFFERS.contains(&key) || key.starts_with("model_ema.")
}

/// Where one key of the file goes.
enum Route {
    /// Network index (text encoders first, then the UNet, then the VAE) and tensors.
    Load(usize, Vec<(String, PackTensor)>),
    Ignored,
    Unknown,
}

/// The detected family, or an error saying what the file is instead.
pub(super) fn detect_file(path: &Path, file: &TensorFile) -> Result<Detected> {
    detect(&tensor_shapes(&file.tensors)).map_err(|e| match e {
        NotDetected::Known(what) => Error::invalid_model(path, format!("this is {what}")),
        NotDetected::Unknown => Error::invalid_model(
            path,
            "not a Stable Diffusion checkpoint: none of the UNet, VAE and text-encoder keys of SD 1.x, SD 2.x or SDXL are there",
        ),
    })
}

/// Loads a single-file checkpoint.
pub(super) fn load(path: &Path, options: &LoadOptions, stages: &mut Stages<'_>) -> Result<Model> {
    let file = TensorFile::open(path)?;
    let mut detected = detect_file(path, &file)?;
    let family = detected.family;
    let spec = family.spec();
    let resolved = super::fit::resolve(path, &file, &detected, options)?;
    let (mut configs, from_preset) = (resolved.configs, resolved.from_preset);
    let config_dir = resolved.config_dir;
    configs.check_fit(config_dir.as_deref().unwrap_or(path))?;
    let hints = prediction::file_hints(path, config_dir.as_deref())?;
    detected.prediction = detected.prediction.or(hints.prediction);
    detected.zero_terminal_snr |= hints.zero_terminal_snr;

    let layout = UNetLayout {
        layers_per_block: configs.unet.layers_per_block,
        up_attention: configs.unet.up_attention.clone(),
    };
    let levels = configs.vae.block_out_channels.len();
    let encoders = spec.encoders.len();
    let (unet_index, vae_index) = (encoders, encoders + 1);
    let total = file.tensors.len();
    let rereadable = file.format == super::source::FileFormat::Safetensors;
    let mut tensors: Vec<Vec<NamedTensor>> = (0..encoders + 2).map(|_| Vec::new()).collect();
    let mut report = LoadReport::default();
    if options.config_dir.is_none()
        && let Some(dir) = &config_dir
    {
        report.warnings.push(format!(
            "not the released size: its architecture comes from {}, found beside it",
            dir.display()
        ));
    }
    for tensor in file.tensors {
        let key = tensor.name.clone();
        let route = if let Some(rest) = key.strip_prefix("model.diffusion_model.") {
            match keymap::ldm_unet_to_diffusers(rest, &layout) {
                Some(k) => Route::Load(unet_index, vec![(k, tensor)]),
                None => Route::Unknown,
            }
        } else if let Some(rest) = key.strip_prefix("first_stage_model.") {
            match keymap::ldm_vae_to_diffusers(rest, levels) {
                Some((k, conv_as_linear)) => {
                    let mut tensor = tensor;
                    if conv_as_linear && tensor.shape.len() == 4 {
                        // A [C, C, 1, 1] conv weight holds the same bytes as a [C, C] Linear.
                        tensor.shape = tensor.shape.as_slice()[..2].to_vec().into();
                    }
                    Route::Load(vae_index, vec![(k, tensor)])
                }
                None => Route::Unknown,
            }
        } else if let Some((i, rest)) = spec
            .encoders
            .iter()
            .enumerate()
            .find_map(|(i, e)| key.strip_prefix(e.file_prefix).map(|r| (i, r)))
        {
            route_encoder(
                i,
                rest,
                tensor,
                spec.encoders[i].file_layout,
                &configs,
                path,
            )?
        } else if is_known_extra(&key) {
            Route::Ignored
        } else {
            Route::Unknown
        };
        match route {
            Route::Load(network, parts) => {
                for (diffusers_key, mut tensor) in parts {
                    tensor.name = keymap::diffusers_to_module(&diffusers_key);
                    tensors[network].push(NamedTensor {
                        tensor,
                        file_key: key.clone(),
                    });
                }
            }
            Route::Ignored => report.ignored.push(key),
            Route::Unknown => report.unknown.push(key),
        }
    }
    // For naming missing tensors as the file would (only used on that error).
    let present: Vec<Vec<String>> = tensors
        .iter()
        .map(|network| {
            let mut keys: Vec<String> = network.iter().map(|t| t.file_key.clone()).collect();
            keys.dedup();
            keys
        })
        .collect();
    let routes = |i: usize, key: &str| -> Vec<String> {
        let targets: Vec<String> = if i == unet_index {
            key.strip_prefix("model.diffusion_model.")
                .and_then(|rest| keymap::ldm_unet_to_diffusers(rest, &layout))
                .into_iter()
                .collect()
        } else if i == vae_index {
            key.strip_prefix("first_stage_model.")
                .and_then(|rest| keymap::ldm_vae_to_diffusers(rest, levels))
                .map(|(k, _)| k)
                .into_iter()
                .collect()
        } else {
            encoder_targets(spec.encoders[i].file_layout, &configs, i, key)
        };
        targets
            .iter()
            .map(|k| keymap::diffusers_to_module(k))
            .collect()
    };
    let file_names = |i: usize, missing: &str| {
        super::file_names::file_name_for(missing, &present[i], &|key| routes(i, key))
    };
    let vae = (tensors.pop().unwrap_or_default(), path);
    let unet = (tensors.pop().unwrap_or_default(), path);
    let sources = Sources {
        encoders: tensors.into_iter().map(|t| (t, path)).collect(),
        unet,
        vae,
        from_preset,
        file_names: Some(&file_names),
        rereadable,
    };
    let networks = Networks::load(&configs, sources, options, stages)?;
    // SD 2.x inpainting models are epsilon models (A1111's and ComfyUI's rule).
    if family == Family::Sd2 && detected.inpainting && detected.prediction.is_none() {
        detected.prediction = Some(Prediction::Epsilon);
    }
    if family == Family::Sd2 && detected.prediction.is_none() && options.prediction.is_none() {
        let v = prediction::probe_sd2_v_prediction(networks.unet(), &options.device);
        detected.prediction = Some(if v {
            Prediction::V
        } else {
            Prediction::Epsilon
        });
        report.warnings.push(format!(
            "the file does not say whether it predicts noise or v; a test step says {} (A1111's check). Put an A1111 .yaml beside it or pass --prediction to be sure",
            if v { "v (a 768-v model)" } else { "noise (a 512 base model)" }
        ));
    }
    let said = options.prediction.or(detected.prediction);
    if family == Family::Sd2 && from_preset && said != Some(Prediction::V) {
        // SD 2.x 512 base models are epsilon models; the 768 ones predict v.
        configs.unet.sample_size = 64;
    }
    report.components = networks.reports.clone();
    report.unknown.sort();
    let tokenizers = spec
        .encoders
        .iter()
        .map(|e| ClipTokenizer::bundled(e.pad))
        .collect::<Result<Vec<_>>>()?;
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
        tokenizers,
        None,
        spec.zero_empty_negative,
        options,
    ))
}

/// Routes a text-encoder key (without its prefix) of encoder `i`.
fn route_encoder(
    i: usize,
    rest: &str,
    tensor: PackTensor,
    layout: EncoderFileLayout,
    configs: &Configs,
    path: &Path,
) -> Result<Route> {
    let config = &configs.encoders[i];
    Ok(match layout {
        EncoderFileLayout::Transformers => match keymap::ldm_clip_to_transformers(rest) {
            KeyTarget::Module(k) => Route::Load(i, vec![(k, tensor)]),
            KeyTarget::Ignored => Route::Ignored,
            KeyTarget::Unknown => Route::Unknown,
        },
        EncoderFileLayout::OpenClip => {
            let target = keymap::open_clip_to_transformers(
                rest,
                config.num_hidden_layers,
                config.projection_dim.is_some(),
            );
            match target {
                OpenClipTarget::Module(k) => Route::Load(i, vec![(k, tensor)]),
                OpenClipTarget::Split(keys) => {
                    let parts = split_rows(&tensor, path)?;
                    Route::Load(i, keys.into_iter().zip(parts).collect())
                }
                OpenClipTarget::Transposed(k) => {
                    Route::Load(i, vec![(k, transposed(&tensor, path)?)])
                }
                OpenClipTarget::Ignored => Route::Ignored,
                OpenClipTarget::Unknown => Route::Unknown,
            }
        }
    })
}

/// The transformers keys a key of encoder `i` of a single file loads into (none when it is
/// not this encoder's).
fn encoder_targets(
    layout: EncoderFileLayout,
    configs: &Configs,
    i: usize,
    key: &str,
) -> Vec<String> {
    let prefix = configs.family.spec().encoders[i].file_prefix;
    let Some(rest) = key.strip_prefix(prefix) else {
        return Vec::new();
    };
    let config = &configs.encoders[i];
    match layout {
        EncoderFileLayout::Transformers => match keymap::ldm_clip_to_transformers(rest) {
            KeyTarget::Module(k) => vec![k],
            _ => Vec::new(),
        },
        EncoderFileLayout::OpenClip => match keymap::open_clip_to_transformers(
            rest,
            config.num_hidden_layers,
            config.projection_dim.is_some(),
        ) {
            OpenClipTarget::Module(k) | OpenClipTarget::Transposed(k) => vec![k],
            OpenClipTarget::Split(keys) => keys.to_vec(),
            OpenClipTarget::Ignored | OpenClipTarget::Unknown => Vec::new(),
        },
    }
}

/// OpenCLIP's fused `in_proj` (`[3 * hidden, ...]`, rows `[q; k; v]`) as three lazy tensors.
fn split_rows(t: &PackTensor, path: &Path) -> Result<[PackTensor; 3]> {
    let shape = t.shape.as_slice().to_vec();
    if shape.is_empty() || !shape[0].is_multiple_of(3) {
        return Err(Error::weights(
            path,
            format!(
                "text encoder tensor `{}` has shape {shape:?}; a fused attention projection has 3 x hidden rows",
                t.name
            ),
        ));
    }
    let len = t.byte_len() / 3;
    let mut part_shape = shape;
    part_shape[0] /= 3;
    Ok([0, 1, 2].map(|part| {
        let parent = t.clone();
        PackTensor::deferred(
            format!("{}[{part}]", t.name),
            t.dtype,
            part_shape.clone(),
            None,
            len,
            move || {
                let bytes = parent.to_bytes()?;
                Ok(burn::tensor::Bytes::from_bytes_vec(
                    bytes[part * len..(part + 1) * len].to_vec(),
                ))
            },
        )
    }))
}

/// OpenCLIP's `text_projection` (`[hidden, projection]`, applied as `x @ P`) as the lazy
/// transformers Linear weight `P^T`.
fn transposed(t: &PackTensor, path: &Path) -> Result<PackTensor> {
    let &[rows, cols] = t.shape.as_slice() else {
        return Err(Error::weights(
            path,
            format!(
                "text encoder tensor `{}` has shape {:?}; a text projection is a matrix",
                t.name,
                t.shape.as_slice()
            ),
        ));
    };
    let element = t.dtype.size();
    let parent = t.clone();
    Ok(PackTensor::deferred(
        t.name.clone(),
        t.dtype,
        vec![cols, rows],
        None,
        t.byte_len(),
        move || {
            let src = parent.to_bytes()?;
            let mut out = vec![0u8; src.len()];
            for r in 0..rows {
                for c in 0..cols {
                    let from = (r * cols + c) * element;
                    let to = (c * rows + r) * element;
                    out[to..to + element].copy_from_slice(&src[from..from + element]);
                }
            }
            Ok(burn::tensor::Bytes::from_bytes_vec(out))
        },
    ))
}
