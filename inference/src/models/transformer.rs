//! Attention and the spatial transformer (diffusers `attention_processor.py`,
//! `attention.py`, `transformer_2d.py`).

use burn::module::Module;
use burn::nn::conv::Conv2d;
use burn::nn::{GroupNorm, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Device, Tensor};

use super::layers::{conv2d, new_group_norm};

/// diffusers `Attention` with the default processor: multi-head scaled dot-product
/// attention; `to_out` is diffusers' `to_out.0` (the module list's Dropout is dropped).
#[derive(Module, Debug)]
pub struct Attention {
    pub to_q: Linear,
    pub to_k: Linear,
    pub to_v: Linear,
    pub to_out: Linear,
    pub heads: usize,
}

impl Attention {
    /// `query_dim` channels attending to `context_dim` channels with `heads` heads.
    pub fn new(
        query_dim: usize,
        context_dim: usize,
        heads: usize,
        qkv_bias: bool,
        device: &Device,
    ) -> Self {
        let qkv = |c_in| {
            LinearConfig::new(c_in, query_dim)
                .with_bias(qkv_bias)
                .init(device)
        };
        Self {
            to_q: qkv(query_dim),
            to_k: qkv(context_dim),
            to_v: qkv(context_dim),
            to_out: LinearConfig::new(query_dim, query_dim).init(device),
            heads,
        }
    }

    /// # Shapes
    /// - `x`: `[batch, n, query_dim]`, `context`: `[batch, m, context_dim]`
    /// - returns `[batch, n, query_dim]`
    pub fn forward(&self, x: Tensor<3>, context: Option<&Tensor<3>>) -> Tensor<3> {
        let [b, n, c] = x.dims();
        let context = context.cloned().unwrap_or_else(|| x.clone());
        let m = context.dims()[1];
        let d = c / self.heads;
        let q = kernels::linear(x, &self.to_q)
            .reshape([b, n, self.heads, d])
            .swap_dims(1, 2);
        let k = kernels::linear(context.clone(), &self.to_k)
            .reshape([b, m, self.heads, d])
            .swap_dims(1, 2);
        let v = kernels::linear(context, &self.to_v)
            .reshape([b, m, self.heads, d])
            .swap_dims(1, 2);
        let out = kernels::attention(q, k, v); // [b, heads, n, d]
        kernels::linear(out.swap_dims(1, 2).reshape([b, n, c]), &self.to_out)
    }
}

/// diffusers `FeedForward` with GEGLU: `out(h * gelu(gate))` where `[h, gate] = geglu(x)`.
/// `geglu` is diffusers' `ff.net.0.proj`, `out` its `ff.net.2`.
#[derive(Module, Debug)]
pub struct FeedForward {
    pub geglu: Linear,
    pub out: Linear,
}

impl FeedForward {
    pub fn new(dim: usize, device: &Device) -> Self {
        let inner = dim * 4;
        Self {
            geglu: LinearConfig::new(dim, inner * 2).init(device),
            out: LinearConfig::new(inner, dim).init(device),
        }
    }

    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        kernels::linear(kernels::geglu(kernels::linear(x, &self.geglu)), &self.out)
    }
}

/// diffusers `BasicTransformerBlock`: self-attention, cross-attention, feed-forward, each
/// pre-normed with a LayerNorm and added back.
#[derive(Module, Debug)]
pub struct TransformerBlock {
    pub norm1: LayerNorm,
    pub attn1: Attention,
    pub norm2: LayerNorm,
    pub attn2: Attention,
    pub norm3: LayerNorm,
    pub ff: FeedForward,
}

impl TransformerBlock {
    pub fn new(dim: usize, context_dim: usize, heads: usize, device: &Device) -> Self {
        let norm = || LayerNormConfig::new(dim).init(device);
        Self {
            norm1: norm(),
            attn1: Attention::new(dim, dim, heads, false, device),
            norm2: norm(),
            attn2: Attention::new(dim, context_dim, heads, false, device),
            norm3: norm(),
            ff: FeedForward::new(dim, device),
        }
    }

    pub fn forward(&self, x: Tensor<3>, context: &Tensor<3>) -> Tensor<3> {
        let x = self.attn1.forward(self.norm1.forward(x.clone()), None) + x;
        let x = self
            .attn2
            .forward(self.norm2.forward(x.clone()), Some(context))
            + x;
        self.ff.forward(self.norm3.forward(x.clone())) + x
    }
}

/// A 1x1 convolution (SD 1.x) or a Linear layer (SD 2.x, SDXL) into and out of the
/// transformer; diffusers' `use_linear_projection`.
#[derive(Module, Debug)]
pub enum Projection {
    Conv(Conv2d),
    Linear(Linear),
}

/// diffusers `Transformer2DModel`: GroupNorm, `proj_in`, transformer blocks over the
/// flattened pixels, `proj_out`, plus the input.
#[derive(Module, Debug)]
pub struct Transformer2d {
    pub norm: GroupNorm,
    pub proj_in: Projection,
    pub transformer_blocks: Vec<TransformerBlock>,
    pub proj_out: Projection,
}

/// Settings of one spatial transformer.
#[derive(Clone, Copy, Debug)]
pub struct TransformerSettings {
    pub heads: usize,
    pub depth: usize,
    pub context_dim: usize,
    pub groups: usize,
    pub linear_projection: bool,
}

impl Transformer2d {
    pub fn new(channels: usize, s: TransformerSettings, device: &Device) -> Self {
        let projection = || {
            if s.linear_projection {
                Projection::Linear(LinearConfig::new(channels, channels).init(device))
            } else {
                Projection::Conv(conv2d([channels, channels], 1, 1, 0, device))
            }
        };
        Self {
            norm: new_group_norm(s.groups, channels, 1e-6, device),
            proj_in: projection(),
            transformer_blocks: (0..s.depth)
                .map(|_| TransformerBlock::new(channels, s.context_dim, s.heads, device))
                .collect(),
            proj_out: projection(),
        }
    }

    /// # Shapes
    /// - `x`: `[batch, c, h, w]`, `context`: `[batch, tokens, context_dim]`
    /// - returns `[batch, c, h, w]`
    pub fn forward(&self, x: Tensor<4>, context: &Tensor<3>) -> Tensor<4> {
        let [b, c, h, w] = x.dims();
        let to_tokens = |t: Tensor<4>| t.permute([0, 2, 3, 1]).reshape([b, h * w, c]);
        let to_image = |t: Tensor<3>| t.reshape([b, h, w, c]).permute([0, 3, 1, 2]);
        let normed = kernels::group_norm(x.clone(), &self.norm);
        let mut tokens = match &self.proj_in {
            Projection::Conv(conv) => to_tokens(kernels::conv2d(normed, conv)),
            Projection::Linear(linear) => kernels::linear(to_tokens(normed), linear),
        };
        for block in &self.transformer_blocks {
            tokens = block.forward(tokens, context);
        }
        let out = match &self.proj_out {
            Projection::Conv(conv) => kernels::conv2d(to_image(tokens), conv),
            Projection::Linear(linear) => to_image(kernels::linear(tokens, linear)),
        };
        out + x
    }
}
