//! 2-D convolution on the CPU: im2col by whole-row copies and one `gemm` product per band of
//! output rows, written straight into the NCHW output.
//!
//! burn-flex's general convolution converts the input to NHWC, re-lays the weight out on every
//! call (both on one thread), builds the im2col matrix in 512-pixel tiles into freshly zeroed
//! buffers and scatters each tile's product back into NCHW: about a tenth of an SD UNet step
//! on two cores. Here the im2col rows are ordered `(c_in, ky, kx)`, which is the weight's own
//! `[c_out, c_in, kh, kw]` layout read as a `c_out x (c_in·kh·kw)` matrix, so the weight is
//! used as it is; each im2col row is a shifted copy of an input row (a `memcpy` at stride 1);
//! and the product of a band writes the output's rows in place. The 3×3, stride-1,
//! padding-1 convolutions with enough channels, most of a UNet's and a VAE's work, take the
//! Winograd path instead (`winograd`: 2.25× fewer multiplications).

use burn::nn::PaddingConfig2d;
use burn::nn::conv::Conv2d;
use burn::tensor::{DType, Device, Tensor, TensorData};
use rayon::prelude::*;

use crate::gemm::{Gemm, gemm_f32_parallel};
use crate::{reference, with_host_slice};

/// A [`Conv2d`] module's forward pass. On the CPU [`conv2d_nchw`] (f16 and bf16 tensors
/// cast to float32 for it and the result cast back); on the wgpu backend an im2col matrix and
/// Burn's matrix product, or Burn's convolution where its implicit GEMM takes the problem on
/// the matrix units ([`crate::conv_gemm::on_wgpu`]); for grouped, dilated or `Same`-padded
/// convolutions, the module's own `forward` ([`reference::conv2d`]). Inside
/// [`crate::wrap::with_wrap`] the wrapped axes are padded circularly first.
///
/// # Shapes
/// - `x`: `[batch, c_in, h, w]` -> `[batch, c_out, out_h, out_w]`
pub fn conv2d(x: Tensor<4>, conv: &Conv2d) -> Tensor<4> {
    let wrap = crate::wrap::current();
    if wrap.any() {
        return crate::wrap::convolve(x, conv, wrap);
    }
    convolve(x, conv)
}

/// Whether the CPU's Winograd path takes `conv` on `x`.
pub(crate) fn takes_winograd(x: &Tensor<4>, conv: &Conv2d) -> bool {
    let bias = conv.bias.as_ref().map(|b| b.val());
    cpu_conv_shape(x, &conv.weight.val(), bias.as_ref(), conv)
        .is_some_and(|s| winograd::applies(&s))
}

/// [`conv2d`] with `conv`'s own padding (zeros).
pub(crate) fn convolve(x: Tensor<4>, conv: &Conv2d) -> Tensor<4> {
    let weight = conv.weight.val();
    let bias = conv.bias.as_ref().map(|b| b.val());
    #[cfg(feature = "wgpu")]
    if let Some(shape) = conv_shape(&x, &weight, bias.as_ref(), conv)
        && let Some(y) = crate::conv_gemm::on_wgpu(&x, &weight, bias.as_ref(), shape)
    {
        return y;
    }
    let Some(shape) = cpu_conv_shape(&x, &weight, bias.as_ref(), conv) else {
        return reference::conv2d(x, conv);
    };
    let dtype = x.dtype();
    let f32 = |t: Tensor<4>| t.cast(DType::F32);
    let (x, weight, bias) = (f32(x), f32(weight), bias.map(|b| b.cast(DType::F32)));
    let [out_h, out_w] = shape.output_size().expect("checked by cpu_conv_shape");
    let device = x.device();
    let output = with_host_slice(x, |input| {
        with_host_slice(weight, |weight| match bias {
            Some(bias) => {
                with_host_slice(bias, |bias| conv2d_nchw(input, weight, Some(bias), shape))
            }
            None => conv2d_nchw(input, weight, None, shape),
        })
    });
    let dims = [shape.batch, shape.c_out, out_h, out_w];
    Tensor::<4>::from_data(TensorData::new(output, dims), &device).cast(dtype)
}

/// The geometry of `conv` on `x` when the CPU kernel takes it: [`conv_shape`] on the CPU.
fn cpu_conv_shape(
    x: &Tensor<4>,
    weight: &Tensor<4>,
    bias: Option<&Tensor<1>>,
    conv: &Conv2d,
) -> Option<ConvShape> {
    if x.device() != Device::flex() {
        return None;
    }
    conv_shape(x, weight, bias, conv)
}

/// The geometry of `conv` on `x` on any device: a float32 or half tensor with parameters
/// of the same type, `groups = 1`, `dilation = 1`, explicit (or no) padding, no empty
/// dimension.
fn conv_shape(
    x: &Tensor<4>,
    weight: &Tensor<4>,
    bias: Option<&Tensor<1>>,
    conv: &Conv2d,
) -> Option<ConvShape> {
    let dtype = x.dtype();
    let same_type = weight.dtype() == dtype && bias.is_none_or(|b| b.dtype() == dtype);
    let float = matches!(dtype, DType::F32 | DType::F16 | DType::BF16);
    if !(float && same_type) || conv.groups != 1 || conv.dilation != [1, 1] {
        return None;
    }
    let padding = match conv.padding {
        PaddingConfig2d::Explicit(top, left, bottom, right) => [top, left, bottom, right],
        PaddingConfig2d::Valid => [0; 4],
        PaddingConfig2d::Same => return None,
    };
    let [batch, c_in, height, width] = x.dims();
    let [c_out, weight_c_in, kh, kw] = weight.dims();
    let shape = ConvShape {
        batch,
        c_in,
        height,
        width,
        c_out,
        kernel: [kh, kw],
        stride: conv.stride,
        padding,
    };
    let non_empty = [batch, c_in, height, width, c_out, kh, kw]
        .iter()
        .all(|&n| n > 0);
    (non_empty
        && weight_c_in == c_in
        && [kh, kw] == conv.kernel_size
        && bias.is_none_or(|b| b.dims() == [c_out])
        && shape.output_size().is_some())
    .then_some(shape)
}

/// The geometry of one convolution (`groups = 1`, `dilation = 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvShape {
    pub batch: usize,
    pub c_in: usize,
    pub height: usize,
    pub width: usize,
    pub c_out: usize,
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Vertical and horizontal stride.
    pub stride: [usize; 2],
    /// Padding `[top, left, bottom, right]`, as Burn's `PaddingConfig2d::Explicit`.
    pub padding: [usize; 4],
}

impl ConvShape {
    /// Output `[height, width]`; `None` when the kernel does not fit the padded input.
    pub fn output_size(&self) -> Option<[usize; 2]> {
        let [top, left, bottom, right] = self.padding;
        let size = |input: usize, pad: usize, kernel: usize, stride: usize| {
            let padded = input + pad;
            (stride > 0 && kernel > 0 && padded >= kernel).then(|| (padded - kernel) / stride + 1)
        };
        Some([
            size(self.height, top + bottom, self.kernel[0], self.stride[0])?,
            size(self.width, left + right, self.kernel[1], self.stride[1])?,
        ])
    }

    /// The input's `[batch, c_in, height, width]`.
    pub fn input_dims(&self) -> [usize; 4] {
        [self.batch, self.c_in, self.height, self.width]
    }

    /// Length of one im2col column: the weight's row length.
    pub(crate) fn patch_len(&self) -> usize {
        self.c_in * self.kernel[0] * self.kernel[1]
    }

    /// Whether the input itself is the im2col matrix (a 1x1 kernel at stride 1, unpadded).
    pub(crate) fn is_pointwise(&self) -> bool {
        self.kernel == [1, 1] && self.stride == [1, 1] && self.padding == [0; 4]
    }
}

/// Floats of im2col matrix per band: about 8 MiB, a quarter of this L3, which keeps the
/// band in cache between its copy and the product's packing of it.
const BAND_FLOATS: usize = 1 << 21;

/// Convolves NCHW `input` with `weight` (`[c_out, c_in, kh, kw]`) and adds `bias`
/// (`[c_out]`), returning the NCHW output (`[batch, c_out, out_h, out_w]`).
///
/// # Panics
/// If a slice's length does not match `shape` or the kernel does not fit the padded input;
/// the tensor-level [`crate::conv2d`] checks both first.
pub fn conv2d_nchw(
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    shape: ConvShape,
) -> Vec<f32> {
    let ConvShape {
        batch,
        c_in,
        height,
        width,
        c_out,
        ..
    } = shape;
    assert!(
        shape.output_size().is_some(),
        "conv2d: the kernel does not fit the padded input"
    );
    assert_eq!(
        input.len(),
        batch * c_in * height * width,
        "conv2d: input length"
    );
    assert_eq!(
        weight.len(),
        c_out * shape.patch_len(),
        "conv2d: weight length"
    );
    if let Some(bias) = bias {
        assert_eq!(bias.len(), c_out, "conv2d: bias length");
    }
    if winograd::applies(&shape) {
        winograd::conv3x3(input, weight, bias, shape)
    } else {
        im2col_conv(input, weight, bias, shape)
    }
}

/// [`conv2d_nchw`] as one product of the weight with each band's im2col matrix.
fn im2col_conv(input: &[f32], weight: &[f32], bias: Option<&[f32]>, shape: ConvShape) -> Vec<f32> {
    let [out_h, out_w] = shape
        .output_size()
        .expect("the kernel fits the padded input");
    let ConvShape {
        batch,
        c_in,
        height,
        width,
        c_out,
        ..
    } = shape;
    let plane = out_h * out_w;
    let mut output = vec![0f32; batch * c_out * plane];
    if let Some(bias) = bias {
        output
            .par_chunks_mut(plane)
            .enumerate()
            .for_each(|(i, out)| out.fill(bias[i % c_out]));
    }
    let patch = shape.patch_len();
    // Whole output rows per band, at least one.
    let band_rows = (BAND_FLOATS / (patch * out_w).max(1)).clamp(1, out_h);
    let mut columns = if shape.is_pointwise() {
        Vec::new()
    } else {
        vec![0f32; patch * band_rows * out_w]
    };
    for (image, out_image) in input
        .chunks_exact(c_in * height * width)
        .zip(output.chunks_exact_mut(c_out * plane))
    {
        if shape.is_pointwise() {
            product(
                out_image,
                plane,
                weight,
                image,
                [c_out, plane, patch],
                plane,
            );
            continue;
        }
        for y0 in (0..out_h).step_by(band_rows) {
            let rows = band_rows.min(out_h - y0);
            let n = rows * out_w;
            let band = &mut columns[..patch * n];
            fill_columns(band, image, shape, [y0, rows], out_w);
            product(
                &mut out_image[y0 * out_w..],
                plane,
                weight,
                band,
                [c_out, n, patch],
                n,
            );
        }
    }
    output
}

/// `dst (c_out x n, row stride dst_stride) += weight (c_out x k) @ columns (k x n, row
/// stride col_stride)`, on every core.
fn product(
    dst: &mut [f32],
    dst_stride: usize,
    weight: &[f32],
    columns: &[f32],
    [m, n, k]: [usize; 3],
    col_stride: usize,
) {
    gemm_f32_parallel(Gemm {
        m,
        n,
        k,
        dst,
        dst_row_stride: dst_stride,
        accumulate: true,
        lhs: weight,
        lhs_row_stride: k,
        lhs_col_stride: 1,
        rhs: columns,
        rhs_row_stride: col_stride,
        rhs_col_stride: 1,
        scale: 1.0,
    });
}

/// Writes the im2col rows of output rows `y0 .. y0 + rows` of one image: row `(c, ky, kx)`
/// holds `input[c, y·sy + ky − top, x·sx + kx − left]` for every output pixel `(y, x)` of the
/// band, zero where that falls in the padding.
fn fill_columns(
    band: &mut [f32],
    image: &[f32],
    shape: ConvShape,
    [y0, rows]: [usize; 2],
    out_w: usize,
) {
    let ConvShape {
        height,
        width,
        kernel: [kh, kw],
        stride: [sy, sx],
        padding: [top, left, ..],
        ..
    } = shape;
    let n = rows * out_w;
    band.par_chunks_mut(n).enumerate().for_each(|(row, dst)| {
        let (c, ky, kx) = (row / (kh * kw), row / kw % kh, row % kw);
        let channel = &image[c * height * width..(c + 1) * height * width];
        // Output columns whose input column lies inside the image: x·sx + kx − left ∈ [0, width).
        let first = left.saturating_sub(kx).div_ceil(sx).min(out_w);
        let end = ((width + left).saturating_sub(kx))
            .div_ceil(sx)
            .clamp(first, out_w);
        for (dst_row, y) in dst.chunks_exact_mut(out_w).zip(y0..) {
            let iy = (y * sy + ky).checked_sub(top).filter(|&iy| iy < height);
            let Some(iy) = iy else {
                dst_row.fill(0.0);
                continue;
            };
            let src = &channel[iy * width..(iy + 1) * width];
            dst_row[..first].fill(0.0);
            dst_row[end..].fill(0.0);
            if first == end {
                continue;
            }
            let x0 = first * sx + kx - left;
            if sx == 1 {
                dst_row[first..end].copy_from_slice(&src[x0..x0 + (end - first)]);
            } else {
                for (d, s) in dst_row[first..end]
                    .iter_mut()
                    .zip(src[x0..].iter().step_by(sx))
                {
                    *d = *s;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests;
mod winograd;
