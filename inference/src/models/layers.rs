//! Building blocks shared by the UNet and the VAE (diffusers `resnet.py`, `embeddings.py`).

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{GroupNorm, GroupNormConfig, Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::{Device, Tensor};
use kernels::{group_norm_silu, silu};

use crate::device::tensor_from_vec;

/// A `k x k` convolution with symmetric padding `pad` and the given stride.
pub fn conv2d(
    channels: [usize; 2],
    k: usize,
    stride: usize,
    pad: usize,
    device: &Device,
) -> Conv2d {
    Conv2dConfig::new(channels, [k, k])
        .with_stride([stride, stride])
        .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
        .init(device)
}

/// A GroupNorm with `groups` groups over `channels` channels.
pub fn new_group_norm(groups: usize, channels: usize, eps: f64, device: &Device) -> GroupNorm {
    GroupNormConfig::new(groups, channels)
        .with_epsilon(eps)
        .init(device)
}

/// diffusers `ResnetBlock2D` (time-conditioned in the UNet, unconditioned in the VAE).
#[derive(Module, Debug)]
pub struct ResnetBlock {
    pub norm1: GroupNorm,
    pub conv1: Conv2d,
    pub time_emb_proj: Option<Linear>,
    pub norm2: GroupNorm,
    pub conv2: Conv2d,
    pub conv_shortcut: Option<Conv2d>,
}

impl ResnetBlock {
    /// A block from `c_in` to `c_out` channels; `temb_channels` adds the time projection.
    pub fn new(
        c_in: usize,
        c_out: usize,
        temb_channels: Option<usize>,
        groups: usize,
        eps: f64,
        device: &Device,
    ) -> Self {
        Self {
            norm1: new_group_norm(groups, c_in, eps, device),
            conv1: conv2d([c_in, c_out], 3, 1, 1, device),
            time_emb_proj: temb_channels.map(|t| LinearConfig::new(t, c_out).init(device)),
            norm2: new_group_norm(groups, c_out, eps, device),
            conv2: conv2d([c_out, c_out], 3, 1, 1, device),
            conv_shortcut: (c_in != c_out).then(|| conv2d([c_in, c_out], 1, 1, 0, device)),
        }
    }

    /// # Shapes
    /// - `x`: `[batch, c_in, h, w]`
    /// - `temb_act`: `[batch, temb_channels]`, already passed through SiLU
    /// - returns `[batch, c_out, h, w]`
    pub fn forward(&self, x: Tensor<4>, temb_act: Option<&Tensor<2>>) -> Tensor<4> {
        let mut h = kernels::conv2d(group_norm_silu(x.clone(), &self.norm1), &self.conv1);
        if let (Some(proj), Some(temb)) = (&self.time_emb_proj, temb_act) {
            h = h + kernels::linear(temb.clone(), proj).unsqueeze_dims::<4>(&[2, 3]);
        }
        let h = kernels::conv2d(group_norm_silu(h, &self.norm2), &self.conv2);
        let skip = match &self.conv_shortcut {
            Some(conv) => kernels::conv2d(x, conv),
            None => x,
        };
        skip + h
    }
}

/// diffusers `Downsample2D`: a stride-2 convolution (`downsamplers.0.conv`).
#[derive(Module, Debug)]
pub struct Downsample {
    pub conv: Conv2d,
}

impl Downsample {
    /// The UNet's form: 3x3, stride 2, padding 1.
    pub fn padded(channels: usize, device: &Device) -> Self {
        Self {
            conv: conv2d([channels, channels], 3, 2, 1, device),
        }
    }

    /// The VAE encoder's form: pad right and bottom by one, then 3x3 stride 2 unpadded.
    pub fn asymmetric(channels: usize, device: &Device) -> Self {
        Self {
            conv: Conv2dConfig::new([channels, channels], [3, 3])
                .with_stride([2, 2])
                .with_padding(PaddingConfig2d::Explicit(0, 0, 1, 1))
                .init(device),
        }
    }

    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        kernels::conv2d(x, &self.conv)
    }
}

/// diffusers `Upsample2D`: nearest-neighbour upscaling, then a 3x3 convolution.
#[derive(Module, Debug)]
pub struct Upsample {
    pub conv: Conv2d,
}

impl Upsample {
    pub fn new(channels: usize, device: &Device) -> Self {
        Self {
            conv: conv2d([channels, channels], 3, 1, 1, device),
        }
    }

    /// Upscales to `size` (twice the input, or the skip connection's size when an odd
    /// size was halved on the way down).
    pub fn forward(&self, x: Tensor<4>, size: [usize; 2]) -> Tensor<4> {
        kernels::upsample_conv(x, &self.conv, size)
    }
}

/// diffusers `TimestepEmbedding`: `linear_2(silu(linear_1(t)))`.
#[derive(Module, Debug)]
pub struct TimestepMlp {
    pub linear_1: Linear,
    pub linear_2: Linear,
}

impl TimestepMlp {
    pub fn new(c_in: usize, c_out: usize, device: &Device) -> Self {
        Self {
            linear_1: LinearConfig::new(c_in, c_out).init(device),
            linear_2: LinearConfig::new(c_out, c_out).init(device),
        }
    }

    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        kernels::linear(silu(kernels::linear(x, &self.linear_1)), &self.linear_2)
    }
}

/// diffusers `get_timestep_embedding` (max period 10000), computed on the host in float32
/// as torch does.
///
/// # Shapes
/// - returns `[timesteps.len(), dim]`
pub fn timestep_embedding(
    timesteps: &[f32],
    dim: usize,
    flip_sin_to_cos: bool,
    freq_shift: f32,
    device: &Device,
) -> Tensor<2> {
    let half = dim / 2;
    let log_max_period = -(10000f64.ln() as f32);
    let freqs: Vec<f32> = (0..half)
        .map(|i| ((log_max_period * i as f32) / (half as f32 - freq_shift)).exp())
        .collect();
    let mut data = Vec::with_capacity(timesteps.len() * dim);
    for &t in timesteps {
        let args: Vec<f32> = freqs.iter().map(|&f| t * f).collect();
        let (sin, cos): (Vec<f32>, Vec<f32>) = args.iter().map(|a| (a.sin(), a.cos())).unzip();
        let (first, second) = if flip_sin_to_cos {
            (cos, sin)
        } else {
            (sin, cos)
        };
        data.extend(first);
        data.extend(second);
        data.extend(std::iter::repeat_n(0.0, dim - 2 * half));
    }
    tensor_from_vec(data, [timesteps.len(), dim], device)
}
