//! diffusers' `Upsample2D`, nearest-neighbour 2× then a 3×3 convolution, without the
//! upscaled image: each output pixel of a 2×2 block sees only two rows and two columns of
//! the input (the nearest-neighbour copies repeat them), so the 3×3 kernel folds into four
//! 2×2 kernels, one per position in the block, with the taps that land on the same input
//! pixel summed. One 2×2 convolution with the four stacked computes them on the input at
//! its own size: 16 instead of 36 products per input pixel and channel pair, and no
//! four-times-larger input to write and read. The outputs are then interleaved.
//!
//! GPU backends take it; on the CPU the Winograd convolution already does the 3×3 at about
//! the same cost, so the CPU keeps the upscale-then-convolve path its figures were measured on.

use burn::nn::PaddingConfig2d;
use burn::nn::conv::Conv2d;
use burn::tensor::module::interpolate;
use burn::tensor::ops::{InterpolateMode, InterpolateOptions};
use burn::tensor::{Device, Tensor};

/// Nearest-neighbour upscaling of `x` to `size`, then `conv`.
///
/// # Shapes
/// - `x`: `[batch, channels, h, w]` -> `[batch, out_channels, size[0], size[1]]`
pub fn upsample_conv(x: Tensor<4>, conv: &Conv2d, size: [usize; 2]) -> Tensor<4> {
    let [_, _, h, w] = x.dims();
    // The folded kernels pad the small input with zeros; a wrapped convolution pads the
    // upscaled one circularly ([`crate::wrap`]).
    let wrapped = crate::wrap::current().any();
    if !wrapped && x.device() != Device::flex() && size == [2 * h, 2 * w] && folds(conv) {
        return folded(x, conv);
    }
    crate::conv2d(nearest(x, size), conv)
}

/// Nearest-neighbour upscaling to `size` (torch's `interpolate(mode="nearest")`).
pub(crate) fn nearest(x: Tensor<4>, size: [usize; 2]) -> Tensor<4> {
    let options = InterpolateOptions::new(InterpolateMode::Nearest)
        .with_align_corners(false)
        .with_output_size(size);
    interpolate(x, options)
}

/// A 3×3 convolution at stride 1 with one pixel of padding on each side.
fn folds(conv: &Conv2d) -> bool {
    conv.kernel_size == [3, 3]
        && conv.stride == [1, 1]
        && conv.dilation == [1, 1]
        && conv.groups == 1
        && matches!(conv.padding, PaddingConfig2d::Explicit(1, 1, 1, 1))
}

/// The 2× nearest upscale and 3×3 convolution as one 2×2 convolution of the input (padded
/// by one) with the four folded kernels stacked, then interleaved.
///
/// Output row `2i` reads upscaled rows `2i-1, 2i, 2i+1`, which are input rows `i-1, i, i`:
/// kernel rows `[w0, w1 + w2]` over input rows `i-1, i`. Row `2i+1` reads input rows
/// `i, i, i+1`: `[w0 + w1, w2]` over rows `i, i+1`. Columns fold the same way.
fn folded(x: Tensor<4>, conv: &Conv2d) -> Tensor<4> {
    let [batch, _, h, w] = x.dims();
    let weight = conv.weight.val();
    let [c_out, _, _, _] = weight.dims();
    // Kernel rows (dim 2) or columns (dim 3) folded for the even (0) or odd (1) outputs.
    let fold = |k: Tensor<4>, dim: usize, odd: bool| {
        let tap = |i| k.clone().narrow(dim, i, 1);
        match odd {
            false => Tensor::cat(vec![tap(0), tap(1) + tap(2)], dim),
            true => Tensor::cat(vec![tap(0) + tap(1), tap(2)], dim),
        }
    };
    let mut kernels = Vec::with_capacity(4);
    for odd_row in [false, true] {
        let rows = fold(weight.clone(), 2, odd_row);
        for odd_col in [false, true] {
            kernels.push(fold(rows.clone(), 3, odd_col));
        }
    }
    let kernel = Tensor::cat(kernels, 0); // [4 * c_out, c_in, 2, 2]
    let bias = conv.bias.as_ref().map(|b| b.val().repeat_dim(0, 4));
    let all = convolve_padded(x, kernel, bias); // [b, 4co, h+1, w+1]
    // Position (r, c) of each 2×2 block: rows r..r+h and columns c..c+w of its stack.
    let phase = |index: usize, r: usize, c: usize| {
        all.clone()
            .narrow(1, index * c_out, c_out)
            .narrow(2, r, h)
            .narrow(3, c, w)
    };
    let row = |r: usize| Tensor::stack::<5>(vec![phase(2 * r, r, 0), phase(2 * r + 1, r, 1)], 4);
    Tensor::stack::<6>(vec![row(0), row(1)], 3).reshape([batch, c_out, 2 * h, 2 * w])
}

/// `x` padded by one pixel on every side, convolved with `kernel` at stride 1: on wgpu
/// without matrix units as a matrix product ([`crate::conv_gemm`], which reads the padding
/// as zeros), elsewhere Burn's convolution with that padding. Burn is given the padding
/// rather than a padded copy so that it runs the very problem `conv_gemm` probed its
/// implicit GEMM with (and no copy is made).
fn convolve_padded(x: Tensor<4>, kernel: Tensor<4>, bias: Option<Tensor<1>>) -> Tensor<4> {
    #[cfg(feature = "wgpu")]
    {
        let [batch, c_in, height, width] = x.dims();
        let [c_out, _, kh, kw] = kernel.dims();
        let shape = crate::conv::ConvShape {
            batch,
            c_in,
            height,
            width,
            c_out,
            kernel: [kh, kw],
            stride: [1, 1],
            padding: [1; 4],
        };
        if let Some(y) = crate::conv_gemm::on_wgpu(&x, &kernel, bias.as_ref(), shape) {
            return y;
        }
    }
    let options = burn::tensor::ops::ConvOptions::new([1, 1], [1, 1], [1, 1], 1);
    burn::tensor::module::conv2d(x, kernel, bias, options)
}

#[cfg(test)]
mod tests {
    use burn::nn::conv::Conv2dConfig;
    use burn::tensor::{Distribution, Tensor};

    use super::*;
    use crate::test_support::rel_diff;

    /// The folded kernels give the upscale-then-convolve result (checked here on the CPU,
    /// where the arithmetic is the same as on a GPU; `gpu::tests` runs it on wgpu).
    #[test]
    fn folded_kernels_equal_upscaling_then_convolving() {
        let device = Device::flex();
        for (i, [batch, c_in, c_out, h, w]) in [[2, 8, 8, 5, 7], [1, 3, 5, 1, 1], [1, 16, 4, 6, 6]]
            .into_iter()
            .enumerate()
        {
            let conv = Conv2dConfig::new([c_in, c_out], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .with_bias(i != 1)
                .init(&device);
            assert!(folds(&conv));
            let x =
                Tensor::<4>::random([batch, c_in, h, w], Distribution::Normal(0.0, 1.0), &device);
            let expected = crate::reference::upsample_conv(x.clone(), &conv, [2 * h, 2 * w]);
            let ours = folded(x, &conv);
            let error = rel_diff(ours, expected);
            assert!(error < 1e-5, "case {i}: {error}");
        }
    }

    #[test]
    fn other_convolutions_and_sizes_are_not_folded() {
        let device = Device::flex();
        let conv = |kernel, padding| {
            Conv2dConfig::new([4, 4], kernel)
                .with_padding(padding)
                .init(&device)
        };
        assert!(!folds(&conv([1, 1], PaddingConfig2d::Valid)));
        assert!(!folds(&conv([3, 3], PaddingConfig2d::Valid)));
        assert!(folds(&conv([3, 3], PaddingConfig2d::Explicit(1, 1, 1, 1))));
    }
}
