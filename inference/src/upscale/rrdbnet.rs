//! RRDBNet, the network of ESRGAN and Real-ESRGAN (basicsr `rrdbnet_arch.py`, spandrel's
//! `RRDB.py`): residual-in-residual dense blocks, then nearest-neighbour 2x steps.

use burn::module::Module;
use burn::nn::conv::Conv2d;
use burn::tensor::activation::leaky_relu;
use burn::tensor::module::interpolate;
use burn::tensor::ops::{InterpolateMode, InterpolateOptions};
use burn::tensor::{Device, Tensor};

use crate::models::layers::conv2d;

/// LeakyReLU slope used throughout the network.
const SLOPE: f64 = 0.2;
/// Residual scaling of a dense block and of an RRDB.
const RESIDUAL: f32 = 0.2;

/// The architecture, read from a file's tensor shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RrdbConfig {
    /// Channels the first convolution takes: 3, or 12 / 48 after a pixel unshuffle.
    pub in_channels: usize,
    pub out_channels: usize,
    /// `num_feat` (64 in released models).
    pub features: usize,
    /// `num_grow_ch` (32 in released models).
    pub growth: usize,
    /// `num_block` (23 in ESRGAN x4 models).
    pub blocks: usize,
    /// Nearest-neighbour 2x steps (2 for x4 models).
    pub upsamples: usize,
    /// Real-ESRGAN's pixel unshuffle before the network (1 = none, 2 for x2plus, 4 for x1).
    pub unshuffle: usize,
}

impl RrdbConfig {
    /// The network's net scale on the image: `2^upsamples / unshuffle`.
    pub fn scale(&self) -> usize {
        (1 << self.upsamples) / self.unshuffle
    }

    /// The network with uninitialised weights, for loading.
    pub fn init(&self, device: &Device) -> RrdbNet {
        let nf = self.features;
        RrdbNet {
            conv_first: conv2d([self.in_channels, nf], 3, 1, 1, device),
            body: (0..self.blocks)
                .map(|_| Rrdb::new(nf, self.growth, device))
                .collect(),
            conv_body: conv2d([nf, nf], 3, 1, 1, device),
            conv_ups: (0..self.upsamples)
                .map(|_| conv2d([nf, nf], 3, 1, 1, device))
                .collect(),
            conv_hr: conv2d([nf, nf], 3, 1, 1, device),
            conv_last: conv2d([nf, self.out_channels], 3, 1, 1, device),
        }
    }
}

/// Five convolutions, each seeing the block input and every earlier output.
#[derive(Module, Debug)]
pub struct DenseBlock {
    pub conv1: Conv2d,
    pub conv2: Conv2d,
    pub conv3: Conv2d,
    pub conv4: Conv2d,
    pub conv5: Conv2d,
}

impl DenseBlock {
    fn new(nf: usize, gc: usize, device: &Device) -> Self {
        Self {
            conv1: conv2d([nf, gc], 3, 1, 1, device),
            conv2: conv2d([nf + gc, gc], 3, 1, 1, device),
            conv3: conv2d([nf + 2 * gc, gc], 3, 1, 1, device),
            conv4: conv2d([nf + 3 * gc, gc], 3, 1, 1, device),
            conv5: conv2d([nf + 4 * gc, nf], 3, 1, 1, device),
        }
    }

    /// # Shapes
    /// - `x`: `[batch, features, h, w]` -> the same
    fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let mut seen = vec![x.clone()];
        for conv in [&self.conv1, &self.conv2, &self.conv3, &self.conv4] {
            let next = leaky_relu(kernels::conv2d(Tensor::cat(seen.clone(), 1), conv), SLOPE);
            seen.push(next);
        }
        let x5 = kernels::conv2d(Tensor::cat(seen, 1), &self.conv5);
        x + x5.mul_scalar(RESIDUAL)
    }
}

/// Residual in residual dense block: three dense blocks and a scaled skip.
#[derive(Module, Debug)]
pub struct Rrdb {
    pub rdb1: DenseBlock,
    pub rdb2: DenseBlock,
    pub rdb3: DenseBlock,
}

impl Rrdb {
    fn new(nf: usize, gc: usize, device: &Device) -> Self {
        Self {
            rdb1: DenseBlock::new(nf, gc, device),
            rdb2: DenseBlock::new(nf, gc, device),
            rdb3: DenseBlock::new(nf, gc, device),
        }
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let out = self
            .rdb3
            .forward(self.rdb2.forward(self.rdb1.forward(x.clone())));
        x + out.mul_scalar(RESIDUAL)
    }
}

/// The whole network (module paths are Ember's; `load` maps both file layouts onto them).
#[derive(Module, Debug)]
pub struct RrdbNet {
    pub conv_first: Conv2d,
    pub body: Vec<Rrdb>,
    pub conv_body: Conv2d,
    /// `conv_up1`, `conv_up2`, … (old layout: `model.3`, `model.6`, …).
    pub conv_ups: Vec<Conv2d>,
    pub conv_hr: Conv2d,
    pub conv_last: Conv2d,
}

/// The activations the reference records, for tests.
pub struct Activations {
    pub conv_first: Tensor<4>,
    pub body: Tensor<4>,
    pub conv_body: Tensor<4>,
    pub output: Tensor<4>,
}

impl RrdbNet {
    /// # Shapes
    /// - `x`: `[batch, in_channels, h, w]` (already pixel-unshuffled where the model wants
    ///   it), values in [0, 1] -> `[batch, out_channels, h * 2^upsamples, w * 2^upsamples]`,
    ///   not clamped
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        self.forward_recorded(x).output
    }

    /// [`Self::forward`], keeping the intermediate activations.
    pub fn forward_recorded(&self, x: Tensor<4>) -> Activations {
        let conv_first = kernels::conv2d(x, &self.conv_first);
        let mut body = conv_first.clone();
        for block in &self.body {
            body = block.forward(body);
        }
        let conv_body = kernels::conv2d(body.clone(), &self.conv_body);
        let mut feat = conv_first.clone() + conv_body.clone();
        for conv in &self.conv_ups {
            let [_, _, h, w] = feat.dims();
            let options = InterpolateOptions::new(InterpolateMode::Nearest)
                .with_align_corners(false)
                .with_output_size([2 * h, 2 * w]);
            feat = leaky_relu(kernels::conv2d(interpolate(feat, options), conv), SLOPE);
        }
        let output = kernels::conv2d(
            leaky_relu(kernels::conv2d(feat, &self.conv_hr), SLOPE),
            &self.conv_last,
        );
        Activations {
            conv_first,
            body,
            conv_body,
            output,
        }
    }
}

/// torch's `pixel_unshuffle` on one planar image: channel `c * f² + dy * f + dx` of the result
/// holds `x[c, f*i + dy, f*j + dx]`. `width` and `height` must be multiples of `f`.
pub fn pixel_unshuffle(
    planar: &[f32],
    channels: usize,
    (width, height): (usize, usize),
    f: usize,
) -> Vec<f32> {
    let (w2, h2) = (width / f, height / f);
    let mut out = vec![0f32; planar.len()];
    for c in 0..channels {
        for dy in 0..f {
            for dx in 0..f {
                let oc = c * f * f + dy * f + dx;
                for i in 0..h2 {
                    let src = &planar[c * width * height + (f * i + dy) * width..];
                    let dst = &mut out[oc * w2 * h2 + i * w2..][..w2];
                    for (j, d) in dst.iter_mut().enumerate() {
                        *d = src[f * j + dx];
                    }
                }
            }
        }
    }
    out
}
