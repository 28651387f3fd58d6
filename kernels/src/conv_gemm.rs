//! 2-D convolution on the wgpu backend as one matrix product per band of output rows: the
//! weight (`[c_out, c_in·kh·kw]`, its own layout) times the band's im2col matrix
//! ([`crate::gpu::im2col`]), batched over the images, which writes NCHW directly.
//!
//! Why: on wgpu (WGSL, no cooperative-matrix instructions) Burn's convolution autotune has
//! only its direct kernel for a k×k convolution, each unit reading its `c_in·kh·kw` inputs
//! and weights from global memory with no tiling; its implicit-GEMM kernels need tensor-core
//! instructions WGSL does not have. Burn's matrix products do tile (its "unit" kernels), and
//! accumulate half-precision products in f32 where the direct kernel accumulates in the
//! tensor's own type. Convolutions are 55% of an SD 1.5 UNet's arithmetic and 98% of a VAE
//! decode's. It also skips Burn's NCHW→NHWC copy of the input and the copy back. Where
//! Burn's implicit-GEMM convolutions take a problem on the device's matrix units, Burn's own
//! convolution is kept ([`on_wgpu`]).

use burn::tensor::Tensor;

use crate::conv::ConvShape;

/// Bytes of im2col matrix per band: bounds the extra memory a convolution takes at any size
/// (an SDXL VAE's full-resolution convolutions would need gigabytes in one piece) while
/// keeping each product thousands of columns wide.
pub const BAND_BYTES: usize = 128 << 20;

/// `x` convolved with `weight` (`[c_out, c_in, kh, kw]`) plus `bias` over `shape` on the
/// wgpu backend, by the path that suits the device; `None` where Burn's own convolution
/// should run (the caller runs it) or `x` is not a wgpu float tensor.
///
/// Burn's autotune has implicit-GEMM convolutions on matrix units (cooperative matrices:
/// SPIR-V on NVIDIA, AMD, Intel; CUDA's tensor cores), which never write an im2col matrix and
/// sum in f32; where they take a problem, Burn's convolution runs. Everywhere else its
/// autotune is left with the direct kernel, so this path runs: on a device without matrix
/// units (WGSL, or lavapipe before Mesa 25.3), for f32 tensors on Vulkan (its drivers offer
/// matrix units for half precision only, so an f32 VAE has none even on a GPU with tensor
/// cores), and for problems Burn's implicit GEMM refuses ([`crate::gpu::implicit_gemm`]).
/// `EMBER_GPU_CONV=im2col` or `burn` forces one or the other, to compare the two in one
/// binary.
///
/// # Shapes
/// - `x`: `[batch, c_in, h, w]` -> `[batch, c_out, out_h, out_w]`
pub fn on_wgpu(
    x: &Tensor<4>,
    weight: &Tensor<4>,
    bias: Option<&Tensor<1>>,
    shape: ConvShape,
) -> Option<Tensor<4>> {
    static SETTING: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    if !crate::gpu::is_wgpu_float(x) {
        return None;
    }
    let setting = SETTING.get_or_init(|| std::env::var("EMBER_GPU_CONV").ok());
    match forced(setting.as_deref()) {
        Some(Path::Ours) => return conv2d_gemm(x, weight, bias, shape),
        Some(Path::Burns) => return None,
        None => {}
    }
    use crate::gpu::implicit_gemm::{Verdict, verdict};
    match verdict(x, weight, bias, shape) {
        Verdict::TakenNow(y) => Some(*y),
        Verdict::Taken => None,
        Verdict::Refused => conv2d_gemm(x, weight, bias, shape),
    }
}

/// The two ways a wgpu convolution can go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// This module's im2col product.
    Ours,
    /// Burn's autotuned convolution.
    Burns,
}

/// The path `EMBER_GPU_CONV` forces, if it names one.
fn forced(setting: Option<&str>) -> Option<Path> {
    match setting {
        Some(s) if s.eq_ignore_ascii_case("im2col") => Some(Path::Ours),
        Some(s) if s.eq_ignore_ascii_case("burn") => Some(Path::Burns),
        _ => None,
    }
}

/// `x` convolved with `weight` (`[c_out, c_in, kh, kw]`) plus `bias` over `shape`, on the
/// wgpu backend; `None` where the im2col kernel does not take `x` (the caller runs Burn's).
///
/// # Shapes
/// - `x`: `[batch, c_in, h, w]` -> `[batch, c_out, out_h, out_w]`
pub fn conv2d_gemm(
    x: &Tensor<4>,
    weight: &Tensor<4>,
    bias: Option<&Tensor<1>>,
    shape: ConvShape,
) -> Option<Tensor<4>> {
    banded(x, weight, bias, shape, BAND_BYTES)
}

/// [`conv2d_gemm`] with im2col bands of at most `band_bytes` (at least one output row).
fn banded(
    x: &Tensor<4>,
    weight: &Tensor<4>,
    bias: Option<&Tensor<1>>,
    shape: ConvShape,
    band_bytes: usize,
) -> Option<Tensor<4>> {
    let [out_h, out_w] = shape.output_size()?;
    let ConvShape { batch, c_out, .. } = shape;
    let [kh, kw] = shape.kernel;
    let dtype = x.dtype();
    let fits = crate::gpu::is_wgpu_float(x)
        && x.dims() == shape.input_dims()
        && weight.dims() == [c_out, shape.c_in, kh, kw]
        && weight.dtype() == dtype
        && bias.is_none_or(|b| b.dims() == [c_out] && b.dtype() == dtype);
    if !fits {
        return None;
    }
    let patch = shape.patch_len();
    let weight = weight.clone().reshape([1, c_out, patch]);
    let product = if shape.is_pointwise() {
        // The input is its own im2col matrix.
        weight.matmul(x.clone().reshape([batch, patch, out_h * out_w]))
    } else {
        let row_bytes = batch * patch * out_w * dtype.size();
        let band_rows = (band_bytes / row_bytes.max(1)).clamp(1, out_h);
        let mut bands = Vec::with_capacity(out_h.div_ceil(band_rows));
        for first_row in (0..out_h).step_by(band_rows) {
            let rows = band_rows.min(out_h - first_row);
            let columns = crate::gpu::im2col(x, &shape, first_row, rows)?;
            bands.push(
                weight
                    .clone()
                    .matmul(columns)
                    .reshape([batch, c_out, rows, out_w]),
            );
        }
        if bands.len() == 1 {
            bands.pop()?.reshape([batch, c_out, out_h * out_w])
        } else {
            Tensor::cat(bands, 2).reshape([batch, c_out, out_h * out_w])
        }
    };
    let output = product.reshape([batch, c_out, out_h, out_w]);
    Some(match bias {
        Some(bias) => output + bias.clone().reshape([1, c_out, 1, 1]),
        None => output,
    })
}

#[cfg(test)]
mod tests;
