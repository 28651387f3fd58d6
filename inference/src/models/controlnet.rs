//! diffusers `ControlNetModel`: a copy of the UNet's down and middle blocks that reads a
//! control image (through a small convolutional embedding) and gives, through zero-initialised
//! 1×1 convolutions, one residual per UNet skip connection and one for its middle block.

use burn::module::Module;
use burn::nn::conv::Conv2d;
use burn::tensor::{Device, Tensor};
use kernels::silu;
use serde_json::Value;

use super::layers::{TimestepMlp, conv2d};
use super::unet::{
    AddedConditioning, ControlResiduals, DownBlock, MidBlock, UNetConfig, embed, encoder_pass,
};
use crate::error::{Error, Result};

/// A ControlNet's architecture: its UNet part and the control image embedding's channels.
#[derive(Clone, Debug)]
pub struct ControlNetConfig {
    pub unet: UNetConfig,
    /// `conditioning_embedding_out_channels` (`[16, 32, 96, 256]` in SD 1.5's).
    pub embedding_channels: Vec<usize>,
    /// Channels of the control image (3).
    pub conditioning_channels: usize,
}

impl ControlNetConfig {
    /// Reads a diffusers `ControlNetModel` `config.json`.
    pub fn from_json(text: &str) -> Result<Self> {
        let mut v: Value = serde_json::from_str(text)
            .map_err(|e| Error::settings(format!("ControlNet config is not valid JSON: {e}")))?;
        let sizes = |key: &str| -> Option<Vec<usize>> {
            v[key]
                .as_array()?
                .iter()
                .map(|x| x.as_u64().map(|n| n as usize))
                .collect()
        };
        let embedding_channels = sizes("conditioning_embedding_out_channels")
            .filter(|c| !c.is_empty() && !c.contains(&0))
            .ok_or_else(|| {
                Error::settings("ControlNet config: missing conditioning_embedding_out_channels")
            })?;
        let conditioning_channels = v["conditioning_channels"].as_u64().unwrap_or(3) as usize;
        // The UNet reader wants the up blocks a ControlNet lacks: mirror the down blocks.
        let up: Vec<Value> = v["down_block_types"]
            .as_array()
            .map(|types| {
                types
                    .iter()
                    .rev()
                    .map(|t| Value::from(t.as_str().unwrap_or("").replace("Down", "Up")))
                    .collect()
            })
            .unwrap_or_default();
        v["up_block_types"] = Value::from(up);
        v["out_channels"] = v["in_channels"].clone();
        let unet = UNetConfig::from_json(&v.to_string()).map_err(|e| {
            Error::settings(e.to_string().replace("UNet config", "ControlNet config"))
        })?;
        Ok(Self {
            unet,
            embedding_channels,
            conditioning_channels,
        })
    }

    /// A ControlNet with uninitialised (lazy) parameters, ready for loading.
    pub fn init(&self, device: &Device) -> ControlNet {
        let ch = &self.unet.block_out_channels;
        let emb = &self.embedding_channels;
        let blocks = emb
            .windows(2)
            .flat_map(|w| {
                [
                    conv2d([w[0], w[0]], 3, 1, 1, device),
                    conv2d([w[0], w[1]], 3, 2, 1, device),
                ]
            })
            .collect();
        let (down_blocks, mid_block) = self.unet.encoder_blocks(device);
        let skips: Vec<usize> = std::iter::once(ch[0])
            .chain(down_blocks.iter().enumerate().flat_map(|(i, b)| {
                let extra = b.downsamplers.len();
                std::iter::repeat_n(ch[i], b.resnets.len() + extra)
            }))
            .collect();
        let c_mid = ch[ch.len() - 1];
        let unet = self.unet.init_embedding(device);
        ControlNet {
            time_embedding: unet.0,
            add_embedding: unet.1,
            conv_in: conv2d([self.unet.in_channels, ch[0]], 3, 1, 1, device),
            controlnet_cond_embedding: CondEmbedding {
                conv_in: conv2d([self.conditioning_channels, emb[0]], 3, 1, 1, device),
                blocks,
                conv_out: conv2d([emb[emb.len() - 1], ch[0]], 3, 1, 1, device),
            },
            down_blocks,
            mid_block,
            controlnet_down_blocks: skips
                .iter()
                .map(|&c| conv2d([c, c], 1, 1, 0, device))
                .collect(),
            controlnet_mid_block: conv2d([c_mid, c_mid], 1, 1, 0, device),
            addition_time_embed_dim: self.unet.addition.map_or(0, |a| a.time_embed_dim),
            flip_sin_to_cos: self.unet.flip_sin_to_cos,
            freq_shift: self.unet.freq_shift,
        }
    }
}

/// The control image's embedding: SiLU after every convolution but the last.
#[derive(Module, Debug)]
pub struct CondEmbedding {
    pub conv_in: Conv2d,
    pub blocks: Vec<Conv2d>,
    pub conv_out: Conv2d,
}

/// The network (parameter names as diffusers').
#[derive(Module, Debug)]
pub struct ControlNet {
    pub time_embedding: TimestepMlp,
    pub add_embedding: Option<TimestepMlp>,
    pub conv_in: Conv2d,
    pub controlnet_cond_embedding: CondEmbedding,
    pub down_blocks: Vec<DownBlock>,
    pub mid_block: MidBlock,
    pub controlnet_down_blocks: Vec<Conv2d>,
    pub controlnet_mid_block: Conv2d,
    pub addition_time_embed_dim: usize,
    pub flip_sin_to_cos: bool,
    pub freq_shift: f32,
}

impl ControlNet {
    /// The residuals for one UNet call, scaled by `scale`.
    ///
    /// # Shapes
    /// - `sample`: `[batch, 4, h, w]`, `timesteps`: `batch` values
    /// - `context`: `[batch, tokens, cross_attention_dim]`
    /// - `control`: `[batch, 3, 8h, 8w]` in `[0, 1]`
    /// - returns one `[batch, c, h', w']` per UNet skip connection, and the middle one
    pub fn forward(
        &self,
        sample: Tensor<4>,
        timesteps: &[f32],
        conditioning: (&Tensor<3>, Option<&AddedConditioning>),
        control: Tensor<4>,
        scale: f32,
    ) -> ControlResiduals {
        self.forward_interruptible(sample, timesteps, conditioning, control, scale, &|| false)
            .expect("never interrupted")
    }

    /// [`Self::forward`], asking `interrupted` between blocks as the UNet does: `None` once
    /// it says stop, so a cancel during a large ControlNet call need not wait for its end. It
    /// is asked first before the hint encoder: a stop already said costs nothing.
    pub fn forward_interruptible(
        &self,
        sample: Tensor<4>,
        timesteps: &[f32],
        (context, added): (&Tensor<3>, Option<&AddedConditioning>),
        control: Tensor<4>,
        scale: f32,
        interrupted: &dyn Fn() -> bool,
    ) -> Option<ControlResiduals> {
        if interrupted() {
            return None;
        }
        let mut ignore = |_: String, _: &Tensor<4>| {};
        let emb = embed(
            (&self.time_embedding, self.add_embedding.as_ref()),
            self.addition_time_embed_dim,
            (self.flip_sin_to_cos, self.freq_shift),
            self.conv_in.weight.dims()[0],
            (timesteps, added),
            &mut ignore,
        );
        let e = &self.controlnet_cond_embedding;
        let mut cond = silu(kernels::conv2d(control, &e.conv_in));
        for block in &e.blocks {
            cond = silu(kernels::conv2d(cond, block));
        }
        let cond = kernels::conv2d(cond, &e.conv_out);
        let x = kernels::conv2d(sample, &self.conv_in) + cond;
        let (mid, skips) = encoder_pass(
            &self.down_blocks,
            &self.mid_block,
            (x, &emb, context),
            &mut ignore,
            interrupted,
        )?;
        Some(ControlResiduals {
            down: skips
                .into_iter()
                .zip(&self.controlnet_down_blocks)
                .map(|(s, conv)| kernels::conv2d(s, conv).mul_scalar(scale))
                .collect(),
            mid: kernels::conv2d(mid, &self.controlnet_mid_block).mul_scalar(scale),
        })
    }
}
