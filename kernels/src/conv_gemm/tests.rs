//! The wgpu convolution (im2col + matrix product) against Burn's convolution and against an
//! im2col matrix built on the host, on whatever wgpu adapter the machine has (lavapipe in CI).

use burn::module::Module;
use burn::nn::PaddingConfig2d;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::tensor::{DType, Device, Tensor, TensorData};

use super::*;
use crate::gpu::tests::{CastTo, relative_error, values, wgpu};
use crate::reference;

/// `(input [b, c, h, w], c_out, kernel, stride, padding [top, left, bottom, right], bias)`:
/// the UNet's 3×3 and its stride-2 downsampler, a 1×1 shortcut, an unpadded and an
/// asymmetrically padded kernel, a 2×2 (the folded upsampler's), a one-pixel image.
type Case = ([usize; 4], usize, [usize; 2], [usize; 2], [usize; 4], bool);
const CASES: [Case; 7] = [
    ([2, 16, 9, 7], 8, [3, 3], [1, 1], [1, 1, 1, 1], true),
    ([1, 8, 10, 9], 8, [3, 3], [2, 2], [1, 1, 1, 1], true),
    ([2, 12, 5, 6], 20, [1, 1], [1, 1], [0, 0, 0, 0], true),
    ([1, 3, 8, 8], 4, [3, 3], [1, 1], [0, 0, 0, 0], false),
    ([1, 5, 6, 7], 3, [3, 2], [1, 2], [2, 0, 1, 1], true),
    ([2, 4, 4, 5], 16, [2, 2], [1, 1], [1, 1, 1, 1], false),
    ([1, 6, 1, 1], 2, [3, 3], [1, 1], [1, 1, 1, 1], true),
];

fn conv_of(case: &Case, device: &Device) -> Conv2d {
    let (input, c_out, kernel, stride, [top, left, bottom, right], bias) = *case;
    Conv2dConfig::new([input[1], c_out], kernel)
        .with_stride(stride)
        .with_padding(PaddingConfig2d::Explicit(top, left, bottom, right))
        .with_bias(bias)
        .init(device)
}

fn input_of(case: &Case, seed: u64, device: &Device) -> Tensor<4> {
    let dims = case.0;
    let data = TensorData::new(values(dims.iter().product(), seed, 0.5, 4.0), dims);
    Tensor::from_data(data, device)
}

fn shape_of(case: &Case) -> ConvShape {
    let ([batch, c_in, height, width], c_out, kernel, stride, padding, _) = *case;
    ConvShape {
        batch,
        c_in,
        height,
        width,
        c_out,
        kernel,
        stride,
        padding,
    }
}

/// The convolution through `kernels::conv2d` on wgpu (which takes this path) against Burn's
/// own: f32 within 1e-5 of the largest value; in f16 no further from the f32 result on the
/// same f16 values than Burn's own f16 convolution (it sums in f16, the product in f32).
#[test]
fn convolutions_match_burns_in_f32_and_f16() {
    let gpu = wgpu();
    let cpu = Device::flex();
    for (i, case) in CASES.iter().enumerate() {
        let conv = conv_of(case, &gpu);
        let x = input_of(case, i as u64, &gpu);
        let shape = shape_of(case);
        let weight = conv.weight.val();
        let bias = conv.bias.as_ref().map(|b| b.val());
        let ours = conv2d_gemm(&x, &weight, bias.as_ref(), shape).expect("an f32 wgpu tensor");
        let error = relative_error(ours, reference::conv2d(x.clone(), &conv));
        assert!(error <= 1e-5, "case {i}: f32 error {error}");

        let conv16 = conv.clone().map(&mut CastTo(DType::F16));
        let x16 = x.cast(DType::F16);
        let exact = reference::conv2d(
            x16.clone().cast(DType::F32).to_device(&cpu),
            &conv16.clone().map(&mut CastTo(DType::F32)).to_device(&cpu),
        );
        let burn_error = relative_error(
            reference::conv2d(x16.clone(), &conv16).to_device(&cpu),
            exact.clone(),
        );
        let ours = crate::conv2d(x16, &conv16);
        assert_eq!(ours.dtype(), DType::F16);
        let error = relative_error(ours.to_device(&cpu), exact);
        assert!(
            error <= burn_error.max(1e-3),
            "case {i}: f16 error {error}, Burn's convolution {burn_error}"
        );
    }
}

/// Bands of a few rows (the last one short) give the one-band result, and a strided view
/// of the input (a channel slice of a larger tensor) is read through its strides.
#[test]
fn bands_and_strided_inputs_give_the_same_result() {
    let gpu = wgpu();
    let case = CASES[0];
    let conv = conv_of(&case, &gpu);
    let (weight, bias) = (conv.weight.val(), conv.bias.as_ref().map(|b| b.val()));
    let x = input_of(&case, 7, &gpu);
    let shape = shape_of(&case);
    let whole = conv2d_gemm(&x, &weight, bias.as_ref(), shape).unwrap();
    let [b, c, h, w] = case.0;
    for band_rows in [1, 2, 4] {
        let band_bytes = band_rows * b * shape.patch_len() * w * 4;
        let banded = banded(&x, &weight, bias.as_ref(), shape, band_bytes).unwrap();
        let error = relative_error(banded, whole.clone());
        assert!(error <= 1e-6, "{band_rows} rows a band: {error}");
    }
    let wider = Tensor::cat(vec![x.clone(), x.clone().neg()], 1); // [b, 2c, h, w]
    let view = wider.narrow(1, 0, c);
    assert_eq!(view.dims(), [b, c, h, w]);
    let strided = conv2d_gemm(&view, &weight, bias.as_ref(), shape).unwrap();
    assert!(relative_error(strided, whole) <= 1e-6);
}

/// The im2col kernel against the matrix built value by value on the host, for a band that
/// starts past the first row and every case's padding and stride.
#[test]
fn im2col_matches_the_matrix_built_on_the_host() {
    let gpu = wgpu();
    for (i, case) in CASES.iter().enumerate() {
        let shape = shape_of(case);
        let [out_h, out_w] = shape.output_size().unwrap();
        let (first_row, rows) = (out_h / 2, out_h - out_h / 2);
        let x = input_of(case, 20 + i as u64, &gpu);
        let host = x.clone().into_data().try_to_vec::<f32>().unwrap();
        let ours = crate::gpu::im2col(&x, &shape, first_row, rows).unwrap();
        let [ph, pw] = [shape.kernel[0], shape.kernel[1]];
        let mut expected = Vec::new();
        for n in 0..shape.batch {
            for c in 0..shape.c_in {
                for ky in 0..ph {
                    for kx in 0..pw {
                        for oy in first_row..first_row + rows {
                            for ox in 0..out_w {
                                let y = (oy * shape.stride[0] + ky) as isize
                                    - shape.padding[0] as isize;
                                let x = (ox * shape.stride[1] + kx) as isize
                                    - shape.padding[1] as isize;
                                let inside = (0..shape.height as isize).contains(&y)
                                    && (0..shape.width as isize).contains(&x);
                                expected.push(if inside {
                                    host[((n * shape.c_in + c) * shape.height + y as usize)
                                        * shape.width
                                        + x as usize]
                                } else {
                                    0.0
                                });
                            }
                        }
                    }
                }
            }
        }
        let dims = [shape.batch, shape.patch_len(), rows * out_w];
        assert_eq!(ours.dims(), dims, "case {i}");
        assert_eq!(
            ours.into_data().try_to_vec::<f32>().unwrap(),
            expected,
            "case {i}"
        );
    }
}

/// CPU tensors and types the kernel does not take are left to the caller.
#[test]
fn tensors_it_does_not_take_are_declined() {
    let gpu = wgpu();
    let case = CASES[0];
    let conv = conv_of(&case, &gpu);
    let (weight, bias) = (conv.weight.val(), conv.bias.as_ref().map(|b| b.val()));
    let x = input_of(&case, 3, &gpu);
    let shape = shape_of(&case);
    let cpu = Device::flex();
    assert!(
        conv2d_gemm(
            &x.clone().to_device(&cpu),
            &weight.clone().to_device(&cpu),
            None,
            shape
        )
        .is_none()
    );
    let wrong = ConvShape { c_in: 3, ..shape };
    assert!(conv2d_gemm(&x, &weight, bias.as_ref(), wrong).is_none());
}

#[test]
fn ember_gpu_conv_forces_a_path_by_name() {
    assert_eq!(forced(None), None);
    assert_eq!(forced(Some("anything else")), None);
    assert_eq!(forced(Some("im2col")), Some(Path::Ours));
    assert_eq!(forced(Some("IM2COL")), Some(Path::Ours));
    assert_eq!(forced(Some("burn")), Some(Path::Burns));
}

/// `conv2d` on wgpu never leaves a convolution to Burn's direct kernel: an f32 one (no
/// Vulkan driver offers matrix units for f32) is this module's im2col product, and an f16
/// one with 4608 products a value sums them in f32 whichever path takes it (Burn's implicit
/// GEMM where it launches, else this module's), within 2e-3 of the f32 result on the same
/// f16 values. Burn's own convolution (`EMBER_GPU_CONV=burn`), whose autotune kept its
/// direct kernel summing in f16, was 0.022 off on lavapipe with matrix units (Mesa 26.1).
/// Meaningful on a device with matrix units for f16 (`tests/gpu/matrix_units.sh` runs it
/// there); elsewhere every wgpu convolution takes this path anyway.
#[test]
fn no_convolution_is_left_to_burns_direct_kernel() {
    let gpu = wgpu();
    let cpu = Device::flex();
    let case: Case = ([1, 512, 8, 8], 64, [3, 3], [1, 1], [1, 1, 1, 1], true);
    let conv = conv_of(&case, &gpu);
    let x = input_of(&case, 7, &gpu);
    let (weight, bias) = (conv.weight.val(), conv.bias.as_ref().map(|b| b.val()));
    let shape = shape_of(&case);
    let ours = on_wgpu(&x, &weight, bias.as_ref(), shape).expect("an f32 wgpu tensor");
    let im2col = conv2d_gemm(&x, &weight, bias.as_ref(), shape).unwrap();
    assert_eq!(
        relative_error(ours, im2col),
        0.0,
        "f32 takes the im2col product"
    );

    let conv16 = conv.clone().map(&mut CastTo(DType::F16));
    let x16 = x.clone().cast(DType::F16);
    let exact = reference::conv2d(
        x16.clone().cast(DType::F32).to_device(&cpu),
        &conv16.clone().map(&mut CastTo(DType::F32)).to_device(&cpu),
    );
    for call in ["first", "second"] {
        let y = crate::conv::conv2d(x16.clone(), &conv16);
        let error = relative_error(y.to_device(&cpu), exact.clone());
        assert!(error <= 2e-3, "{call} f16 call: error {error}");
    }
    assert!(on_wgpu(&x.to_device(&cpu), &weight.to_device(&cpu), None, shape).is_none());
}
