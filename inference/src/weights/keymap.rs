//! Key maps: file key names to module paths.
//!
//! diffusers names are the module paths, except where a diffusers `ModuleList` holds a
//! Dropout between layers (`to_out.0`, `ff.net.0.proj`, `ff.net.2`). Single-file
//! (original LDM / A1111 / civitai) checkpoints use CompVis names; these maps follow
//! diffusers' `convert_ldm_*_checkpoint` (`loaders/single_file_utils.py`) and the table in
//! `../shared/reference/README.md`. Tested on key lists, no weights needed.

/// What to do with one key of a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyTarget {
    /// Load it into this module path.
    Module(String),
    /// A buffer real checkpoints carry that no module needs (DDPM schedule, position ids).
    Ignored,
    /// Not part of any component Ember knows (reported as unused).
    Unknown,
}

/// A diffusers state-dict key to the module path.
pub fn diffusers_to_module(key: &str) -> String {
    key.replace(".to_out.0.", ".to_out.")
        .replace(".ff.net.0.proj.", ".ff.geglu.")
        .replace(".ff.net.2.", ".ff.out.")
}

/// The diffusers key of an Ember module path (the inverse of [`diffusers_to_module`]).
pub fn module_to_diffusers(path: &str) -> String {
    path.replace(".to_out.", ".to_out.0.")
        .replace(".ff.geglu.", ".ff.net.0.proj.")
        .replace(".ff.out.", ".ff.net.2.")
}

/// The structure the UNet map needs: layers per block and which up blocks have attention.
#[derive(Clone, Debug)]
pub struct UNetLayout {
    pub layers_per_block: usize,
    pub up_attention: Vec<bool>,
}

/// An LDM UNet key (without `model.diffusion_model.`) to its diffusers key.
pub fn ldm_unet_to_diffusers(key: &str, layout: &UNetLayout) -> Option<String> {
    let l = layout.layers_per_block;
    let (head, rest) = split_first(key)?;
    let mapped = match head {
        "time_embed" => {
            let (i, rest) = split_first(rest)?;
            let linear = match i {
                "0" => "linear_1",
                "2" => "linear_2",
                _ => return None,
            };
            format!("time_embedding.{linear}.{rest}")
        }
        "label_emb" => {
            let rest = rest.strip_prefix("0.")?;
            let (i, rest) = split_first(rest)?;
            let linear = match i {
                "0" => "linear_1",
                "2" => "linear_2",
                _ => return None,
            };
            format!("add_embedding.{linear}.{rest}")
        }
        "input_blocks" => {
            let (k, rest) = split_index(rest)?;
            let (m, rest) = split_index(rest)?;
            if k == 0 {
                (m == 0).then(|| format!("conv_in.{rest}"))?
            } else {
                let (i, j) = ((k - 1) / (l + 1), (k - 1) % (l + 1));
                match (j < l, m) {
                    (true, 0) => format!("down_blocks.{i}.resnets.{j}.{}", ldm_resnet(rest)?),
                    (true, 1) => format!("down_blocks.{i}.attentions.{j}.{rest}"),
                    (false, 0) => format!(
                        "down_blocks.{i}.downsamplers.0.conv.{}",
                        rest.strip_prefix("op.")?
                    ),
                    _ => return None,
                }
            }
        }
        "middle_block" => {
            let (m, rest) = split_index(rest)?;
            match m {
                0 => format!("mid_block.resnets.0.{}", ldm_resnet(rest)?),
                1 => format!("mid_block.attentions.0.{rest}"),
                2 => format!("mid_block.resnets.1.{}", ldm_resnet(rest)?),
                _ => return None,
            }
        }
        "output_blocks" => {
            let (k, rest) = split_index(rest)?;
            let (m, rest) = split_index(rest)?;
            let (b, j) = (k / (l + 1), k % (l + 1));
            let has_attention = *layout.up_attention.get(b)?;
            match m {
                0 => format!("up_blocks.{b}.resnets.{j}.{}", ldm_resnet(rest)?),
                1 if has_attention => format!("up_blocks.{b}.attentions.{j}.{rest}"),
                1 | 2 if j == l => format!("up_blocks.{b}.upsamplers.0.{rest}"),
                _ => return None,
            }
        }
        "out" => {
            let (i, rest) = split_first(rest)?;
            match i {
                "0" => format!("conv_norm_out.{rest}"),
                "2" => format!("conv_out.{rest}"),
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(mapped)
}

/// LDM resnet inner names to diffusers'.
fn ldm_resnet(rest: &str) -> Option<String> {
    const MAP: [(&str, &str); 6] = [
        ("in_layers.0.", "norm1."),
        ("in_layers.2.", "conv1."),
        ("emb_layers.1.", "time_emb_proj."),
        ("out_layers.0.", "norm2."),
        ("out_layers.3.", "conv2."),
        ("skip_connection.", "conv_shortcut."),
    ];
    MAP.iter()
        .find_map(|(ldm, diffusers)| rest.strip_prefix(ldm).map(|r| format!("{diffusers}{r}")))
}

/// An LDM VAE key (without `first_stage_model.`) to its diffusers key, and whether the
/// tensor is a 1x1 convolution weight that diffusers stores as a Linear weight.
pub fn ldm_vae_to_diffusers(key: &str, levels: usize) -> Option<(String, bool)> {
    let (part, rest) = split_first(key)?;
    if !matches!(part, "encoder" | "decoder") {
        return matches!(part, "quant_conv" | "post_quant_conv").then(|| (key.to_string(), false));
    }
    let (head, rest) = split_first(rest)?;
    let mapped = match head {
        "conv_in" | "conv_out" => format!("{part}.{head}.{rest}"),
        "norm_out" => format!("{part}.conv_norm_out.{rest}"),
        "down" | "up" => {
            let (k, rest) = split_index(rest)?;
            // LDM numbers decoder levels by resolution; diffusers' up_blocks.0 is the lowest.
            let i = if head == "up" {
                levels.checked_sub(1 + k)?
            } else {
                k
            };
            let blocks = if head == "up" {
                "up_blocks"
            } else {
                "down_blocks"
            };
            let (kind, rest) = split_first(rest)?;
            match kind {
                "block" => {
                    let (j, rest) = split_index(rest)?;
                    format!(
                        "{part}.{blocks}.{i}.resnets.{j}.{}",
                        rest.replace("nin_shortcut.", "conv_shortcut.")
                    )
                }
                "downsample" => format!("{part}.{blocks}.{i}.downsamplers.0.{rest}"),
                "upsample" => format!("{part}.{blocks}.{i}.upsamplers.0.{rest}"),
                _ => return None,
            }
        }
        "mid" => {
            let (kind, rest) = split_first(rest)?;
            match kind {
                "block_1" => format!("{part}.mid_block.resnets.0.{rest}"),
                "block_2" => format!("{part}.mid_block.resnets.1.{rest}"),
                "attn_1" => {
                    let (name, rest) = split_first(rest)?;
                    let (target, conv_as_linear) = match name {
                        "norm" => ("group_norm", false),
                        "q" => ("to_q", true),
                        "k" => ("to_k", true),
                        "v" => ("to_v", true),
                        "proj_out" => ("to_out.0", true),
                        _ => return None,
                    };
                    return Some((
                        format!("{part}.mid_block.attentions.0.{target}.{rest}"),
                        conv_as_linear && rest == "weight",
                    ));
                }
                _ => return None,
            }
        }
        _ => return None,
    };
    Some((mapped, false))
}

/// A single-file text-encoder key (without `cond_stage_model.transformer.`) to its
/// transformers key. Older checkpoints omit the `text_model.` level.
pub fn ldm_clip_to_transformers(key: &str) -> KeyTarget {
    let key = key.strip_prefix("text_model.").unwrap_or(key);
    if key == "embeddings.position_ids" {
        return KeyTarget::Ignored;
    }
    if key.starts_with("embeddings.")
        || key.starts_with("encoder.")
        || key.starts_with("final_layer_norm.")
    {
        KeyTarget::Module(format!("text_model.{key}"))
    } else {
        KeyTarget::Unknown
    }
}

/// Where an OpenCLIP text-encoder key of a single file goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpenClipTarget {
    /// One transformers key.
    Module(String),
    /// The fused attention input projection (`in_proj_weight` / `in_proj_bias`, rows
    /// `[q; k; v]`): these three transformers keys, in order.
    Split([String; 3]),
    /// `text_projection`, stored as `[hidden, projection]` (`x @ P`): the transformers
    /// Linear weight is its transpose.
    Transposed(String),
    /// A tensor the model does not use (the last resblock of SD 2.x, `logit_scale`, an
    /// unprojected model's `text_projection`).
    Ignored,
    Unknown,
}

/// An OpenCLIP text-encoder key (without its prefix, e.g. `cond_stage_model.model.`) to
/// transformers keys, for a model of `layers` transformer layers, with or without a
/// projection (diffusers' `convert_open_clip_checkpoint`). Resblocks from `layers` on are
/// not used: SD 2.x files hold 24 and condition on the output of the 23rd.
pub fn open_clip_to_transformers(key: &str, layers: usize, projected: bool) -> OpenClipTarget {
    use OpenClipTarget::{Ignored, Module, Split, Transposed, Unknown};
    let tm = |rest: &str| Module(format!("text_model.{rest}"));
    match key {
        "token_embedding.weight" => return tm("embeddings.token_embedding.weight"),
        "positional_embedding" => return tm("embeddings.position_embedding.weight"),
        "text_projection" if projected => return Transposed("text_projection.weight".into()),
        "text_projection" | "logit_scale" | "attn_mask" => return Ignored,
        _ => {}
    }
    if let Some(rest) = key.strip_prefix("ln_final.") {
        return tm(&format!("final_layer_norm.{rest}"));
    }
    let Some((n, rest)) = key
        .strip_prefix("transformer.resblocks.")
        .and_then(split_index)
    else {
        return Unknown;
    };
    if n >= layers {
        return Ignored;
    }
    let layer = format!("text_model.encoder.layers.{n}");
    let split = |kind: &str| {
        Split(["q_proj", "k_proj", "v_proj"].map(|p| format!("{layer}.self_attn.{p}.{kind}")))
    };
    match rest {
        "attn.in_proj_weight" => return split("weight"),
        "attn.in_proj_bias" => return split("bias"),
        _ => {}
    }
    const INNER: [(&str, &str); 5] = [
        ("ln_1.", "layer_norm1."),
        ("ln_2.", "layer_norm2."),
        ("attn.out_proj.", "self_attn.out_proj."),
        ("mlp.c_fc.", "mlp.fc1."),
        ("mlp.c_proj.", "mlp.fc2."),
    ];
    INNER
        .iter()
        .find_map(|(from, to)| {
            rest.strip_prefix(from)
                .map(|r| Module(format!("{layer}.{to}{r}")))
        })
        .unwrap_or(Unknown)
}

/// Buffers of a diffusers text encoder file that no module needs.
/// transformers 5 saves the text transformer's keys without their `text_model.` level.
pub fn transformers_clip_key(key: &str) -> KeyTarget {
    let unwrapped = ["embeddings.", "encoder.", "final_layer_norm."]
        .iter()
        .any(|p| key.starts_with(p));
    if key.ends_with("embeddings.position_ids") {
        KeyTarget::Ignored
    } else if unwrapped {
        KeyTarget::Module(format!("text_model.{key}"))
    } else {
        KeyTarget::Module(key.to_string())
    }
}

fn split_first(key: &str) -> Option<(&str, &str)> {
    key.split_once('.')
}

fn split_index(key: &str) -> Option<(usize, &str)> {
    let (head, rest) = key.split_once('.')?;
    Some((head.parse().ok()?, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transformers_keys_load_with_or_without_text_model() {
        for key in [
            "text_model.encoder.layers.0.mlp.fc1.weight",
            "encoder.layers.0.mlp.fc1.weight",
        ] {
            assert_eq!(
                transformers_clip_key(key),
                KeyTarget::Module("text_model.encoder.layers.0.mlp.fc1.weight".into())
            );
        }
        assert_eq!(
            transformers_clip_key("text_projection.weight"),
            KeyTarget::Module("text_projection.weight".into())
        );
        assert_eq!(
            transformers_clip_key("embeddings.position_ids"),
            KeyTarget::Ignored
        );
    }

    #[test]
    fn open_clip_keys_split_transpose_and_skip_past_the_model() {
        use OpenClipTarget::*;
        assert_eq!(
            open_clip_to_transformers("transformer.resblocks.3.attn.in_proj_weight", 24, true),
            Split([
                "text_model.encoder.layers.3.self_attn.q_proj.weight".into(),
                "text_model.encoder.layers.3.self_attn.k_proj.weight".into(),
                "text_model.encoder.layers.3.self_attn.v_proj.weight".into(),
            ])
        );
        assert_eq!(
            open_clip_to_transformers("text_projection", 32, true),
            Transposed("text_projection.weight".into())
        );
        assert_eq!(
            open_clip_to_transformers("text_projection", 23, false),
            Ignored
        );
        assert_eq!(
            open_clip_to_transformers("transformer.resblocks.23.ln_1.weight", 23, false),
            Ignored
        );
        assert_eq!(
            open_clip_to_transformers("transformer.resblocks.0.mlp.c_fc.bias", 23, false),
            Module("text_model.encoder.layers.0.mlp.fc1.bias".into())
        );
        assert_eq!(open_clip_to_transformers("no.such.key", 23, false), Unknown);
    }
}
