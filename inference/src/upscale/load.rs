//! Loading ESRGAN / Real-ESRGAN weights in every RRDBNet key layout spandrel reads: old
//! ESRGAN (`model.0`, `model.1.sub.N.RDBk.convj.0`, …), new basicsr / Real-ESRGAN
//! (`conv_first`, `body.N.rdbk.convj`, `conv_up1`, …) and BSRGAN / RealSR (`RRDB_trunk`,
//! `trunk_conv`, `upconv1`, `HRconv`). The architecture comes from the tensor shapes.

use std::collections::HashMap;
use std::path::Path;

use burn::store::burn_pack::Tensor as PackTensor;

use super::rrdbnet::{RrdbConfig, RrdbNet};
use crate::device::Precision;
use crate::error::{Error, Result};
use crate::weights::apply::{NamedTensor, apply_strict};
use crate::weights::source::TensorFile;

/// A loaded upscaler and what it is.
pub struct UpscaleModel {
    pub network: RrdbNet,
    pub config: RrdbConfig,
    /// The file's stem, as A1111 names an upscaler (`4x-UltraSharp`).
    pub name: String,
    pub device: burn::tensor::Device,
}

impl UpscaleModel {
    /// The net scale of one pass (4 for x4 models, 2 for Real-ESRGAN x2plus).
    pub fn scale(&self) -> usize {
        self.config.scale()
    }
}

/// Loads an ESRGAN-family upscaler from a `.pth` (read without executing code) or a
/// `.safetensors` file, in float32.
pub fn load(path: &Path, device: &burn::tensor::Device) -> Result<UpscaleModel> {
    let file = TensorFile::open(path)?;
    let mut renamed = Vec::with_capacity(file.tensors.len());
    let names: Vec<&str> = file.tensors.iter().map(|t| t.name.as_str()).collect();
    let layout = Layout::detect(&names).ok_or_else(|| not_esrgan(path, &names))?;
    let max_model_index = names
        .iter()
        .filter_map(|n| {
            n.strip_prefix("model.")?
                .split('.')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .max()
        .unwrap_or(0);
    let blocks = count_blocks(&names, layout);
    let mut ignored = Vec::new();
    for mut tensor in file.tensors {
        let key = tensor.name.clone();
        match ember_name(&key, layout, blocks, max_model_index) {
            Some(name) => {
                tensor.name = name;
                renamed.push(tensor);
            }
            None => ignored.push(key),
        }
    }
    if let Some(key) = ignored.first() {
        return Err(Error::unsupported_model(
            path,
            format!(
                "tensor `{key}` is not part of an ESRGAN RRDBNet ({} such tensors): the file is \
                 another kind of upscaler (ESRGAN+, SwinIR, …) that Ember does not run yet",
                ignored.len()
            ),
        ));
    }
    let config = config_from(&renamed, blocks, path)?;
    let tensors = renamed
        .into_iter()
        .map(|tensor| NamedTensor {
            file_key: tensor.name.clone(),
            tensor,
        })
        .collect();
    let (network, _report) = apply_strict(
        config.init(device),
        tensors,
        ("upscaler", path),
        Precision::F32.dtype(),
        None,
    )?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(UpscaleModel {
        network,
        config,
        name,
        device: device.clone(),
    })
}

fn not_esrgan(path: &Path, names: &[&str]) -> Error {
    let looks_like_sd = names
        .iter()
        .any(|n| n.starts_with("model.diffusion_model.") || n.starts_with("first_stage_model."));
    let what = if looks_like_sd {
        "it is a Stable Diffusion checkpoint; load it as the model instead"
    } else {
        "none of its tensors has an ESRGAN name (`conv_first`, `body.0.rdb1`, or the old \
         `model.1.sub.0.RDB1`); Ember runs ESRGAN / Real-ESRGAN (RRDBNet) upscalers"
    };
    Error::unsupported_model(path, format!("not an ESRGAN upscaler: {what}"))
}

/// The key layouts RRDBNet files come in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// Original ESRGAN: one `model` sequential.
    Old,
    /// basicsr / Real-ESRGAN.
    New,
    /// BSRGAN / RealSR.
    Trunk,
}

impl Layout {
    fn detect(names: &[&str]) -> Option<Self> {
        let has = |k: &str| names.contains(&k);
        if has("model.0.weight") && names.iter().any(|n| n.starts_with("model.1.sub.0.RDB1.")) {
            Some(Layout::Old)
        } else if has("conv_first.weight") && has("body.0.rdb1.conv1.weight") {
            Some(Layout::New)
        } else if has("conv_first.weight") && has("RRDB_trunk.0.RDB1.conv1.weight") {
            Some(Layout::Trunk)
        } else {
            None
        }
    }
}

/// RRDB blocks in the file: one more than the largest block index.
fn count_blocks(names: &[&str], layout: Layout) -> usize {
    let prefix = match layout {
        Layout::Old => "model.1.sub.",
        Layout::New => "body.",
        Layout::Trunk => "RRDB_trunk.",
    };
    names
        .iter()
        .filter_map(|n| {
            let rest = n.strip_prefix(prefix)?;
            let (index, rest) = rest.split_once('.')?;
            // The old layout's conv_body is `model.1.sub.<blocks>.weight`: not a block.
            rest.to_ascii_lowercase()
                .starts_with("rdb")
                .then(|| index.parse::<usize>().ok())?
        })
        .max()
        .map_or(0, |m| m + 1)
}

/// Ember's module path for a file key, or `None` when it is not an RRDBNet tensor.
fn ember_name(key: &str, layout: Layout, blocks: usize, max_model_index: usize) -> Option<String> {
    let (module, kind) = key.rsplit_once('.')?;
    if kind != "weight" && kind != "bias" {
        return None;
    }
    let target = match layout {
        Layout::Old => old_module(module, blocks, max_model_index)?,
        Layout::New | Layout::Trunk => new_module(module)?,
    };
    Some(format!("{target}.{kind}"))
}

/// A dense-block conv path `N.RDBk.convj` (either case) as `body.N.rdbk.convj`.
fn dense_conv(rest: &str) -> Option<String> {
    let mut parts = rest.split('.');
    let block: usize = parts.next()?.parse().ok()?;
    let rdb = parts.next()?.to_ascii_lowercase();
    let conv = parts.next()?;
    let k: usize = rdb.strip_prefix("rdb")?.parse().ok()?;
    let j: usize = conv.strip_prefix("conv")?.parse().ok()?;
    ((1..=3).contains(&k) && (1..=5).contains(&j) && parts.next().is_none())
        .then(|| format!("body.{block}.rdb{k}.conv{j}"))
}

fn new_module(module: &str) -> Option<String> {
    let direct = match module {
        "conv_first" => Some("conv_first"),
        "conv_body" | "trunk_conv" => Some("conv_body"),
        "conv_hr" | "HRconv" => Some("conv_hr"),
        "conv_last" => Some("conv_last"),
        _ => None,
    };
    if let Some(d) = direct {
        return Some(d.to_string());
    }
    if let Some(rest) = module
        .strip_prefix("body.")
        .or_else(|| module.strip_prefix("RRDB_trunk."))
    {
        return dense_conv(rest);
    }
    let n: usize = module
        .strip_prefix("conv_up")
        .or_else(|| module.strip_prefix("upconv"))?
        .parse()
        .ok()?;
    (n >= 1).then(|| format!("conv_ups.{}", n - 1))
}

/// The old sequential: `model.0` conv_first, `model.1.sub.{i}` blocks then conv_body,
/// `model.{3k}` the k-th upsampling conv, then `model.{3n+2}` conv_hr and `model.{3n+4}`
/// conv_last (the indices between are upsamples and LeakyReLUs without weights).
fn old_module(module: &str, blocks: usize, max_index: usize) -> Option<String> {
    let rest = module.strip_prefix("model.")?;
    if rest == "0" {
        return Some("conv_first".into());
    }
    if let Some(sub) = rest.strip_prefix("1.sub.") {
        if sub == blocks.to_string() {
            return Some("conv_body".into());
        }
        return dense_conv(sub.strip_suffix(".0")?);
    }
    let index: usize = rest.parse().ok()?;
    let upsamples = max_index.checked_sub(4)? / 3;
    if index == max_index {
        Some("conv_last".into())
    } else if index == 3 * upsamples + 2 {
        Some("conv_hr".into())
    } else if index.is_multiple_of(3) && (1..=upsamples).contains(&(index / 3)) {
        Some(format!("conv_ups.{}", index / 3 - 1))
    } else {
        None
    }
}

/// The architecture from the renamed tensors' shapes.
fn config_from(tensors: &[PackTensor], blocks: usize, path: &Path) -> Result<RrdbConfig> {
    let shapes: HashMap<&str, &[usize]> = tensors
        .iter()
        .map(|t| (t.name.as_str(), t.shape.as_slice()))
        .collect();
    let shape = |name: &str| -> Result<&[usize]> {
        shapes
            .get(name)
            .copied()
            .filter(|s| s.len() == 4)
            .ok_or_else(|| {
                Error::weights(
                    path,
                    format!(
                        "the upscaler lacks a 4-D `{name}` (Ember's name); the file is incomplete"
                    ),
                )
            })
    };
    let first = shape("conv_first.weight")?;
    let last = shape("conv_last.weight")?;
    let growth = shape("body.0.rdb1.conv1.weight")?[0];
    let upsamples = (0..)
        .take_while(|i| shapes.contains_key(format!("conv_ups.{i}.weight").as_str()))
        .count();
    let (in_channels, out_channels) = (first[1], last[0]);
    // Real-ESRGAN's x2 / x1 models unshuffle the image first (spandrel's test).
    let unshuffle = match in_channels.checked_div(out_channels) {
        Some(4) if in_channels % out_channels == 0 => 2,
        Some(16) if in_channels % out_channels == 0 => 4,
        _ => 1,
    };
    let config = RrdbConfig {
        in_channels,
        out_channels,
        features: first[0],
        growth,
        blocks,
        upsamples,
        unshuffle,
    };
    if out_channels != 3 || in_channels / (unshuffle * unshuffle) != 3 {
        return Err(Error::unsupported_model(
            path,
            format!(
                "an ESRGAN model for {} input and {out_channels} output channels; Ember upscales \
                 RGB images (3 channels)",
                in_channels / (unshuffle * unshuffle)
            ),
        ));
    }
    if upsamples > 3 || (1 << upsamples) < unshuffle {
        return Err(Error::unsupported_model(
            path,
            format!(
                "an ESRGAN model with {upsamples} upsampling steps and a pixel unshuffle of {unshuffle}: not a scale Ember runs"
            ),
        ));
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_keys_map_by_position_in_the_sequential() {
        // x4 with 23 blocks: conv_body model.1.sub.23, ups model.3 / model.6, hr model.8,
        // last model.10.
        let name = |k: &str| ember_name(k, Layout::Old, 23, 10);
        assert_eq!(name("model.0.weight").unwrap(), "conv_first.weight");
        assert_eq!(
            name("model.1.sub.22.RDB3.conv5.0.bias").unwrap(),
            "body.22.rdb3.conv5.bias"
        );
        assert_eq!(name("model.1.sub.23.weight").unwrap(), "conv_body.weight");
        assert_eq!(name("model.3.weight").unwrap(), "conv_ups.0.weight");
        assert_eq!(name("model.6.bias").unwrap(), "conv_ups.1.bias");
        assert_eq!(name("model.8.weight").unwrap(), "conv_hr.weight");
        assert_eq!(name("model.10.weight").unwrap(), "conv_last.weight");
        assert_eq!(name("model.4.weight"), None);
        // An old x2 model: one upsample, hr model.5, last model.7.
        let x2 = |k: &str| ember_name(k, Layout::Old, 23, 7);
        assert_eq!(x2("model.5.weight").unwrap(), "conv_hr.weight");
        assert_eq!(x2("model.7.weight").unwrap(), "conv_last.weight");
    }

    #[test]
    fn new_and_trunk_keys_share_ember_names() {
        let new = |k: &str| ember_name(k, Layout::New, 2, 0);
        assert_eq!(new("conv_up2.weight").unwrap(), "conv_ups.1.weight");
        assert_eq!(new("upconv1.bias").unwrap(), "conv_ups.0.bias");
        assert_eq!(new("HRconv.weight").unwrap(), "conv_hr.weight");
        assert_eq!(new("trunk_conv.weight").unwrap(), "conv_body.weight");
        assert_eq!(
            new("RRDB_trunk.1.RDB2.conv4.weight").unwrap(),
            "body.1.rdb2.conv4.weight"
        );
        assert_eq!(new("body.0.rdb4.conv1.weight"), None);
        assert_eq!(new("body.0.rdb1.conv1x1.weight"), None);
    }
}
