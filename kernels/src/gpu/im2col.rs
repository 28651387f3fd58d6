//! The im2col matrix of a band of a convolution's output rows, one cubecl unit a value:
//! what lets [`crate::conv_gemm`] run a convolution as Burn's matrix product on wgpu.

use burn::backend::Wgpu;
use burn::backend::cubecl::dtype_to_storage_type;
use burn::tensor::{DType, Tensor as BurnTensor};
use burn_cubecl::ops::numeric::empty_device_dtype;
use cubecl::prelude::*;

use crate::conv::ConvShape;

/// Units per cube.
const UNITS: u32 = 256;

#[cube(launch)]
fn im2col_kernel<F: Float>(
    input: &Tensor<F>,
    output: &mut Tensor<F>,
    channels: u32,
    height: u32,
    width: u32,
    kernel_h: u32,
    kernel_w: u32,
    stride_h: u32,
    stride_w: u32,
    pad_top: u32,
    pad_left: u32,
    out_w: u32,
    first_row: u32,
    pixels: u32,
    count: u32,
    #[define(F)] _dtype: ElemType,
) {
    let i = ABSOLUTE_POS;
    if i < count as usize {
        // Output `[image, (channel, ky, kx), pixel of the band]`: row `(c, ky, kx)` is the
        // weight's own `[c_out, c_in, kh, kw]` order, so the weight is the left matrix as it is.
        let pixels = pixels as usize;
        let taps = (kernel_h * kernel_w) as usize;
        let pixel = i % pixels;
        let row = (i / pixels) % (channels as usize * taps);
        let image = i / pixels / (channels as usize * taps);
        let channel = row / taps;
        let ky = (row % taps) / kernel_w as usize;
        let kx = row % kernel_w as usize;
        let oy = first_row as usize + pixel / out_w as usize;
        let ox = pixel % out_w as usize;
        // The tap's position in the padded input; the padding reads as zero.
        let y = oy * stride_h as usize + ky;
        let x = ox * stride_w as usize + kx;
        let mut value = F::cast_from(0.0f32);
        if y >= pad_top as usize && x >= pad_left as usize {
            let y = y - pad_top as usize;
            let x = x - pad_left as usize;
            if y < height as usize && x < width as usize {
                value = input[image * input.stride(0)
                    + channel * input.stride(1)
                    + y * input.stride(2)
                    + x * input.stride(3)];
            }
        }
        output[i] = value;
    }
}

/// The im2col matrix of output rows `first_row..first_row + rows` of the convolution
/// `shape` over `x`, on the wgpu backend: row `(c, ky, kx)`, column `(oy, ox)`, zero where
/// the tap falls on the padding. `None` when `x` is not an f32 or f16 wgpu tensor, or the
/// matrix has more values than a u32 counts (the caller bands smaller or falls back).
///
/// # Shapes
/// - `x`: `[batch, c_in, h, w]` (any strides) -> `[batch, c_in * kh * kw, rows * out_w]`
pub fn im2col(
    x: &BurnTensor<4>,
    shape: &ConvShape,
    first_row: usize,
    rows: usize,
) -> Option<BurnTensor<3>> {
    let dtype = x.dtype();
    let [_, out_w] = shape.output_size()?;
    if !matches!(dtype, DType::F32 | DType::F16) || x.dims() != shape.input_dims() {
        return None;
    }
    let input = x.clone().try_into_primitive::<Wgpu>().ok()?;
    let patch = shape.patch_len();
    let pixels = rows * out_w;
    let count = u32::try_from(shape.batch * patch * pixels).ok()?;
    let small = |n: usize| u32::try_from(n).ok();
    let [kernel_h, kernel_w] = shape.kernel.map(small);
    let [stride_h, stride_w] = shape.stride.map(small);
    let client = input.client.clone();
    let output = empty_device_dtype(
        client.clone(),
        input.device.clone(),
        [shape.batch, patch, pixels].into(),
        dtype,
    );
    let cube_dim = CubeDim::new_1d(UNITS);
    let cubes = cubecl::calculate_cube_count_elemwise(&client, count as usize, cube_dim);
    im2col_kernel::launch(
        &client,
        cubes,
        cube_dim,
        input.into_tensor_arg(),
        output.clone().into_tensor_arg(),
        small(shape.c_in)?,
        small(shape.height)?,
        small(shape.width)?,
        kernel_h?,
        kernel_w?,
        stride_h?,
        stride_w?,
        small(shape.padding[0])?,
        small(shape.padding[1])?,
        small(out_w)?,
        small(first_row)?,
        small(pixels)?,
        count,
        dtype_to_storage_type(dtype),
    );
    Some(BurnTensor::from_primitive::<Wgpu>(output))
}
