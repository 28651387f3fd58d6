//! The CPU convolution against Burn's own (`Conv2d::forward`) on the shapes an SD UNet, VAE,
//! ControlNet and ESRGAN use, and on the odd ones (stride 2 with one-sided padding, no bias,
//! padding wider than the kernel reaches).

use burn::module::Param;
use burn::nn::PaddingConfig2d;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::tensor::{DType, Device, Distribution, Tensor};

use crate::test_support::rel_diff;
use crate::{conv2d, reference};

fn module(
    channels: [usize; 2],
    kernel: [usize; 2],
    stride: usize,
    padding: [usize; 4],
    bias: bool,
) -> Conv2d {
    let [top, left, bottom, right] = padding;
    Conv2dConfig::new(channels, kernel)
        .with_stride([stride, stride])
        .with_padding(PaddingConfig2d::Explicit(top, left, bottom, right))
        .with_bias(bias)
        .init(&Device::flex())
}

type Case = ([usize; 4], usize, [usize; 2], usize, [usize; 4], bool);

#[test]
fn matches_burns_convolution() {
    let cases: [Case; 10] = [
        // UNet / VAE 3x3, padding 1.
        ([2, 32, 16, 16], 48, [3, 3], 1, [1; 4], true),
        // Non-square, odd sizes, no bias.
        ([1, 5, 7, 11], 6, [3, 3], 1, [1; 4], false),
        // Downsampler: stride 2, padding 1.
        ([2, 16, 9, 12], 16, [3, 3], 2, [1; 4], true),
        // VAE encoder downsampler: stride 2, padding only bottom and right.
        ([1, 8, 10, 10], 8, [3, 3], 2, [0, 0, 1, 1], true),
        // 1x1 projection (the input is the im2col matrix).
        ([2, 24, 6, 5], 12, [1, 1], 1, [0; 4], true),
        // 1x1 with padding (zero borders around the bias).
        ([1, 4, 3, 3], 3, [1, 1], 1, [1; 4], true),
        // Unpadded 3x3, and a kernel wider than tall.
        ([1, 6, 8, 9], 4, [3, 3], 1, [0; 4], true),
        ([1, 3, 8, 9], 5, [1, 3], 1, [0, 1, 0, 1], true),
        // Padding wider than the kernel reaches: whole rows and columns of bias only.
        ([1, 3, 4, 4], 2, [3, 3], 2, [4, 3, 2, 5], true),
        // A kernel wider than the input: some taps never reach it.
        ([1, 2, 3, 1], 2, [1, 5], 1, [0, 4, 0, 0], true),
    ];
    for (dims, c_out, kernel, stride, padding, bias) in cases {
        let conv = module([dims[1], c_out], kernel, stride, padding, bias);
        let x = Tensor::<4>::random(dims, Distribution::Normal(0.0, 1.0), &Device::flex());
        let diff = rel_diff(conv2d(x.clone(), &conv), reference::conv2d(x, &conv));
        assert!(
            diff < 1e-5,
            "{dims:?} -> {c_out}, kernel {kernel:?} stride {stride} padding {padding:?}: {diff}"
        );
    }
}

#[test]
fn bands_of_rows_cover_the_whole_output() {
    // One band (2^21 floats) holds 28 of the 128 output rows here: 64 channels x 9 taps x
    // 128 columns is 73,728 floats a row.
    let conv = module([64, 8], [3, 3], 1, [1; 4], true);
    let x = Tensor::<4>::random(
        [1, 64, 128, 128],
        Distribution::Normal(0.0, 1.0),
        &Device::flex(),
    );
    let diff = rel_diff(conv2d(x.clone(), &conv), reference::conv2d(x, &conv));
    assert!(diff < 1e-5, "{diff}");
}

#[test]
fn an_input_that_is_a_view_is_read_in_its_logical_order() {
    let conv = module([6, 4], [3, 3], 1, [1; 4], true);
    let x = Tensor::<4>::random(
        [1, 9, 6, 6],
        Distribution::Normal(0.0, 1.0),
        &Device::flex(),
    )
    .swap_dims(2, 3)
    .narrow(1, 2, 6);
    let diff = rel_diff(conv2d(x.clone(), &conv), reference::conv2d(x, &conv));
    assert!(diff < 1e-5, "{diff}");
}

/// The module with its parameters cast to `dtype`.
fn cast_module(conv: &Conv2d, dtype: DType) -> Conv2d {
    let mut cast = conv.clone();
    cast.weight = Param::from_tensor(conv.weight.val().cast(dtype));
    cast.bias = conv
        .bias
        .as_ref()
        .map(|b| Param::from_tensor(b.val().cast(dtype)));
    cast
}

#[test]
fn half_precision_runs_in_float32_and_is_rounded_once() {
    // The float32 convolution of the same (rounded) values, then one rounding to the half
    // type: within half an ulp of it (2^-9 relative for bf16, 2^-12 for f16).
    for (dtype, tolerance) in [(DType::BF16, 4e-3), (DType::F16, 5e-4)] {
        let conv = cast_module(&module([16, 24], [3, 3], 1, [1; 4], true), dtype);
        let x = Tensor::<4>::random(
            [2, 16, 9, 7],
            Distribution::Normal(0.0, 1.0),
            &Device::flex(),
        )
        .cast(dtype);
        let ours = conv2d(x.clone(), &conv);
        assert_eq!(ours.dtype(), dtype);
        let exact = reference::conv2d(x.cast(DType::F32), &cast_module(&conv, DType::F32));
        let diff = rel_diff(ours.cast(DType::F32), exact);
        assert!(diff < tolerance, "{dtype:?}: {diff}");
    }
}
