//! TAESD's decoder (madebyollin's Tiny AutoEncoder for Stable Diffusion, diffusers'
//! `DecoderTiny`): conv + ReLU residual blocks and nearest-neighbour 2x steps that turn
//! sampler-space latents into a full-size picture at a small fraction of the VAE's cost.
//! Ember draws live previews with it.

use burn::module::Module;
use burn::nn::PaddingConfig2d;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::tensor::activation::relu;
use burn::tensor::module::interpolate;
use burn::tensor::ops::{InterpolateMode, InterpolateOptions};
use burn::tensor::{Device, Tensor};

/// The decoder's shape, read from a file's tensors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaesdConfig {
    /// Channels of the latents it decodes (4 for SD 1.x, 2.x and SDXL).
    pub latent_channels: usize,
    /// Feature channels throughout (64 in the released decoders).
    pub channels: usize,
    /// Residual blocks per stage; every stage but the last ends in a 2x upsample and a
    /// convolution (`[3, 3, 3, 1]` in the released decoders).
    pub blocks: Vec<usize>,
}

impl TaesdConfig {
    /// The shape of madebyollin's released decoders (`taesd_decoder.pth`, `taesdxl_…`).
    pub fn released(latent_channels: usize) -> Self {
        Self {
            latent_channels,
            channels: 64,
            blocks: vec![3, 3, 3, 1],
        }
    }

    /// Multiply-adds times two of one decode of `h x w` latents (the convolutions only).
    pub fn flops(&self, h: usize, w: usize) -> f64 {
        let conv = |cin: usize, cout: usize, pixels: usize| (2 * cin * cout * 9 * pixels) as f64;
        let c = self.channels;
        let mut pixels = h * w;
        let mut total = conv(self.latent_channels, c, pixels);
        for (i, &n) in self.blocks.iter().enumerate() {
            total += 3.0 * n as f64 * conv(c, c, pixels);
            if i + 1 < self.blocks.len() {
                pixels *= 4;
                total += conv(c, c, pixels);
            }
        }
        total + conv(c, 3, pixels)
    }

    /// How many times larger than the latents the picture is (8 in the released decoders).
    pub fn scale(&self) -> usize {
        1 << self.blocks.len().saturating_sub(1)
    }

    /// The decoder with uninitialised weights, for loading.
    pub fn init(&self, device: &Device) -> TaesdDecoder {
        let c = self.channels;
        let stages = self.blocks.len();
        TaesdDecoder {
            conv_in: conv3x3([self.latent_channels, c], true, device),
            stages: self
                .blocks
                .iter()
                .enumerate()
                .map(|(i, &n)| TaesdStage {
                    blocks: (0..n).map(|_| TaesdBlock::new(c, device)).collect(),
                    upsample: (i + 1 < stages).then(|| conv3x3([c, c], false, device)),
                })
                .collect(),
            conv_out: conv3x3([c, 3], true, device),
        }
    }
}

fn conv3x3(channels: [usize; 2], bias: bool, device: &Device) -> Conv2d {
    Conv2dConfig::new(channels, [3, 3])
        .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
        .with_bias(bias)
        .init(device)
}

/// `relu(conv3(relu(conv2(relu(conv1(x))))) + x)` (the file's `conv.0`, `conv.2`, `conv.4`).
#[derive(Module, Debug)]
pub struct TaesdBlock {
    pub conv1: Conv2d,
    pub conv2: Conv2d,
    pub conv3: Conv2d,
}

impl TaesdBlock {
    fn new(channels: usize, device: &Device) -> Self {
        Self {
            conv1: conv3x3([channels, channels], true, device),
            conv2: conv3x3([channels, channels], true, device),
            conv3: conv3x3([channels, channels], true, device),
        }
    }

    /// # Shapes
    /// - `x`: `[batch, channels, h, w]` -> the same
    fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let y = relu(kernels::conv2d(x.clone(), &self.conv1));
        let y = relu(kernels::conv2d(y, &self.conv2));
        relu(kernels::conv2d(y, &self.conv3) + x)
    }
}

/// A stage's blocks, then (but in the last stage) a 2x nearest upsample and a convolution.
#[derive(Module, Debug)]
pub struct TaesdStage {
    pub blocks: Vec<TaesdBlock>,
    pub upsample: Option<Conv2d>,
}

/// The whole decoder (module paths are Ember's; the loader maps every file layout onto them).
#[derive(Module, Debug)]
pub struct TaesdDecoder {
    pub conv_in: Conv2d,
    pub stages: Vec<TaesdStage>,
    pub conv_out: Conv2d,
}

impl TaesdDecoder {
    /// The picture the latents show.
    ///
    /// # Shapes
    /// - `latents`: `[batch, latent_channels, h, w]` in the sampler's scaling (TAESD's
    ///   scaling factor is 1) -> `[batch, 3, h * scale, w * scale]`, about [0, 1], not clamped
    pub fn forward(&self, latents: Tensor<4>) -> Tensor<4> {
        // The decoder's `Clamp`: a soft limit at ±3.
        let x = latents.div_scalar(3.0).tanh().mul_scalar(3.0);
        let mut x = relu(kernels::conv2d(x, &self.conv_in));
        for stage in &self.stages {
            for block in &stage.blocks {
                x = block.forward(x);
            }
            if let Some(conv) = &stage.upsample {
                let [_, _, h, w] = x.dims();
                let options = InterpolateOptions::new(InterpolateMode::Nearest)
                    .with_align_corners(false)
                    .with_output_size([2 * h, 2 * w]);
                x = kernels::conv2d(interpolate(x, options), conv);
            }
        }
        kernels::conv2d(x, &self.conv_out)
    }
}
