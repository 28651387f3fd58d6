//! UNet hyper-parameters: presets for the real model families and diffusers `config.json`.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::models::config_json;

/// `UNet2DConditionModel` settings Ember supports.
#[derive(Clone, Debug, PartialEq)]
pub struct UNetConfig {
    pub in_channels: usize,
    pub out_channels: usize,
    pub block_out_channels: Vec<usize>,
    pub layers_per_block: usize,
    /// Per down block: does it have cross-attention (`CrossAttnDownBlock2D`)?
    pub down_attention: Vec<bool>,
    /// Per up block (lowest resolution first): `CrossAttnUpBlock2D`?
    pub up_attention: Vec<bool>,
    /// Attention heads per down block (diffusers' `attention_head_dim` for SD configs).
    pub heads: Vec<usize>,
    /// Transformer blocks per down block.
    pub transformer_depth: Vec<usize>,
    pub cross_attention_dim: usize,
    pub norm_num_groups: usize,
    pub norm_eps: f64,
    pub use_linear_projection: bool,
    pub flip_sin_to_cos: bool,
    pub freq_shift: f32,
    /// Latent size the model was trained at (diffusers' `sample_size`).
    pub sample_size: usize,
    /// SDXL's `addition_embed_type: "text_time"`: pooled text and time ids added to the
    /// time embedding.
    pub addition: Option<AdditionConfig>,
}

/// diffusers' `addition_embed_type: "text_time"` settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdditionConfig {
    /// Sinusoid width per time id (`addition_time_embed_dim`).
    pub time_embed_dim: usize,
    /// Pooled text width + time ids x `time_embed_dim` (`projection_class_embeddings_input_dim`).
    pub input_dim: usize,
}

impl UNetConfig {
    /// The SD 1.x UNet (`in_channels` 4, or 9 for the inpainting model).
    pub fn sd15(in_channels: usize) -> Self {
        Self {
            in_channels,
            out_channels: 4,
            block_out_channels: vec![320, 640, 1280, 1280],
            layers_per_block: 2,
            down_attention: vec![true, true, true, false],
            up_attention: vec![false, true, true, true],
            heads: vec![8; 4],
            transformer_depth: vec![1; 4],
            cross_attention_dim: 768,
            norm_num_groups: 32,
            norm_eps: 1e-5,
            use_linear_projection: false,
            flip_sin_to_cos: true,
            freq_shift: 0.0,
            sample_size: 64,
            addition: None,
        }
    }

    /// The SD 2.x UNet (768-v; the 512 base differs only in `sample_size` 64).
    pub fn sd2(in_channels: usize) -> Self {
        Self {
            heads: vec![5, 10, 20, 20],
            cross_attention_dim: 1024,
            use_linear_projection: true,
            sample_size: 96,
            ..Self::sd15(in_channels)
        }
    }

    /// The SDXL base UNet.
    pub fn sdxl(in_channels: usize) -> Self {
        Self {
            in_channels,
            out_channels: 4,
            block_out_channels: vec![320, 640, 1280],
            layers_per_block: 2,
            down_attention: vec![false, true, true],
            up_attention: vec![true, true, false],
            heads: vec![5, 10, 20],
            transformer_depth: vec![1, 2, 10],
            cross_attention_dim: 2048,
            norm_num_groups: 32,
            norm_eps: 1e-5,
            use_linear_projection: true,
            flip_sin_to_cos: true,
            freq_shift: 0.0,
            sample_size: 128,
            addition: Some(AdditionConfig {
                time_embed_dim: 256,
                input_dim: 2816,
            }),
        }
    }

    /// The SDXL refiner UNet.
    pub fn sdxl_refiner(in_channels: usize) -> Self {
        Self {
            block_out_channels: vec![384, 768, 1536, 1536],
            down_attention: vec![false, true, true, false],
            up_attention: vec![false, true, true, false],
            heads: vec![6, 12, 24, 24],
            transformer_depth: vec![4; 4],
            cross_attention_dim: 1280,
            addition: Some(AdditionConfig {
                time_embed_dim: 256,
                input_dim: 2560,
            }),
            ..Self::sdxl(in_channels)
        }
    }

    /// Number of resolution levels.
    pub fn levels(&self) -> usize {
        self.block_out_channels.len()
    }

    /// Parses a diffusers `unet/config.json`, refusing settings Ember does not implement.
    pub fn from_json(text: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| Error::settings(format!("UNet config is not valid JSON: {e}")))?;
        let refuse = |what: String| {
            Err(Error::settings(format!(
                "UNet config: {what} is not supported"
            )))
        };
        let uint = |key: &str| config_json::size(&v, key, "UNet");
        let uints = |key: &str| config_json::sizes(&v, key);
        let block_out_channels = uints("block_out_channels")
            .ok_or_else(|| Error::settings("UNet config: missing \"block_out_channels\""))?;
        let levels = block_out_channels.len();
        if levels == 0 || levels > 8 || block_out_channels.contains(&0) {
            return refuse(format!("block_out_channels {block_out_channels:?}"));
        }
        let block_types = |key: &str, plain: &str, cross: &str| -> Result<Vec<bool>> {
            let types = v[key]
                .as_array()
                .ok_or_else(|| Error::settings(format!("UNet config: missing {key:?}")))?;
            if types.len() != levels {
                return Err(Error::settings(format!(
                    "UNet config: {key} must have {levels} entries"
                )));
            }
            types
                .iter()
                .map(|t| match t.as_str() {
                    Some(s) if s == plain => Ok(false),
                    Some(s) if s == cross => Ok(true),
                    other => Err(Error::settings(format!(
                        "UNet config: block type {other:?} is not supported"
                    ))),
                })
                .collect()
        };
        let down_attention =
            block_types("down_block_types", "DownBlock2D", "CrossAttnDownBlock2D")?;
        let up_attention = block_types("up_block_types", "UpBlock2D", "CrossAttnUpBlock2D")?;
        // One positive integer per level, or one for all levels.
        let per_level = |key: &str, default: Option<usize>| -> Result<Vec<usize>> {
            let invalid = || {
                Error::settings(format!(
                    "UNet config: {key:?} must be a positive whole number or a list of \
                     {levels}, not {}",
                    v[key]
                ))
            };
            match &v[key] {
                Value::Number(_) => {
                    let n = config_json::size(&v, key, "UNet").map_err(|_| invalid())?;
                    Ok(vec![n; levels])
                }
                Value::Array(_) => uints(key)
                    .filter(|l| l.len() == levels && !l.contains(&0))
                    .ok_or_else(invalid),
                Value::Null => default
                    .map(|d| vec![d; levels])
                    .ok_or_else(|| Error::settings(format!("UNet config: missing {key:?}"))),
                _ => Err(Error::settings(format!("UNet config: invalid {key:?}"))),
            }
        };
        // diffusers reads `attention_head_dim` as the number of heads when
        // `num_attention_heads` is absent (a historical naming quirk all SD configs rely on).
        let heads = if v["num_attention_heads"].is_null() {
            per_level("attention_head_dim", Some(8))?
        } else {
            per_level("num_attention_heads", None)?
        };
        let transformer_depth = per_level("transformer_layers_per_block", Some(1))?;
        for (key, expected) in [
            ("act_fn", "silu"),
            ("mid_block_type", "UNetMidBlock2DCrossAttn"),
            ("time_embedding_type", "positional"),
            ("resnet_time_scale_shift", "default"),
        ] {
            if let Some(found) = v[key].as_str().filter(|f| *f != expected) {
                return refuse(format!("{key} {found:?}"));
            }
        }
        for key in [
            "class_embed_type",
            "encoder_hid_dim",
            "time_cond_proj_dim",
            "num_class_embeds",
            "reverse_transformer_layers_per_block",
        ] {
            if !v[key].is_null() {
                return refuse(format!("{key:?}"));
            }
        }
        if v["layers_per_block"].is_array() {
            return refuse("per-block layers_per_block".into());
        }
        let addition = match &v["addition_embed_type"] {
            Value::Null => None,
            Value::String(s) if s == "text_time" => Some(AdditionConfig {
                time_embed_dim: uint("addition_time_embed_dim")?,
                input_dim: uint("projection_class_embeddings_input_dim")?,
            }),
            other => return refuse(format!("addition_embed_type {other}")),
        };
        let config = Self {
            in_channels: uint("in_channels")?,
            out_channels: uint("out_channels")?,
            layers_per_block: uint("layers_per_block")?,
            cross_attention_dim: uint("cross_attention_dim")?,
            norm_num_groups: config_json::size_or(&v, "norm_num_groups", "UNet", 32)?,
            norm_eps: config_json::number_or(&v, "norm_eps", "UNet", 1e-5)?,
            use_linear_projection: config_json::flag_or(
                &v,
                "use_linear_projection",
                "UNet",
                false,
            )?,
            flip_sin_to_cos: config_json::flag_or(&v, "flip_sin_to_cos", "UNet", true)?,
            freq_shift: config_json::number_or(&v, "freq_shift", "UNet", 0.0)? as f32,
            sample_size: config_json::size_or(&v, "sample_size", "UNet", 64)?.min(1 << 12),
            block_out_channels,
            down_attention,
            up_attention,
            heads,
            transformer_depth,
            addition,
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks that the numbers fit together (channel counts divide into groups and heads).
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::settings(format!("UNet config: {what}")));
        if self.norm_num_groups == 0 {
            return bad("norm_num_groups must be positive".into());
        }
        for (i, &c) in self.block_out_channels.iter().enumerate() {
            if c % self.norm_num_groups != 0 {
                return bad(format!(
                    "block_out_channels[{i}] = {c} is not a multiple of norm_num_groups"
                ));
            }
            if self.heads[i] == 0 || c % self.heads[i] != 0 {
                return bad(format!(
                    "block_out_channels[{i}] = {c} is not a multiple of its head count"
                ));
            }
            // The mid block uses the last level's transformers, attention or not.
            let attends = self.down_attention[i] || self.up_attention[self.levels() - 1 - i];
            if (attends || i + 1 == self.levels()) && self.transformer_depth[i] == 0 {
                return bad(format!(
                    "transformer_layers_per_block[{i}] is 0 where level {i} has attention"
                ));
            }
        }
        if let Some(add) = self.addition
            && (add.time_embed_dim == 0 || add.input_dim <= add.time_embed_dim)
        {
            return bad(format!(
                "projection_class_embeddings_input_dim {} does not fit addition_time_embed_dim {}",
                add.input_dim, add.time_embed_dim
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(key: &str, value: &str) -> Result<UNetConfig> {
        let mut v: Value = serde_json::from_str(
            r#"{"block_out_channels": [32, 64], "layers_per_block": 1, "in_channels": 4,
                "out_channels": 4, "cross_attention_dim": 16, "attention_head_dim": 8,
                "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"],
                "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"]}"#,
        )
        .unwrap();
        v[key] = serde_json::from_str(value).unwrap();
        UNetConfig::from_json(&v.to_string())
    }

    #[test]
    fn invalid_numbers_are_errors_naming_the_key() {
        assert!(with("transformer_layers_per_block", "2").is_ok());
        assert!(with("transformer_layers_per_block", "[1, 2]").is_ok());
        for bad in ["0", "1.5", "[1, 0]", "[1]", "\"two\"", "-1"] {
            let e = with("transformer_layers_per_block", bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains("transformer_layers_per_block"), "{bad}: {e}");
        }
        for (key, bad) in [
            ("norm_eps", "\"small\""),
            ("use_linear_projection", "1"),
            ("norm_num_groups", "0"),
            ("sample_size", "2.5"),
            ("attention_head_dim", "0"),
        ] {
            let e = with(key, bad).unwrap_err().to_string();
            assert!(e.contains(key), "{key} = {bad}: {e}");
        }
    }
}
