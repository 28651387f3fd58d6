//! The plain-Burn definitions the kernels must match (and the path every non-CPU device takes).

use burn::tensor::Tensor;
use burn::tensor::activation;
use burn::tensor::module;

/// SiLU.
pub fn silu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    activation::silu(x)
}

/// Exact GELU.
pub fn gelu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    activation::gelu(x)
}

/// `hidden * gelu(gate)` over the two halves of the last dimension.
pub fn geglu(x: Tensor<3>) -> Tensor<3> {
    let inner = x.dims()[2] / 2;
    let hidden = x.clone().narrow(2, 0, inner);
    let gate = x.narrow(2, inner, inner);
    hidden * activation::gelu(gate)
}

/// A 2-D convolution: Burn's module.
pub fn conv2d(x: Tensor<4>, conv: &burn::nn::conv::Conv2d) -> Tensor<4> {
    conv.forward(x)
}

/// A linear layer: Burn's module.
pub fn linear<const D: usize>(x: Tensor<D>, linear: &burn::nn::Linear) -> Tensor<D> {
    linear.forward(x)
}

/// GroupNorm (Burn's module, statistics in f32 for half-precision inputs), then SiLU when
/// `silu`.
pub fn group_norm_silu(x: Tensor<4>, norm: &burn::nn::GroupNorm, silu: bool) -> Tensor<4> {
    let y = norm.forward(x);
    if silu { activation::silu(y) } else { y }
}

/// Burn's scaled dot-product attention without a mask.
pub fn attention(q: Tensor<4>, k: Tensor<4>, v: Tensor<4>) -> Tensor<4> {
    module::attention(q, k, v, None, None, Default::default())
}

/// `base + scale * lhs @ rhs` (a weight with a low-rank update merged in).
pub fn add_product(base: Tensor<2>, lhs: Tensor<2>, rhs: Tensor<2>, scale: f32) -> Tensor<2> {
    base + lhs.matmul(rhs).mul_scalar(scale)
}

/// diffusers' `Upsample2D`: nearest-neighbour upscaling to `size`, then `conv` (Burn's
/// module).
pub fn upsample_conv(x: Tensor<4>, conv: &burn::nn::conv::Conv2d, size: [usize; 2]) -> Tensor<4> {
    conv.forward(crate::upsample::nearest(x, size))
}
