//! GroupNorm (+ SiLU) for groups of many values: each group's statistics from many cubes,
//! then the normalisation as an elementwise pass.
//!
//! Why: the one-kernel GroupNorm ([`super::group_norm_silu`]) runs one cube per (image,
//! group), so an SD 1.5 UNet at 512², batch 2, keeps 64 cubes busy and a VAE decode of one
//! image 32, each streaming its whole group (a million values at 512²) three times through
//! 256 units. A GPU needs thousands of cubes in flight to hide memory latency. Here a
//! group's values are cut into slices of [`SLICE`] values, one cube each: every cube finds
//! its slice's mean and squared deviations around it (two reads of a slice that stays in
//! cache), one unit per group merges them (Chan et al.'s pairwise update, as stable as
//! the two-pass variance), and one unit per value writes the result.

use burn::backend::cubecl::dtype_to_storage_type;
use burn::tensor::DType;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

use super::{UNITS, cube_mean, cube_squares};

/// Values per slice: groups larger than this take this path.
pub const SLICE: usize = 16384;

/// wgpu's limit on cubes along one dimension.
const MAX_CUBES: usize = 65535;

#[cube(launch)]
fn slice_stats_kernel<F: Float>(
    input: &Tensor<F>,
    stats: &mut Tensor<f32>,
    count: u32,
    slice_len: u32,
    slices: u32,
    #[comptime] units: u32,
    #[define(F)] _dtype: ElemType,
) {
    // Cube `group * slices + slice`: values `slice * slice_len ..` of the group, the last
    // slice shorter.
    let cube = CUBE_POS_X as usize;
    let group = cube / slices as usize;
    let slice = cube % slices as usize;
    let len = slice_length(slice, slice_len, count);
    let start = group * count as usize + slice * slice_len as usize;
    let mut partial = Shared::new_slice(units as usize);
    let mean = cube_mean(input, start, len, &mut partial);
    let m2 = cube_squares(input, start, len, mean, &mut partial);
    if UNIT_POS_X == 0 {
        stats[cube * 2] = mean;
        stats[cube * 2 + 1] = m2;
    }
}

/// Values in slice `slice` of a group of `count`: `slice_len`, the last one fewer.
#[cube]
fn slice_length(slice: usize, slice_len: u32, count: u32) -> usize {
    let first = slice * slice_len as usize;
    let mut len = slice_len as usize;
    if count as usize - first < len {
        len = count as usize - first;
    }
    len
}

#[cube(launch)]
fn merge_stats_kernel(
    stats: &Tensor<f32>,
    moments: &mut Tensor<f32>,
    count: u32,
    slice_len: u32,
    slices: u32,
    groups: u32,
    epsilon: f32,
) {
    // One unit a group: its slices' means and squared deviations merged pairwise.
    let group = ABSOLUTE_POS;
    if group < groups as usize {
        let base = group * slices as usize;
        let mut n = 0.0f32;
        let mut mean = 0.0f32;
        let mut m2 = 0.0f32;
        for slice in 0..slices as usize {
            let n_b = f32::cast_from(slice_length(slice, slice_len, count) as u32);
            let mean_b = stats[(base + slice) * 2];
            let delta = mean_b - mean;
            let total = n + n_b;
            mean += delta * n_b / total;
            m2 += stats[(base + slice) * 2 + 1] + delta * delta * n * n_b / total;
            n = total;
        }
        moments[group * 2] = mean;
        moments[group * 2 + 1] = 1.0f32 / (m2 / n + epsilon).sqrt();
    }
}

#[cube(launch)]
fn apply_kernel<F: Float>(
    input: &Tensor<F>,
    moments: &Tensor<f32>,
    gamma: &Tensor<F>,
    beta: &Tensor<F>,
    output: &mut Tensor<F>,
    count: u32,
    pixels: u32,
    channels: u32,
    total: u32,
    #[comptime] silu: bool,
    #[define(F)] _dtype: ElemType,
) {
    let i = ABSOLUTE_POS;
    if i < total as usize {
        // Each (image, group) is `count` contiguous values of NCHW.
        let group = i / count as usize;
        let c = (i / pixels as usize) % channels as usize;
        let scale = moments[group * 2 + 1] * f32::cast_from(gamma[c]);
        let mut y =
            (f32::cast_from(input[i]) - moments[group * 2]) * scale + f32::cast_from(beta[c]);
        if silu {
            y /= 1.0f32 + (-y).exp();
        }
        output[i] = F::cast_from(y);
    }
}

/// The three kernels over contiguous wgpu tensors already checked by the caller: `input`
/// `[batch, channels, h, w]` of f32 or f16, `gamma` and `beta` `[channels]` of its type.
/// `None` when a size does not fit the kernels' u32 arithmetic.
pub(super) fn group_norm_silu(
    input: CubeTensor,
    gamma: CubeTensor,
    beta: CubeTensor,
    groups: usize,
    epsilon: f32,
    silu: bool,
) -> Option<CubeTensor> {
    let shape = input.meta.shape().clone();
    let [batch, channels, h, w] = [shape[0], shape[1], shape[2], shape[3]];
    let dtype = input.dtype;
    let count = channels / groups * h * w;
    let all_groups = batch * groups;
    let slices = count
        .div_ceil(SLICE)
        .min(MAX_CUBES / all_groups.max(1))
        .max(1);
    let slice_len = count.div_ceil(slices);
    // Equal slices of `slice_len`, the last shorter but never empty.
    let slices = count.div_ceil(slice_len);
    let small = |n: usize| u32::try_from(n).ok();
    let total = small(batch * channels * h * w)?;
    let (count32, slice_len32, slices32) = (small(count)?, small(slice_len)?, small(slices)?);
    let client = input.client.clone();
    let device = input.device.clone();
    let f32_buffer =
        |len: usize| empty_device_dtype(client.clone(), device.clone(), [len].into(), DType::F32);
    let stats = f32_buffer(all_groups * slices * 2);
    let moments = f32_buffer(all_groups * 2);
    let output = empty_device_dtype(client.clone(), device.clone(), shape, dtype);
    let storage = dtype_to_storage_type(dtype);

    slice_stats_kernel::launch(
        &client,
        CubeCount::Static(small(all_groups * slices)?, 1, 1),
        CubeDim::new_1d(UNITS),
        input.clone().into_tensor_arg(),
        stats.clone().into_tensor_arg(),
        count32,
        slice_len32,
        slices32,
        UNITS,
        storage,
    );
    let cube_dim = CubeDim::new_1d(UNITS);
    let cubes = cubecl::calculate_cube_count_elemwise(&client, all_groups, cube_dim);
    merge_stats_kernel::launch(
        &client,
        cubes,
        cube_dim,
        stats.into_tensor_arg(),
        moments.clone().into_tensor_arg(),
        count32,
        slice_len32,
        slices32,
        small(all_groups)?,
        epsilon,
    );
    let cubes = cubecl::calculate_cube_count_elemwise(&client, total as usize, cube_dim);
    apply_kernel::launch(
        &client,
        cubes,
        cube_dim,
        input.into_tensor_arg(),
        moments.into_tensor_arg(),
        gamma.into_tensor_arg(),
        beta.into_tensor_arg(),
        output.clone().into_tensor_arg(),
        count32,
        small(h * w)?,
        small(channels)?,
        total,
        silu,
        storage,
    );
    Some(output)
}
