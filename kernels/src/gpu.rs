//! Ember's cubecl kernels for Burn's GPU backends (wgpu): each takes over from a chain of
//! Burn operations that would each read and write the whole activation, and falls back to
//! the plain-Burn reference for any tensor it does not handle.
//!
//! `group_norm_silu`: GroupNorm (+ SiLU) in one kernel, one cube per (image, group) (for
//! groups of over 16384 values, `group_norm_wide`'s three with many cubes a group): the
//! mean and the variance around it in f32 whatever the tensor's float format (the issue's
//! "f16 in/out, f32 statistics"), then the scale, shift and SiLU written in one pass. Burn
//! makes about ten operations of it, each a pass over the activation.
//!
//! `im2col`: a convolution's im2col matrix, for [`crate::conv_gemm`].
//!
//! `geglu`: the transformer feed-forward's gate, `hidden * gelu(gate)` over the two halves
//! of the projection, one unit an output value, the GELU in f32: one read of the
//! projection and one write, where Burn makes two strided slices, the GELU's several
//! elementwise passes and the product.

use burn::backend::Wgpu;
use burn::backend::cubecl::dtype_to_storage_type;
use burn::tensor::{DType, Tensor as BurnTensor};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use cubecl::prelude::*;

use crate::padded_attention::MatrixTiles;

mod group_norm_wide;
mod im2col;
pub mod implicit_gemm;
pub use im2col::im2col;

/// Whether `x` is an f32 or f16 tensor on the wgpu backend, what these kernels take.
pub fn is_wgpu_float<const D: usize>(x: &BurnTensor<D>) -> bool {
    matches!(x.dtype(), DType::F32 | DType::F16) && x.clone().try_into_primitive::<Wgpu>().is_ok()
}

/// The language Burn compiles every kernel to on `device`: `"spirv"` on a Vulkan adapter
/// whose driver has what cubecl's SPIR-V needs, `"wgsl"` elsewhere; `None` off wgpu.
pub fn shader_language(device: &burn::tensor::Device) -> Option<&'static str> {
    let probe = BurnTensor::<1>::zeros([1], device);
    let name = probe.try_into_primitive::<Wgpu>().ok()?.client.name();
    // cubecl names the runtime by its compiler: "wgpu<spirv>", "wgpu<wgsl>", "wgpu<msl>".
    name.strip_prefix("wgpu<")?.strip_suffix('>')
}

/// Whether `x`'s device has matrix units Burn's kernels can use for `x`'s own float type
/// (cooperative matrices: SPIR-V on a GPU whose Vulkan driver offers them; never through
/// WGSL; CUDA's tensor cores, tf32 counting for f32). Vulkan drivers offer them for f16
/// (some for bf16), never for f32: an f32 tensor there has none even on a GPU with tensor
/// cores.
pub fn has_matrix_units_for<const D: usize>(x: &BurnTensor<D>) -> bool {
    use cubecl::ir::{ElemType, FloatKind};
    let kinds: &[FloatKind] = match x.dtype() {
        DType::F16 => &[FloatKind::F16],
        DType::BF16 => &[FloatKind::BF16],
        DType::F32 => &[FloatKind::F32, FloatKind::TF32],
        _ => return false,
    };
    let Ok(tensor) = x.clone().try_into_primitive::<Wgpu>() else {
        return false;
    };
    let properties = tensor.client.properties();
    let mut instructions = properties.features.matmul.cmma.iter();
    instructions.any(|mma| {
        kinds
            .iter()
            .any(|&kind| mma.a_type == ElemType::Float(kind))
            && mma.b_type == mma.a_type
    })
}

/// The tiles of the matrix units of `x`'s device for half-precision inputs, which Burn's
/// tensor-core attention needs its problems padded to ([`crate::padded_attention`]); `None`
/// off wgpu or without matrix units.
pub fn matrix_tiles<const D: usize>(x: &BurnTensor<D>) -> Option<MatrixTiles> {
    let tensor = x.clone().try_into_primitive::<Wgpu>().ok()?;
    let f16 = cubecl::ir::ElemType::Float(cubecl::ir::FloatKind::F16);
    let properties = tensor.client.properties();
    let instructions = properties.features.matmul.cmma.iter();
    MatrixTiles::for_instructions(
        instructions
            .filter(|mma| mma.a_type == f16 && mma.b_type == f16)
            .map(|mma| (mma.m, mma.n, mma.k)),
    )
}

/// Units per cube: the reductions halve this, so it is a power of two.
const UNITS: u32 = 256;

#[cube(launch)]
fn group_norm_kernel<F: Float>(
    input: &Tensor<F>,
    gamma: &Tensor<F>,
    beta: &Tensor<F>,
    output: &mut Tensor<F>,
    groups: u32,
    channels_per_group: u32,
    pixels: u32,
    epsilon: f32,
    #[comptime] units: u32,
    #[comptime] silu: bool,
    #[define(F)] _dtype: ElemType,
) {
    // One (image, group): `channels_per_group × pixels` contiguous values.
    let group = CUBE_POS_X as usize;
    // Runtime values (a comptime one cannot be stepped in a loop).
    let step = CUBE_DIM_X as usize;
    let per_channel = pixels as usize;
    let count = channels_per_group as usize * per_channel;
    let start = group * count;
    let mut partial = Shared::new_slice(units as usize);
    let mean = cube_mean(input, start, count, &mut partial);
    let squares = cube_squares(input, start, count, mean, &mut partial);
    let variance = squares / f32::cast_from(count as u32);
    let rstd = 1.0f32 / (variance + epsilon).sqrt();

    let first_channel = (group % groups as usize) * channels_per_group as usize;
    let mut i = UNIT_POS_X as usize;
    while i < count {
        let c = first_channel + i / per_channel;
        let scale = rstd * f32::cast_from(gamma[c]);
        let mut y = (f32::cast_from(input[start + i]) - mean) * scale + f32::cast_from(beta[c]);
        if silu {
            y /= 1.0f32 + (-y).exp();
        }
        output[start + i] = F::cast_from(y);
        i += step;
    }
}

/// The mean of the `len` values of `input` from `start`, in f32, the same for every unit.
#[cube]
fn cube_mean<F: Float>(
    input: &Tensor<F>,
    start: usize,
    len: usize,
    partial: &mut Shared<[f32]>,
) -> f32 {
    let step = CUBE_DIM_X as usize;
    let mut sum = 0.0f32;
    let mut i = UNIT_POS_X as usize;
    while i < len {
        sum += f32::cast_from(input[start + i]);
        i += step;
    }
    cube_sum(partial, sum) / f32::cast_from(len as u32)
}

/// The sum of the squared deviations from `mean` of the same values: a second read, so a
/// large mean does not cancel the variance away as a sum of squares would.
#[cube]
fn cube_squares<F: Float>(
    input: &Tensor<F>,
    start: usize,
    len: usize,
    mean: f32,
    partial: &mut Shared<[f32]>,
) -> f32 {
    let step = CUBE_DIM_X as usize;
    let mut squares = 0.0f32;
    let mut i = UNIT_POS_X as usize;
    while i < len {
        let d = f32::cast_from(input[start + i]) - mean;
        squares += d * d;
        i += step;
    }
    cube_sum(partial, squares)
}

/// The sum of every unit's `value` (a tree in `partial`, one slot a unit; the cube's size a
/// power of two), the same for every unit; `partial` is free again on return.
#[cube]
fn cube_sum(partial: &mut Shared<[f32]>, value: f32) -> f32 {
    let unit = UNIT_POS_X as usize;
    partial[unit] = value;
    sync_cube();
    let mut stride = CUBE_DIM_X as usize / 2;
    while stride > 0 {
        if unit < stride {
            let both = partial[unit] + partial[unit + stride];
            partial[unit] = both;
        }
        sync_cube();
        stride /= 2;
    }
    let total = partial[0];
    // Everyone has read the total before the next sum writes its slot.
    sync_cube();
    total
}

/// GroupNorm over `groups` groups of `x`'s channels with per-channel `gamma` and `beta`,
/// then SiLU when `silu`, on the wgpu backend; `None` when `x` is not an f32 or f16 tensor
/// there (the caller runs the reference). A strided `x` is copied in rows first: Burn's own
/// convolutions return an NCHW view of NHWC memory, and one copy is cheaper than the
/// reference's ten or so passes.
///
/// # Shapes
/// - `x`: `[batch, channels, h, w]`, `gamma`, `beta`: `[channels]` -> `[batch, channels, h, w]`
pub fn group_norm_silu(
    x: &BurnTensor<4>,
    gamma: &BurnTensor<1>,
    beta: &BurnTensor<1>,
    groups: usize,
    epsilon: f32,
    silu: bool,
) -> Option<BurnTensor<4>> {
    let [batch, channels, h, w] = x.dims();
    let dtype = x.dtype();
    let fits = matches!(dtype, DType::F32 | DType::F16)
        && gamma.dtype() == dtype
        && beta.dtype() == dtype
        && groups > 0
        && channels % groups == 0
        && gamma.dims() == [channels]
        && beta.dims() == [channels];
    if !fits || batch * channels * h * w == 0 {
        return None;
    }
    let input = into_contiguous(x.clone().try_into_primitive::<Wgpu>().ok()?);
    let gamma = into_contiguous(gamma.clone().try_into_primitive::<Wgpu>().ok()?);
    let beta = into_contiguous(beta.clone().try_into_primitive::<Wgpu>().ok()?);
    if channels / groups * h * w > group_norm_wide::SLICE {
        let output = group_norm_wide::group_norm_silu(input, gamma, beta, groups, epsilon, silu)?;
        return Some(BurnTensor::from_primitive::<Wgpu>(output));
    }
    let pixels = u32::try_from(h * w).ok()?;
    let channels_per_group = u32::try_from(channels / groups).ok()?;
    let cubes = u32::try_from(batch * groups).ok()?;
    // A group's count is cast to u32 in the kernel.
    u32::try_from(channels / groups * h * w).ok()?;
    let client = input.client.clone();
    let output = empty_device_dtype(
        client.clone(),
        input.device.clone(),
        input.meta.shape().clone(),
        dtype,
    );
    group_norm_kernel::launch(
        &client,
        CubeCount::Static(cubes, 1, 1),
        CubeDim::new_1d(UNITS),
        input.into_tensor_arg(),
        gamma.into_tensor_arg(),
        beta.into_tensor_arg(),
        output.clone().into_tensor_arg(),
        groups as u32,
        channels_per_group,
        pixels,
        epsilon,
        UNITS,
        silu,
        dtype_to_storage_type(dtype),
    );
    Some(BurnTensor::from_primitive::<Wgpu>(output))
}

#[cube(launch)]
fn geglu_kernel<F: Float>(
    input: &Tensor<F>,
    output: &mut Tensor<F>,
    inner: u32,
    count: u32,
    #[define(F)] _dtype: ElemType,
) {
    let i = ABSOLUTE_POS;
    if i < count as usize {
        let inner = inner as usize;
        // Output row r holds input row r's `[hidden | gate]`, each `inner` wide.
        let start = (i / inner) * 2 * inner + i % inner;
        let hidden = f32::cast_from(input[start]);
        let gate = f32::cast_from(input[start + inner]);
        // Exact GELU: gate * Φ(gate) = gate / 2 * (1 + erf(gate / √2)).
        let gelu = 0.5f32 * gate * (1.0f32 + Erf::erf(gate * core::f32::consts::FRAC_1_SQRT_2));
        output[i] = F::cast_from(hidden * gelu);
    }
}

/// GEGLU, `hidden * gelu(gate)` where `[hidden, gate]` are the halves of `x`'s last
/// dimension, on the wgpu backend; `None` when `x` is not an f32 or f16 tensor there (the
/// caller runs the reference). A strided `x` is copied in rows first.
///
/// # Shapes
/// - `x`: `[batch, tokens, 2 * inner]` -> `[batch, tokens, inner]`
pub fn geglu(x: &BurnTensor<3>) -> Option<BurnTensor<3>> {
    let [batch, tokens, width] = x.dims();
    let dtype = x.dtype();
    let inner = width / 2;
    if !matches!(dtype, DType::F32 | DType::F16) || width % 2 != 0 || batch * tokens * inner == 0 {
        return None;
    }
    let input = into_contiguous(x.clone().try_into_primitive::<Wgpu>().ok()?);
    let count = u32::try_from(batch * tokens * inner).ok()?;
    let client = input.client.clone();
    let output = empty_device_dtype(
        client.clone(),
        input.device.clone(),
        [batch, tokens, inner].into(),
        dtype,
    );
    let cube_dim = CubeDim::new_1d(UNITS);
    let cubes = cubecl::calculate_cube_count_elemwise(&client, count as usize, cube_dim);
    geglu_kernel::launch(
        &client,
        cubes,
        cube_dim,
        input.into_tensor_arg(),
        output.clone().into_tensor_arg(),
        inner as u32,
        count,
        dtype_to_storage_type(dtype),
    );
    Some(BurnTensor::from_primitive::<Wgpu>(output))
}

#[cfg(test)]
pub(crate) mod tests;
