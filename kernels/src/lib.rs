//! Ember's own compute kernels, each with a plain-Burn reference it is tested against.
//!
//! Most are CPU kernels for the operations where Burn's CPU backend (burn-flex) is far
//! behind PyTorch in an SD UNet (see README's performance section): convolution, linear
//! layers, attention, SiLU, GELU and GroupNorm; the low-rank weight update a LoRA merge makes (`low_rank`) and a
//! weight read again from its checkpoint (`widen`). A cancel reaches inside CPU attention
//! ([`interrupt`]). Each public function takes the fast path
//! for float32 tensors on the CPU device (f16 and bf16 ones cast to float32 for it and the
//! result cast back) and otherwise runs the plain-Burn reference (`reference` module). With
//! the `wgpu` feature, [`gpu`] holds cubecl kernels for Burn's wgpu backend: GroupNorm
//! (+ SiLU) in one kernel, and GEGLU in one. [`upsample`] folds the upsampler's
//! nearest-neighbour 2× and 3×3 convolution into 2×2 kernels on GPU backends. The fast paths work in place on the tensor's own buffer when it
//! is not shared (burn-flex's `into_data`/`from_data` move the buffer without copying).

pub mod attention;
pub mod conv;
pub use conv::conv2d;
#[cfg(feature = "wgpu")]
pub mod conv_gemm;
mod gemm;
#[cfg(feature = "wgpu")]
pub mod gpu;
pub mod group_norm;
pub mod interrupt;
pub mod linear;
pub use linear::linear;
pub mod padded_attention;
pub use upsample::upsample_conv;
pub mod low_rank;
pub mod reference;
pub mod simd_math;
#[cfg(test)]
mod test_support;
pub mod upsample;
pub mod wide_attention;
pub mod widen;
pub mod wrap;

use burn::backend::Flex;
use burn::nn::GroupNorm;
use burn::tensor::{DType, Device, Tensor, TensorData};
use rayon::prelude::*;

/// Whether `t` can take a CPU fast path.
fn on_cpu_f32<const D: usize>(t: &Tensor<D>) -> bool {
    t.dtype() == DType::F32 && t.device() == Device::flex()
}

/// Whether `t` is a half-precision (f16 or bf16) tensor on the CPU. The kernels run such
/// tensors in float32, cast in and back: burn-flex computes these types through float32
/// anyway, and its plain paths for these operations are the slow ones.
fn on_cpu_half<const D: usize>(t: &Tensor<D>) -> bool {
    matches!(t.dtype(), DType::F16 | DType::BF16) && t.device() == Device::flex()
}

/// `f` on `x` cast to float32, its result cast back to `x`'s type.
fn in_f32<const D: usize, const E: usize>(
    x: Tensor<D>,
    f: impl FnOnce(Tensor<D>) -> Tensor<E>,
) -> Tensor<E> {
    let dtype = x.dtype();
    f(x.cast(DType::F32)).cast(dtype)
}

/// Applies `f` to the tensor's values in place (no copy when the buffer is not shared).
fn map_in_place<const D: usize>(t: Tensor<D>, f: impl FnOnce(&mut [f32])) -> Tensor<D> {
    let device = t.device();
    let mut data = t.into_data();
    f(data.as_mut_slice::<f32>().expect("float32 tensor data"));
    Tensor::from_data(data, &device)
}

/// Runs `f` on `t`'s values in logical order, borrowing the CPU buffer when it is laid out
/// contiguously (weights are shared with their module, and copying them is what the kernels
/// avoid).
pub(crate) fn with_host_slice<const D: usize, R>(t: Tensor<D>, f: impl FnOnce(&[f32]) -> R) -> R {
    if let Ok(flex) = t.clone().try_into_primitive::<Flex>()
        && let Some((start, end)) = flex.layout().contiguous_offsets()
    {
        return f(&flex.storage::<f32>()[start..end]);
    }
    f(f32s(&t.into_data()))
}

/// The tensor's values as float32 (no copy when the buffer is not shared).
fn host_values<const D: usize>(t: Tensor<D>) -> TensorData {
    t.into_data()
}

fn f32s(t: &TensorData) -> &[f32] {
    t.as_slice::<f32>().expect("float32 tensor data")
}

/// Elements per parallel task of the elementwise kernels.
const CHUNK: usize = 1 << 15;

/// SiLU, `x * sigmoid(x)`.
pub fn silu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    if on_cpu_half(&x) {
        return in_f32(x, silu);
    }
    if !on_cpu_f32(&x) {
        return reference::silu(x);
    }
    map_in_place(x, |data| {
        data.par_chunks_mut(CHUNK)
            .for_each(simd_math::silu_in_place)
    })
}

/// Exact (erf) GELU.
pub fn gelu<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    if on_cpu_half(&x) {
        return in_f32(x, gelu);
    }
    if !on_cpu_f32(&x) {
        return reference::gelu(x);
    }
    map_in_place(x, |data| {
        data.par_chunks_mut(CHUNK)
            .for_each(simd_math::gelu_in_place)
    })
}

/// GEGLU gating: splits the last dimension into `[hidden, gate]` halves and returns
/// `hidden * gelu(gate)`. On the wgpu backend one cubecl kernel ([`gpu::geglu`]).
///
/// # Shapes
/// - `x`: `[batch, tokens, 2 * inner]` -> `[batch, tokens, inner]`
pub fn geglu(x: Tensor<3>) -> Tensor<3> {
    #[cfg(feature = "wgpu")]
    if let Some(y) = gpu::geglu(&x) {
        return y;
    }
    if on_cpu_half(&x) {
        return in_f32(x, geglu);
    }
    if !on_cpu_f32(&x) {
        return reference::geglu(x);
    }
    let [b, n, c2] = x.dims();
    let device = x.device();
    let data = host_values(x);
    let inner = c2 / 2;
    let mut out = vec![0f32; b * n * inner];
    let rows = (CHUNK / c2).max(1);
    f32s(&data)
        .par_chunks(rows * c2)
        .zip(out.par_chunks_mut(rows * inner))
        .for_each(|(input, output)| simd_math::geglu(input, inner, output));
    Tensor::from_data(TensorData::new(out, [b, n, c2 / 2]), &device)
}

/// Scaled dot-product attention (no mask), scale `1 / sqrt(head_dim)`. On the CPU the flash
/// kernel ([`attention()`]); elsewhere Burn's, except heads wider than its flash kernels
/// ([`wide_attention`]), padded to the tiles of a GPU's matrix units where they need it
/// ([`padded_attention`]).
///
/// # Shapes
/// - `q`: `[batch, heads, n, d]`, `k`: `[batch, heads, m, d]`, `v`: `[batch, heads, m, dv]`
/// - returns `[batch, heads, n, dv]`
pub fn attention(q: Tensor<4>, k: Tensor<4>, v: Tensor<4>) -> Tensor<4> {
    if on_cpu_half(&q) && on_cpu_half(&k) && on_cpu_half(&v) {
        let f32 = |t: Tensor<4>| t.cast(DType::F32);
        return in_f32(q, |q| attention(q, f32(k), f32(v)));
    }
    if !(on_cpu_f32(&q) && on_cpu_f32(&k) && on_cpu_f32(&v)) {
        if q.dims()[3] > wide_attention::WIDEST_FLASH_HEAD {
            return wide_attention::sliced_attention(q, k, v, wide_attention::SLICE_BYTES);
        }
        // Burn's tensor-core kernel takes only shapes that fit its tiles.
        #[cfg(feature = "wgpu")]
        if let Some(tiles) = gpu::matrix_tiles(&q) {
            let [_, _, n, d] = q.dims();
            if padded_attention::needs_padding(&tiles, n, d, v.dims()[3]) {
                return padded_attention::padded_attention(q, k, v, &tiles);
            }
        }
        return reference::attention(q, k, v);
    }
    let [b, h, n, d] = q.dims();
    let [_, _, m, dv] = v.dims();
    let device = q.device();
    let shape = attention::AttentionShape {
        heads: b * h,
        n,
        m,
        d,
        dv,
    };
    let (q, k, v) = (host_values(q), host_values(k), host_values(v));
    let out =
        attention::flash_attention(f32s(&q), f32s(&k), f32s(&v), shape, 1.0 / (d as f32).sqrt());
    Tensor::from_data(TensorData::new(out, [b, h, n, dv]), &device)
}

/// Which path [`attention()`] takes for f32 heads of `head_dim` values on `device`, in words
/// (for benchmarks, which also report Burn's own autotune choices).
pub fn attention_path(device: &Device, head_dim: usize) -> String {
    if *device == Device::flex() {
        return "flash (Ember's CPU kernel)".into();
    }
    if head_dim > wide_attention::WIDEST_FLASH_HEAD {
        return "sliced, materialised, softmax in f32 (Ember's wide_attention)".into();
    }
    #[cfg(feature = "wgpu")]
    if let Some(tiles) = gpu::matrix_tiles(&Tensor::<1>::zeros([1], device)) {
        let padded = head_dim.next_multiple_of(tiles.head);
        if padded != head_dim {
            return format!(
                "Burn's attention, heads padded to {padded} for the matrix units \
                 (its autotune picks the kernel)"
            );
        }
    }
    "Burn's attention (its autotune picks the kernel)".into()
}

/// GroupNorm with the module's affine parameters, then SiLU: `silu(norm(x))`, as every
/// ResNet block has it. On the wgpu backend one cubecl kernel ([`gpu`]); on the CPU the
/// two CPU kernels.
///
/// # Shapes
/// - `x`: `[batch, channels, h, w]` -> same
pub fn group_norm_silu(x: Tensor<4>, norm: &GroupNorm) -> Tensor<4> {
    #[cfg(feature = "wgpu")]
    if let Some(y) = on_gpu(&x, norm, true) {
        return y;
    }
    if on_cpu_half(&x) {
        return in_f32(x, |x| silu(group_norm(x, norm)));
    }
    silu(group_norm(x, norm))
}

/// [`gpu::group_norm_silu`] with `norm`'s parameters, when it applies.
#[cfg(feature = "wgpu")]
fn on_gpu(x: &Tensor<4>, norm: &GroupNorm, silu: bool) -> Option<Tensor<4>> {
    let (Some(gamma), Some(beta)) = (&norm.gamma, &norm.beta) else {
        return None;
    };
    let eps = norm.epsilon as f32;
    gpu::group_norm_silu(x, &gamma.val(), &beta.val(), norm.num_groups, eps, silu)
}

/// GroupNorm with the module's affine parameters.
///
/// # Shapes
/// - `x`: `[batch, channels, h, w]` -> same
pub fn group_norm(x: Tensor<4>, norm: &GroupNorm) -> Tensor<4> {
    #[cfg(feature = "wgpu")]
    if let Some(y) = on_gpu(&x, norm, false) {
        return y;
    }
    let (Some(gamma), Some(beta)) = (&norm.gamma, &norm.beta) else {
        return norm.forward(x);
    };
    if on_cpu_half(&x) {
        return in_f32(x, |x| group_norm(x, norm));
    }
    if !on_cpu_f32(&x) {
        return norm.forward(x);
    }
    // Half-precision parameters (a bf16 model) are widened with the activations.
    let gamma = host_values(gamma.val().cast(DType::F32));
    let beta = host_values(beta.val().cast(DType::F32));
    let [b, c, h, w] = x.dims();
    let (groups, eps) = (norm.num_groups, norm.epsilon as f32);
    map_in_place(x, |data| {
        let params = group_norm::Affine {
            gamma: gamma.as_slice::<f32>().expect("float32 gamma"),
            beta: beta.as_slice::<f32>().expect("float32 beta"),
        };
        group_norm::group_norm_in_place(data, [b, c, h * w], groups, eps, params);
    })
}

#[cfg(test)]
mod tests;
