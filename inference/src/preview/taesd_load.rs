//! Finding and loading TAESD decoders in every layout artists have them in: the original
//! repository's `taesd_decoder.pth` / `.safetensors` (an `nn.Sequential`: `1.weight`,
//! `3.conv.0.weight`, …, as A1111 and ComfyUI download them) and diffusers'
//! `AutoencoderTiny` (`decoder.layers.0.weight`, …: a `madebyollin/taesd` folder or its file).
//! The architecture comes from the tensors; `taesd` or `taesdxl` from the model's family.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::store::burn_pack::Tensor as PackTensor;

use super::taesd::{TaesdConfig, TaesdDecoder};
use crate::device::Precision;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::weights::apply::{NamedTensor, apply_strict};
use crate::weights::source::TensorFile;

/// A loaded decoder and the file it came from.
pub struct Taesd {
    pub decoder: TaesdDecoder,
    pub config: TaesdConfig,
    pub path: PathBuf,
}

/// The decoder's name for a family's latents: `taesd` (SD 1.x, 2.x) or `taesdxl` (SDXL).
pub fn decoder_stem(family: Family) -> &'static str {
    match family {
        Family::Sd1 | Family::Sd2 => "taesd",
        Family::Sdxl | Family::SdxlRefiner => "taesdxl",
    }
}

/// The first decoder for `family`'s latents in `dirs`: `taesd_decoder.safetensors` or
/// `.pth` (A1111, ComfyUI), `taesd.safetensors`, or a diffusers folder `taesd/`
/// (`taesdxl…` for SDXL).
pub fn find(dirs: &[PathBuf], family: Family) -> Option<PathBuf> {
    let stem = decoder_stem(family);
    let names = [
        format!("{stem}_decoder.safetensors"),
        format!("{stem}_decoder.pth"),
        format!("{stem}.safetensors"),
        stem.to_string(),
    ];
    dirs.iter()
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file() || p.join(DIFFUSERS_FILE).is_file())
}

/// The weights file of a diffusers `AutoencoderTiny` folder.
const DIFFUSERS_FILE: &str = "diffusion_pytorch_model.safetensors";

/// Loads a TAESD decoder (a file, or a diffusers folder) in float32.
pub fn load(path: &Path, device: &burn::tensor::Device) -> Result<Taesd> {
    let file = if path.is_dir() {
        path.join(DIFFUSERS_FILE)
    } else {
        path.to_path_buf()
    };
    let tensors = TensorFile::open(&file)?.tensors;
    let layers = sequential_layers(tensors, &file)?;
    let (config, named) = ember_names(layers, &file)?;
    let (decoder, report) = apply_strict(
        config.init(device),
        named,
        ("TAESD decoder", &file),
        Precision::F32.dtype(),
        None,
    )?;
    if let Some(key) = report.unused.first() {
        return Err(not_taesd(
            &file,
            &format!("it has a tensor `{key}` TAESD's decoder lacks"),
        ));
    }
    Ok(Taesd {
        decoder,
        config,
        path: path.to_path_buf(),
    })
}

fn not_taesd(path: &Path, why: &str) -> Error {
    Error::unsupported_model(
        path,
        format!(
            "not a TAESD decoder of SD 1.x, 2.x or SDXL latents: {why} (Ember reads \
             taesd_decoder.pth / taesdxl_decoder.pth and diffusers' madebyollin/taesd folders)"
        ),
    )
}

/// One entry of the decoder's `nn.Sequential`, by what its tensors are.
enum Layer {
    /// A convolution: `weight` and maybe `bias`.
    Conv(Vec<(String, PackTensor)>),
    /// A residual block: `conv.0`, `conv.2`, `conv.4`.
    Block(Vec<(String, PackTensor)>),
}

/// The decoder's tensors by index in its sequential, whatever the prefix: none or
/// `decoder.` / `taesd_decoder.` (original layout), `decoder.layers.` / `layers.`
/// (diffusers). An encoder's tensors beside it are left out; anything else is an error.
fn sequential_layers(tensors: Vec<PackTensor>, path: &Path) -> Result<BTreeMap<usize, Layer>> {
    let mut layers = BTreeMap::new();
    for tensor in tensors {
        let key = tensor.name.clone();
        if key.starts_with("encoder.") || key.starts_with("taesd_encoder.") {
            continue;
        }
        let rest = ["decoder.layers.", "layers.", "taesd_decoder.", "decoder."]
            .iter()
            .find_map(|p| key.strip_prefix(p))
            .unwrap_or(&key);
        let parsed = rest
            .split_once('.')
            .and_then(|(index, inner)| Some((index.parse::<usize>().ok()?, inner)));
        let Some((index, inner)) = parsed else {
            return Err(not_taesd(
                path,
                &format!("tensor `{key}` is not one of its layers"),
            ));
        };
        let is_block = inner.starts_with("conv.");
        if inner.starts_with("skip.") || inner.starts_with("pool.") {
            return Err(not_taesd(
                path,
                &format!("tensor `{key}` belongs to another TAESD (FLUX.2's or Sana's)"),
            ));
        }
        let entry = layers.entry(index).or_insert_with(|| {
            if is_block {
                Layer::Block(Vec::new())
            } else {
                Layer::Conv(Vec::new())
            }
        });
        match entry {
            Layer::Block(t) if is_block => t.push((inner.to_string(), tensor)),
            Layer::Conv(t) if !is_block && matches!(inner, "weight" | "bias") => {
                t.push((inner.to_string(), tensor))
            }
            _ => {
                return Err(not_taesd(
                    path,
                    &format!("tensor `{key}` is not one of its layers"),
                ));
            }
        }
    }
    if layers.is_empty() {
        return Err(not_taesd(path, "it holds no decoder tensors"));
    }
    Ok(layers)
}

/// The architecture and Ember's module path for each tensor: the first convolution is
/// `conv_in`, blocks fill a stage, a convolution between blocks is that stage's upsample
/// convolution, the last one `conv_out`.
fn ember_names(
    layers: BTreeMap<usize, Layer>,
    path: &Path,
) -> Result<(TaesdConfig, Vec<NamedTensor>)> {
    let count = layers.len();
    let mut named = Vec::new();
    let mut blocks = vec![0usize];
    let mut conv_in = None;
    let mut conv_out = None;
    let mut push = |module: String, tensors: Vec<(String, PackTensor)>| {
        for (kind, mut tensor) in tensors {
            let file_key = tensor.name.clone();
            tensor.name = format!("{module}.{kind}");
            named.push(NamedTensor { tensor, file_key });
        }
    };
    let mut previous: Option<(usize, bool)> = None;
    for (position, (index, layer)) in layers.into_iter().enumerate() {
        let stage = blocks.len() - 1;
        let is_block = matches!(layer, Layer::Block(_));
        // The weightless layers between: a ReLU after the first convolution, an upsample
        // before each upsample convolution; nothing else. A gap elsewhere is a lost block.
        if let Some((before, block_before)) = previous {
            let gap = match (block_before, is_block) {
                (false, true) if position == 1 => 2,
                (true, false) if position + 1 < count => 2,
                _ => 1,
            };
            if index != before + gap {
                return Err(not_taesd(
                    path,
                    &format!(
                        "its layers are not in TAESD's order (a layer {index} after {before})"
                    ),
                ));
            }
        }
        previous = Some((index, is_block));
        match layer {
            Layer::Conv(tensors) if position == 0 => {
                conv_in = weight_shape(&tensors);
                push("conv_in".into(), tensors);
            }
            Layer::Conv(tensors) if position + 1 == count => {
                conv_out = weight_shape(&tensors);
                push("conv_out".into(), tensors);
            }
            Layer::Conv(tensors) => {
                push(format!("stages.{stage}.upsample"), tensors);
                blocks.push(0);
            }
            Layer::Block(tensors) => {
                let block = blocks[stage];
                blocks[stage] += 1;
                for (inner, tensor) in tensors {
                    let Some((conv, kind)) = inner.strip_prefix("conv.").and_then(|r| {
                        let (i, kind) = r.split_once('.')?;
                        let conv = match i {
                            "0" => 1,
                            "2" => 2,
                            "4" => 3,
                            _ => return None,
                        };
                        Some((conv, kind.to_string()))
                    }) else {
                        return Err(not_taesd(
                            path,
                            &format!("tensor `{}` is not part of a TAESD block", tensor.name),
                        ));
                    };
                    push(
                        format!("stages.{stage}.blocks.{block}.conv{conv}"),
                        vec![(kind, tensor)],
                    );
                }
            }
        }
    }
    let (Some(first), Some(last)) = (conv_in, conv_out) else {
        return Err(not_taesd(path, "it lacks its first or last convolution"));
    };
    let config = TaesdConfig {
        latent_channels: first[1],
        channels: first[0],
        blocks,
    };
    if last[0] != 3 || last[1] != config.channels {
        return Err(not_taesd(
            path,
            &format!(
                "its last convolution has shape {last:?}, not [3, {}, 3, 3]",
                config.channels
            ),
        ));
    }
    if config.blocks.contains(&0) || config.scale() > 16 {
        return Err(not_taesd(path, "its layers are not in TAESD's order"));
    }
    Ok((config, named))
}

/// A convolution's 4-D weight shape, if it has one.
fn weight_shape(tensors: &[(String, PackTensor)]) -> Option<[usize; 4]> {
    let (_, w) = tensors.iter().find(|(kind, _)| kind == "weight")?;
    w.shape.as_slice().try_into().ok()
}

/// Checks that `taesd` decodes `family`'s latents (a TAESD for SD3's or FLUX's 16 channels
/// loads but cannot).
pub fn check_latents(taesd: &Taesd, family: Family) -> Result<()> {
    let want = family.spec().latent_channels;
    if taesd.config.latent_channels == want {
        return Ok(());
    }
    Err(Error::unsupported_model(
        &taesd.path,
        format!(
            "this TAESD decodes {}-channel latents (SD3's or FLUX's: taesd3, taef1); {} latents \
             have {want}: use {}_decoder.pth",
            taesd.config.latent_channels,
            family.spec().label,
            decoder_stem(family)
        ),
    ))
}
