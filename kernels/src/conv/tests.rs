//! The CPU convolution against Burn's own (`Conv2d::forward`) on the shapes an SD UNet, VAE,
//! ControlNet and ESRGAN use, and on the odd ones (stride 2 with one-sided padding, no bias,
//! padding wider than the kernel reaches).

use burn::module::Param;
use burn::nn::PaddingConfig2d;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::tensor::{DType, Device, Distribution, Tensor, TensorData};

use super::{ConvShape, winograd};
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

#[test]
fn winograd_tiles_cover_odd_sizes_and_bands_that_cross_images() {
    // 3x3, stride 1, padding 1 with at least 16 channels each way takes the Winograd path.
    // [3, 16, 50, 16]: 8 tiles a row, bands of 64 tile rows over 3 images of 25: the first
    // band ends inside the third image.
    let cases: [([usize; 4], usize, bool); 4] = [
        ([1, 16, 7, 11], 16, true),
        ([3, 16, 50, 16], 20, true),
        ([2, 64, 5, 3], 32, false),
        ([1, 17, 1, 1], 19, true),
    ];
    for (dims, c_out, bias) in cases {
        let conv = module([dims[1], c_out], [3, 3], 1, [1; 4], bias);
        let x = Tensor::<4>::random(dims, Distribution::Normal(0.0, 1.0), &Device::flex());
        let diff = rel_diff(conv2d(x.clone(), &conv), reference::conv2d(x, &conv));
        assert!(diff < 1e-5, "{dims:?} -> {c_out}: {diff}");
    }
}

#[test]
fn winograd_bands_of_any_height_give_the_same_output() {
    // 3 images of 5 tile rows (height 9: the last tile row has one output row).
    let shape = ConvShape {
        batch: 3,
        c_in: 16,
        height: 9,
        width: 6,
        c_out: 18,
        kernel: [3, 3],
        stride: [1, 1],
        padding: [1; 4],
    };
    let conv = module([shape.c_in, shape.c_out], [3, 3], 1, [1; 4], true);
    let x = Tensor::<4>::random(
        [shape.batch, shape.c_in, shape.height, shape.width],
        Distribution::Normal(0.0, 1.0),
        &Device::flex(),
    );
    let expected = reference::conv2d(x.clone(), &conv);
    let values = |t: Tensor<4>| t.into_data().try_to_vec::<f32>().unwrap();
    let (input, weight) = (values(x), values(conv.weight.val()));
    let bias = conv
        .bias
        .as_ref()
        .unwrap()
        .val()
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    for band_rows in [1, 2, 4, 7, 15] {
        let ours = winograd::conv3x3_in_bands(&input, &weight, Some(&bias), shape, band_rows);
        let ours = Tensor::<4>::from_data(TensorData::new(ours, expected.dims()), &Device::flex());
        let diff = rel_diff(ours, expected.clone());
        assert!(diff < 1e-5, "bands of {band_rows} tile rows: {diff}");
    }
}

#[test]
fn winograd_error_stays_at_the_direct_products_level_over_many_channels() {
    // 2,560 input channels (SDXL's widest) sum 23,040 products per output; F(2x2, 3x3)'s
    // transforms add a few roundings to each. Both paths are compared with a float64
    // convolution of the same values (seen: Winograd 8e-7 of the largest output, the direct
    // product 4e-7).
    let shape = ConvShape {
        batch: 1,
        c_in: 2560,
        height: 6,
        width: 5,
        c_out: 16,
        kernel: [3, 3],
        stride: [1, 1],
        padding: [1; 4],
    };
    let (h, w) = (shape.height, shape.width);
    let values = |len: usize| -> Vec<f32> {
        let t = Tensor::<1>::random([len], Distribution::Normal(0.0, 1.0), &Device::flex());
        t.into_data().try_to_vec::<f32>().unwrap()
    };
    let input = values(shape.c_in * h * w);
    let weight = values(shape.c_out * shape.c_in * 9);
    let mut exact = vec![0f64; shape.c_out * h * w];
    for (k, out) in exact.chunks_exact_mut(h * w).enumerate() {
        for (c, (y, x)) in
            (0..shape.c_in).flat_map(|c| (0..h * w).map(move |p| (c, (p / w, p % w))))
        {
            for (ky, kx) in (0..3).flat_map(|ky| (0..3).map(move |kx| (ky, kx))) {
                let (iy, ix) = ((y + ky).wrapping_sub(1), (x + kx).wrapping_sub(1));
                if iy < h && ix < w {
                    out[y * w + x] += f64::from(weight[(k * shape.c_in + c) * 9 + ky * 3 + kx])
                        * f64::from(input[(c * h + iy) * w + ix]);
                }
            }
        }
    }
    let scale = exact.iter().fold(0f64, |m, v| m.max(v.abs()));
    let error = |ours: Vec<f32>| {
        ours.iter()
            .zip(&exact)
            .fold(0f64, |m, (a, b)| m.max((f64::from(*a) - b).abs()))
            / scale
    };
    let winograd = error(winograd::conv3x3(&input, &weight, None, shape));
    let direct = error(super::im2col_conv(&input, &weight, None, shape));
    println!(
        "largest error relative to the largest output: winograd {winograd:e}, direct {direct:e}"
    );
    assert!(
        winograd < 4e-6 && winograd < 8.0 * direct.max(1e-7),
        "winograd {winograd:e}, direct {direct:e}"
    );
}
