//! What a checkpoint file or model folder holds, without loading its weights (`ember info`).

use std::collections::BTreeMap;
use std::path::Path;

use super::detect::{NotDetected, detect};
use super::loader::tensor_shapes;
use super::source::TensorFile;
use crate::error::{Error, Result};

/// A summary of a model on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// `single file (safetensors)`, `diffusers folder`, ...
    pub layout: String,
    /// The detected family (`SD 1.x inpainting`) or what the file is instead.
    pub family: String,
    pub tensor_count: usize,
    pub parameter_count: u64,
    /// Tensor counts by stored dtype (`F16: 1131`).
    pub dtypes: BTreeMap<String, usize>,
}

/// Inspects a checkpoint file or a diffusers folder.
pub fn inspect(path: &Path) -> Result<CheckpointInfo> {
    if path.is_dir() {
        return inspect_folder(path);
    }
    let file = TensorFile::open(path)?;
    let shapes = tensor_shapes(&file.tensors);
    let family = match detect(&shapes) {
        Ok(mut d) => {
            let hints = super::prediction::file_hints(path, None).unwrap_or_default();
            d.prediction = d.prediction.or(hints.prediction);
            let released = super::configs::Configs::preset(d.family, d.unet_in_channels);
            let size = match super::fit::mismatch(&file, &released) {
                None => "",
                Some(_) if super::fit::find_config_dir(path, &file, &d).is_some() => {
                    " (non-standard size, config folder beside it)"
                }
                Some(_) => " (non-standard size: needs its config folder)",
            };
            format!("{d}{size}")
        }
        Err(NotDetected::Known(what)) => format!("not a full model: {what}"),
        Err(NotDetected::Unknown) => "unknown (not a Stable Diffusion checkpoint)".to_string(),
    };
    let mut info = summarize(&file);
    info.layout = format!("single file ({})", file.format.name());
    info.family = family;
    Ok(info)
}

fn summarize(file: &TensorFile) -> CheckpointInfo {
    let mut dtypes = BTreeMap::new();
    let mut parameter_count = 0u64;
    for t in &file.tensors {
        *dtypes.entry(format!("{:?}", t.dtype)).or_insert(0) += 1;
        parameter_count += t.shape.as_slice().iter().product::<usize>() as u64;
    }
    CheckpointInfo {
        layout: String::new(),
        family: String::new(),
        tensor_count: file.tensors.len(),
        parameter_count,
        dtypes,
    }
}

fn inspect_folder(dir: &Path) -> Result<CheckpointInfo> {
    let index_path = dir.join("model_index.json");
    let index: serde_json::Value = std::fs::read_to_string(&index_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| {
            Error::invalid_model(
                dir,
                "not a diffusers model folder (no readable model_index.json)",
            )
        })?;
    let class = index["_class_name"]
        .as_str()
        .unwrap_or("unknown pipeline")
        .to_string();
    let mut total = CheckpointInfo {
        layout: format!("diffusers folder ({class})"),
        family: String::new(),
        tensor_count: 0,
        parameter_count: 0,
        dtypes: BTreeMap::new(),
    };
    for component in ["unet", "vae", "text_encoder", "text_encoder_2"] {
        let Some(file) = std::fs::read_dir(dir.join(component))
            .ok()
            .and_then(|entries| {
                entries.filter_map(|e| e.ok().map(|e| e.path())).find(|p| {
                    p.extension()
                        .is_some_and(|x| x == "safetensors" || x == "bin")
                })
            })
        else {
            continue;
        };
        let part = summarize(&TensorFile::open(&file)?);
        total.tensor_count += part.tensor_count;
        total.parameter_count += part.parameter_count;
        for (k, v) in part.dtypes {
            *total.dtypes.entry(k).or_insert(0) += v;
        }
    }
    let unet_in = std::fs::read_to_string(dir.join("unet/config.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["in_channels"].as_u64());
    let scheduler_file = dir.join("scheduler/scheduler_config.json");
    let facts = match std::fs::read_to_string(&scheduler_file) {
        Ok(text) => Some(
            crate::schedule::diffusers::SchedulerConfig::model_facts(&text)
                .map_err(|e| Error::invalid_model(&scheduler_file, e.to_string()))?,
        ),
        Err(_) => None,
    };
    let family = super::folder::read_index(dir)?.family;
    let mut detected = super::detect::Detected::plain(family, unet_in.unwrap_or(4) as usize);
    detected.prediction = facts.map(|(prediction, _)| prediction);
    detected.zero_terminal_snr = facts.is_some_and(|(_, zero_snr)| zero_snr);
    total.family = detected.to_string();
    Ok(total)
}
