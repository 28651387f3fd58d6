//! diffusers `AutoencoderKL`: the encoder to latent moments, the decoder back to pixels.

use burn::module::Module;
use burn::nn::conv::Conv2d;
use burn::nn::{GroupNorm, Linear, LinearConfig};
use burn::tensor::{Device, Tensor};
use kernels::{group_norm, group_norm_silu};
use serde_json::Value;

use super::config_json;
use super::layers::{Downsample, ResnetBlock, Upsample, conv2d, new_group_norm};
use crate::error::{Error, Result};

/// Autoencoder hyper-parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct VaeConfig {
    pub in_channels: usize,
    pub out_channels: usize,
    pub latent_channels: usize,
    pub block_out_channels: Vec<usize>,
    pub layers_per_block: usize,
    pub norm_num_groups: usize,
    /// Latents are multiplied by this after encoding and divided by it before decoding.
    pub scaling_factor: f32,
    /// The image side it was made for: diffusers' tile side when decoding in tiles.
    pub sample_size: usize,
    /// Whether it must run in f32 when the rest runs in half precision (diffusers'
    /// `force_upcast`: true for the released SD VAEs, false for f16-safe ones such as
    /// sdxl-vae-fp16-fix).
    pub force_upcast: bool,
}

impl VaeConfig {
    /// The SD 1.x/2.x autoencoder (f = 8).
    pub fn sd() -> Self {
        Self {
            in_channels: 3,
            out_channels: 3,
            latent_channels: 4,
            block_out_channels: vec![128, 256, 512, 512],
            layers_per_block: 2,
            norm_num_groups: 32,
            scaling_factor: 0.18215,
            sample_size: 512,
            force_upcast: true,
        }
    }

    /// Whether `other` builds the same network (its scaling factor, tile side and
    /// `force_upcast` aside): a VAE made for one fits the other.
    pub fn same_network(&self, other: &VaeConfig) -> bool {
        let shape = |c: &VaeConfig| {
            (
                c.in_channels,
                c.out_channels,
                c.latent_channels,
                c.block_out_channels.clone(),
                c.layers_per_block,
                c.norm_num_groups,
            )
        };
        shape(self) == shape(other)
    }

    /// The down-sampling factor between pixels and latents.
    pub fn factor(&self) -> usize {
        1 << (self.block_out_channels.len() - 1)
    }

    /// Parses a diffusers `vae/config.json`.
    pub fn from_json(text: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| Error::settings(format!("VAE config is not valid JSON: {e}")))?;
        let uint = |key: &str| config_json::size(&v, key, "VAE");
        let block_out_channels = config_json::sizes(&v, "block_out_channels")
            .ok_or_else(|| Error::settings("VAE config: missing \"block_out_channels\""))?;
        if block_out_channels.is_empty()
            || block_out_channels.len() > 6
            || block_out_channels.contains(&0)
        {
            return Err(Error::settings(format!(
                "VAE config: block_out_channels {block_out_channels:?} is not supported"
            )));
        }
        for key in [
            "use_quant_conv",
            "use_post_quant_conv",
            "mid_block_add_attention",
        ] {
            if v[key].as_bool() == Some(false) {
                return Err(Error::settings(format!(
                    "VAE config: {key}: false is not supported"
                )));
            }
        }
        let config = Self {
            in_channels: uint("in_channels")?,
            out_channels: uint("out_channels")?,
            latent_channels: uint("latent_channels")?,
            layers_per_block: uint("layers_per_block")?,
            norm_num_groups: config_json::size_or(&v, "norm_num_groups", "VAE", 32)?,
            scaling_factor: config_json::number_or(&v, "scaling_factor", "VAE", 0.18215)? as f32,
            // Released folders all say it; without it, SD's 512 (diffusers' class default of
            // 32 would tile a 512 px image 400 times).
            sample_size: config_json::size_or(&v, "sample_size", "VAE", 512)?.max(1),
            force_upcast: config_json::flag_or(&v, "force_upcast", "VAE", true)?,
            block_out_channels,
        };
        if config
            .block_out_channels
            .iter()
            .any(|c| c % config.norm_num_groups != 0)
        {
            return Err(Error::settings(
                "VAE config: channels are not a multiple of norm_num_groups",
            ));
        }
        Ok(config)
    }

    /// An autoencoder with uninitialised (lazy) parameters, ready for loading.
    pub fn init(&self, device: &Device) -> Vae {
        let ch = &self.block_out_channels;
        let n = ch.len();
        let g = self.norm_num_groups;
        let resnet = |c_in, c_out| ResnetBlock::new(c_in, c_out, None, g, 1e-6, device);
        let mid = |c| VaeMidBlock {
            resnets: vec![resnet(c, c), resnet(c, c)],
            attentions: vec![VaeAttention::new(c, g, device)],
        };
        let encoder = Encoder {
            conv_in: conv2d([self.in_channels, ch[0]], 3, 1, 1, device),
            down_blocks: (0..n)
                .map(|i| {
                    let c_in = if i == 0 { ch[0] } else { ch[i - 1] };
                    EncoderBlock {
                        resnets: (0..self.layers_per_block)
                            .map(|j| resnet(if j == 0 { c_in } else { ch[i] }, ch[i]))
                            .collect(),
                        downsamplers: if i + 1 < n {
                            vec![Downsample::asymmetric(ch[i], device)]
                        } else {
                            Vec::new()
                        },
                    }
                })
                .collect(),
            mid_block: mid(ch[n - 1]),
            conv_norm_out: new_group_norm(g, ch[n - 1], 1e-6, device),
            conv_out: conv2d([ch[n - 1], 2 * self.latent_channels], 3, 1, 1, device),
        };
        let decoder = Decoder {
            conv_in: conv2d([self.latent_channels, ch[n - 1]], 3, 1, 1, device),
            mid_block: mid(ch[n - 1]),
            up_blocks: (0..n)
                .map(|i| {
                    let level = n - 1 - i;
                    let c_in = if i == 0 { ch[n - 1] } else { ch[level + 1] };
                    DecoderBlock {
                        resnets: (0..=self.layers_per_block)
                            .map(|j| resnet(if j == 0 { c_in } else { ch[level] }, ch[level]))
                            .collect(),
                        upsamplers: if i + 1 < n {
                            vec![Upsample::new(ch[level], device)]
                        } else {
                            Vec::new()
                        },
                    }
                })
                .collect(),
            conv_norm_out: new_group_norm(g, ch[0], 1e-6, device),
            conv_out: conv2d([ch[0], self.out_channels], 3, 1, 1, device),
        };
        let lc = self.latent_channels;
        Vae {
            encoder,
            decoder,
            quant_conv: conv2d([2 * lc, 2 * lc], 1, 1, 0, device),
            post_quant_conv: conv2d([lc, lc], 1, 1, 0, device),
        }
    }
}

/// Single-head self-attention over pixels with its own GroupNorm (the VAE's mid block).
#[derive(Module, Debug)]
pub struct VaeAttention {
    pub group_norm: GroupNorm,
    pub to_q: Linear,
    pub to_k: Linear,
    pub to_v: Linear,
    pub to_out: Linear,
}

impl VaeAttention {
    fn new(c: usize, groups: usize, device: &Device) -> Self {
        let linear = || LinearConfig::new(c, c).init(device);
        Self {
            group_norm: new_group_norm(groups, c, 1e-6, device),
            to_q: linear(),
            to_k: linear(),
            to_v: linear(),
            to_out: linear(),
        }
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let [b, c, h, w] = x.dims();
        let tokens = group_norm(x.clone(), &self.group_norm)
            .reshape([b, c, h * w])
            .swap_dims(1, 2);
        let head = |t: Tensor<3>| t.unsqueeze_dim::<4>(1); // one head: [b, 1, hw, c]
        let q = head(kernels::linear(tokens.clone(), &self.to_q));
        let k = head(kernels::linear(tokens.clone(), &self.to_k));
        let v = head(kernels::linear(tokens, &self.to_v));
        let out = kernels::attention(q, k, v).squeeze_dim::<3>(1);
        let out = kernels::linear(out, &self.to_out)
            .swap_dims(1, 2)
            .reshape([b, c, h, w]);
        out + x
    }
}

#[derive(Module, Debug)]
pub struct VaeMidBlock {
    pub resnets: Vec<ResnetBlock>,
    pub attentions: Vec<VaeAttention>,
}

impl VaeMidBlock {
    fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let x = self.resnets[0].forward(x, None);
        let x = self.attentions[0].forward(x);
        self.resnets[1].forward(x, None)
    }
}

#[derive(Module, Debug)]
pub struct EncoderBlock {
    pub resnets: Vec<ResnetBlock>,
    pub downsamplers: Vec<Downsample>,
}

#[derive(Module, Debug)]
pub struct DecoderBlock {
    pub resnets: Vec<ResnetBlock>,
    pub upsamplers: Vec<Upsample>,
}

#[derive(Module, Debug)]
pub struct Encoder {
    pub conv_in: Conv2d,
    pub down_blocks: Vec<EncoderBlock>,
    pub mid_block: VaeMidBlock,
    pub conv_norm_out: GroupNorm,
    pub conv_out: Conv2d,
}

#[derive(Module, Debug)]
pub struct Decoder {
    pub conv_in: Conv2d,
    pub mid_block: VaeMidBlock,
    pub up_blocks: Vec<DecoderBlock>,
    pub conv_norm_out: GroupNorm,
    pub conv_out: Conv2d,
}

/// The autoencoder.
#[derive(Module, Debug)]
pub struct Vae {
    pub encoder: Encoder,
    pub decoder: Decoder,
    pub quant_conv: Conv2d,
    pub post_quant_conv: Conv2d,
}

/// The posterior of an encoded image: a diagonal Gaussian over latents.
pub struct Posterior {
    /// `[batch, latent_channels, h / f, w / f]`
    pub mean: Tensor<4>,
    /// Log-variance, clamped to [-30, 20] as diffusers does.
    pub logvar: Tensor<4>,
}

impl Posterior {
    /// Splits `quant_conv`'s output into mean and log-variance (clamped as diffusers does).
    pub(crate) fn from_moments(moments: Tensor<4>) -> Self {
        let c = moments.dims()[1] / 2;
        Posterior {
            mean: moments.clone().narrow(1, 0, c),
            logvar: moments.narrow(1, c, c).clamp(-30.0, 20.0),
        }
    }

    /// `exp(0.5 * logvar)`.
    pub fn std(&self) -> Tensor<4> {
        self.logvar.clone().mul_scalar(0.5).exp()
    }

    /// A sample `mean + std * noise` for standard-normal `noise` of the same shape.
    pub fn sample(&self, noise: Tensor<4>) -> Tensor<4> {
        self.mean.clone() + self.std() * noise
    }
}

impl Vae {
    /// Encodes images in [-1, 1] to the posterior (before the scaling factor), the whole
    /// image at once.
    ///
    /// # Shapes
    /// - `image`: `[batch, 3, h, w]` with `h`, `w` multiples of the down-sampling factor
    /// - `mean`, `logvar`: `[batch, latent_channels, h / f, w / f]`
    pub fn encode(&self, image: Tensor<4>) -> Posterior {
        Posterior::from_moments(self.moments(image))
    }

    /// The encoder and `quant_conv`: mean and log-variance side by side on the channels.
    ///
    /// # Shapes
    /// - `image`: `[batch, 3, h, w]` -> `[batch, 2 * latent_channels, h / f, w / f]`
    pub(crate) fn moments(&self, image: Tensor<4>) -> Tensor<4> {
        let e = &self.encoder;
        let mut x = kernels::conv2d(image, &e.conv_in);
        for block in &e.down_blocks {
            for resnet in &block.resnets {
                x = resnet.forward(x, None);
            }
            for down in &block.downsamplers {
                x = down.forward(x);
            }
        }
        x = e.mid_block.forward(x);
        x = kernels::conv2d(group_norm_silu(x, &e.conv_norm_out), &e.conv_out);
        kernels::conv2d(x, &self.quant_conv)
    }

    /// Decodes latents (already divided by the scaling factor) to images, roughly [-1, 1],
    /// the whole image at once.
    ///
    /// # Shapes
    /// - `latents`: `[batch, latent_channels, h, w]` -> `[batch, 3, h * f, w * f]`
    pub fn decode(&self, latents: Tensor<4>) -> Tensor<4> {
        let d = &self.decoder;
        let mut x = kernels::conv2d(kernels::conv2d(latents, &self.post_quant_conv), &d.conv_in);
        x = d.mid_block.forward(x);
        for block in &d.up_blocks {
            for resnet in &block.resnets {
                x = resnet.forward(x, None);
            }
            for up in &block.upsamplers {
                let [_, _, h, w] = x.dims();
                x = up.forward(x, [2 * h, 2 * w]);
            }
        }
        kernels::conv2d(group_norm_silu(x, &d.conv_norm_out), &d.conv_out)
    }
}
