//! diffusers `UNet2DConditionModel` for SD 1.x/2.x/XL: down blocks, a cross-attention
//! middle block and up blocks with skip connections, conditioned on a timestep, on text and
//! (SDXL) on pooled text and size / aesthetic time ids.

mod config;
mod shared;

pub use config::{AdditionConfig, UNetConfig};
pub(crate) use shared::{embed, encoder_pass};

use burn::module::Module;
use burn::nn::GroupNorm;
use burn::nn::conv::Conv2d;
use burn::tensor::{Device, Tensor};
use kernels::silu;

use super::layers::{Downsample, ResnetBlock, TimestepMlp, Upsample, conv2d, new_group_norm};
use super::transformer::{Transformer2d, TransformerSettings};

/// One resolution level going down: resnets, optional attentions, optional downsampler.
#[derive(Module, Debug)]
pub struct DownBlock {
    pub resnets: Vec<ResnetBlock>,
    /// Empty for diffusers' `DownBlock2D`, one per resnet for `CrossAttnDownBlock2D`.
    pub attentions: Vec<Transformer2d>,
    /// Zero or one element (`downsamplers.0.conv`).
    pub downsamplers: Vec<Downsample>,
}

/// `UNetMidBlock2DCrossAttn`.
#[derive(Module, Debug)]
pub struct MidBlock {
    pub resnets: Vec<ResnetBlock>,
    pub attentions: Vec<Transformer2d>,
}

/// One resolution level going up: `layers_per_block + 1` resnets fed by skip connections.
#[derive(Module, Debug)]
pub struct UpBlock {
    pub resnets: Vec<ResnetBlock>,
    pub attentions: Vec<Transformer2d>,
    pub upsamplers: Vec<Upsample>,
}

/// SDXL's extra conditioning for one UNet call.
#[derive(Clone, Debug)]
pub struct AddedConditioning {
    /// Pooled text embeddings, `[batch, pooled_dim]`.
    pub text_embeds: Tensor<2>,
    /// `batch` rows of time ids (sizes, crop, target size or aesthetic score), row-major.
    pub time_ids: Vec<f32>,
}

/// The denoising UNet.
#[derive(Module, Debug)]
pub struct UNet {
    pub time_embedding: TimestepMlp,
    /// diffusers' `add_embedding` (SDXL): pooled text + time-id sinusoids to the time
    /// embedding's width.
    pub add_embedding: Option<TimestepMlp>,
    /// Sinusoid width per time id (`addition_time_embed_dim`; 0 without `add_embedding`).
    pub addition_time_embed_dim: usize,
    pub conv_in: Conv2d,
    pub down_blocks: Vec<DownBlock>,
    pub mid_block: MidBlock,
    pub up_blocks: Vec<UpBlock>,
    pub conv_norm_out: GroupNorm,
    pub conv_out: Conv2d,
    pub flip_sin_to_cos: bool,
    pub freq_shift: f32,
    pub in_channels: usize,
}

/// Intermediate activations, recorded when asked for (tests compare them with diffusers').
pub type Trace = Vec<(String, Tensor<4>)>;

impl UNetConfig {
    /// A UNet with uninitialised (lazy) parameters, ready for loading.
    pub fn init(&self, device: &Device) -> UNet {
        let ch = &self.block_out_channels;
        let resnet = |c_in, c_out| self.resnet(c_in, c_out, device);
        let settings = |level: usize| self.transformer_settings(level);
        let levels = self.levels();
        let l = self.layers_per_block;
        let (down_blocks, mid_block) = self.encoder_blocks(device);
        let (time_embedding, add_embedding) = self.init_embedding(device);
        let c_mid = ch[levels - 1];

        let up_blocks = (0..levels)
            .map(|i| {
                // diffusers walks the reversed channel list; `level` is the resolution level.
                let level = levels - 1 - i;
                let c_out = ch[level];
                let c_prev = if i == 0 { c_mid } else { ch[level + 1] };
                let c_skip_last = ch[level.saturating_sub(1)];
                let s = settings(level);
                UpBlock {
                    resnets: (0..=l)
                        .map(|j| {
                            let c_res_in = if j == 0 { c_prev } else { c_out };
                            let c_skip = if j == l { c_skip_last } else { c_out };
                            resnet(c_res_in + c_skip, c_out)
                        })
                        .collect(),
                    attentions: if self.up_attention[i] {
                        (0..=l)
                            .map(|_| Transformer2d::new(c_out, s, device))
                            .collect()
                    } else {
                        Vec::new()
                    },
                    upsamplers: if i + 1 < levels {
                        vec![Upsample::new(c_out, device)]
                    } else {
                        Vec::new()
                    },
                }
            })
            .collect();

        UNet {
            time_embedding,
            add_embedding,
            addition_time_embed_dim: self.addition.map_or(0, |a| a.time_embed_dim),
            conv_in: conv2d([self.in_channels, ch[0]], 3, 1, 1, device),
            down_blocks,
            mid_block,
            up_blocks,
            conv_norm_out: new_group_norm(self.norm_num_groups, ch[0], self.norm_eps, device),
            conv_out: conv2d([ch[0], self.out_channels], 3, 1, 1, device),
            flip_sin_to_cos: self.flip_sin_to_cos,
            freq_shift: self.freq_shift,
            in_channels: self.in_channels,
        }
    }

    /// A resnet block taking the time embedding.
    fn resnet(&self, c_in: usize, c_out: usize, device: &Device) -> ResnetBlock {
        let temb = self.block_out_channels[0] * 4;
        let (groups, eps) = (self.norm_num_groups, self.norm_eps);
        ResnetBlock::new(c_in, c_out, Some(temb), groups, eps, device)
    }

    /// The transformers of resolution level `level`.
    fn transformer_settings(&self, level: usize) -> TransformerSettings {
        TransformerSettings {
            heads: self.heads[level],
            depth: self.transformer_depth[level],
            context_dim: self.cross_attention_dim,
            groups: self.norm_num_groups,
            linear_projection: self.use_linear_projection,
        }
    }

    /// The time embedding and SDXL's added-conditioning embedding.
    pub fn init_embedding(&self, device: &Device) -> (TimestepMlp, Option<TimestepMlp>) {
        let ch = &self.block_out_channels;
        let temb = ch[0] * 4;
        (
            TimestepMlp::new(ch[0], temb, device),
            self.addition
                .map(|a| TimestepMlp::new(a.input_dim, temb, device)),
        )
    }

    /// The down blocks and the middle block (a UNet's, and a ControlNet's copy of them).
    pub fn encoder_blocks(&self, device: &Device) -> (Vec<DownBlock>, MidBlock) {
        let ch = &self.block_out_channels;
        let resnet = |c_in, c_out| self.resnet(c_in, c_out, device);
        let settings = |level: usize| self.transformer_settings(level);
        let levels = self.levels();
        let l = self.layers_per_block;
        let down_blocks = (0..levels)
            .map(|i| {
                let c_out = ch[i];
                let c_in = if i == 0 { ch[0] } else { ch[i - 1] };
                let s = settings(i);
                DownBlock {
                    resnets: (0..l)
                        .map(|j| resnet(if j == 0 { c_in } else { c_out }, c_out))
                        .collect(),
                    attentions: if self.down_attention[i] {
                        (0..l)
                            .map(|_| Transformer2d::new(c_out, s, device))
                            .collect()
                    } else {
                        Vec::new()
                    },
                    downsamplers: if i + 1 < levels {
                        vec![Downsample::padded(c_out, device)]
                    } else {
                        Vec::new()
                    },
                }
            })
            .collect();

        let c_mid = ch[levels - 1];
        let mid_settings = settings(levels - 1);
        let mid_block = MidBlock {
            resnets: vec![resnet(c_mid, c_mid), resnet(c_mid, c_mid)],
            attentions: vec![Transformer2d::new(c_mid, mid_settings, device)],
        };
        (down_blocks, mid_block)
    }
}

impl UNet {
    /// Predicts the noise (or v) in `sample`.
    ///
    /// # Shapes
    /// - `sample`: `[batch, in_channels, h, w]`
    /// - `timesteps`: `batch` values
    /// - `context`: `[batch, tokens, cross_attention_dim]` (tokens any multiple of 77)
    /// - `added`: SDXL's pooled text `[batch, pooled]` and `batch` rows of time ids;
    ///   required exactly when the UNet has an `add_embedding`
    /// - returns `[batch, out_channels, h, w]`
    pub fn forward(
        &self,
        sample: Tensor<4>,
        timesteps: &[f32],
        context: &Tensor<3>,
        added: Option<&AddedConditioning>,
    ) -> Tensor<4> {
        self.run(sample, timesteps, (context, added), (None, None), &|| false)
            .expect("never interrupted")
    }

    /// [`UNet::forward`] that asks `interrupted` between blocks and gives up (`None`) as
    /// soon as it says so: a large step on the CPU can take minutes, and cancel must not
    /// wait for it.
    pub fn forward_interruptible(
        &self,
        sample: Tensor<4>,
        timesteps: &[f32],
        (context, added): (&Tensor<3>, Option<&AddedConditioning>),
        interrupted: &dyn Fn() -> bool,
    ) -> Option<Tensor<4>> {
        self.run(
            sample,
            timesteps,
            (context, added),
            (None, None),
            interrupted,
        )
    }

    /// Whether the UNet takes [`AddedConditioning`] (SDXL).
    pub fn takes_added_conditioning(&self) -> bool {
        self.add_embedding.is_some()
    }

    /// [`UNet::forward`], recording the output of every top-level module into `trace`
    /// (2-D activations as `[batch, c, 1, 1]`).
    pub fn forward_traced(
        &self,
        sample: Tensor<4>,
        timesteps: &[f32],
        context: &Tensor<3>,
        added: Option<&AddedConditioning>,
        trace: Option<&mut Trace>,
    ) -> Tensor<4> {
        self.run(sample, timesteps, (context, added), (None, trace), &|| {
            false
        })
        .expect("never interrupted")
    }

    /// [`UNet::forward_interruptible`] with a ControlNet's residuals added to the skip
    /// connections and the middle block's output (diffusers' `down_block_additional_residuals`
    /// and `mid_block_additional_residual`).
    pub fn forward_controlled(
        &self,
        sample: Tensor<4>,
        timesteps: &[f32],
        (context, added): (&Tensor<3>, Option<&AddedConditioning>),
        control: &ControlResiduals,
        interrupted: &dyn Fn() -> bool,
    ) -> Option<Tensor<4>> {
        self.run(
            sample,
            timesteps,
            (context, added),
            (Some(control), None),
            interrupted,
        )
    }

    fn run(
        &self,
        sample: Tensor<4>,
        timesteps: &[f32],
        (context, added): (&Tensor<3>, Option<&AddedConditioning>),
        (control, mut trace): (Option<&ControlResiduals>, Option<&mut Trace>),
        interrupted: &dyn Fn() -> bool,
    ) -> Option<Tensor<4>> {
        let mut record = |name: String, t: &Tensor<4>| {
            if let Some(trace) = trace.as_deref_mut() {
                trace.push((name, t.clone()));
            }
        };
        let emb = embed(
            (&self.time_embedding, self.add_embedding.as_ref()),
            self.addition_time_embed_dim,
            (self.flip_sin_to_cos, self.freq_shift),
            self.conv_in.weight.dims()[0],
            (timesteps, added),
            &mut record,
        );
        let x = kernels::conv2d(sample, &self.conv_in);
        record("conv_in".into(), &x);
        let (x, mut skips) = encoder_pass(
            &self.down_blocks,
            &self.mid_block,
            (x, &emb, context),
            &mut record,
            interrupted,
        )?;
        let (x, skips) = match control {
            Some(c) => {
                for (skip, residual) in skips.iter_mut().zip(&c.down) {
                    *skip = skip.clone() + residual.clone();
                }
                (x + c.mid.clone(), skips)
            }
            None => (x, skips),
        };
        let mut x = x;
        let mut skips = skips;
        for (i, block) in self.up_blocks.iter().enumerate() {
            for (j, resnet) in block.resnets.iter().enumerate() {
                let skip = skips
                    .pop()
                    .expect("one skip connection per up-block resnet");
                x = resnet.forward(Tensor::cat(vec![x, skip], 1), Some(&emb));
                if let Some(attn) = block.attentions.get(j) {
                    x = attn.forward(x, context);
                }
                if interrupted() {
                    return None;
                }
            }
            for up in &block.upsamplers {
                let [_, _, h, w] = skips.last().expect("a skip below every upsampler").dims();
                x = up.forward(x, [h, w]);
            }
            record(format!("up_blocks.{i}"), &x);
        }

        let x = kernels::group_norm(x, &self.conv_norm_out);
        record("conv_norm_out".into(), &x);
        let x = kernels::conv2d(silu(x), &self.conv_out);
        record("conv_out".into(), &x);
        Some(x)
    }
}

/// A ControlNet's additions to the UNet: one residual per skip connection and one for the
/// middle block (already scaled).
pub struct ControlResiduals {
    pub down: Vec<Tensor<4>>,
    pub mid: Tensor<4>,
}
