//! Ember's own compute kernels, each with a plain-Burn reference it is tested against.
//!
//! Most are CPU kernels for the operations where Burn's CPU backend (burn-flex) is far
//! behind PyTorch in an SD UNet (see README's performance section): convolution, linear
//! layers, attention, SiLU, GELU and GroupNorm; the low-rank weight update a LoRA merge makes (`low_rank`) and a
//! weight read again from its checkpoint (`widen`). Each public function takes the fast path
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
/// kernel ([`attention`]); elsewhere Burn's, except heads wider than its flash kernels
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

/// Which path [`attention`] takes for f32 heads of `head_dim` values on `device`, in words
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
mod tests {
    use super::*;
    use crate::test_support::rel_diff;
    use burn::nn::GroupNormConfig;

    /// Deterministic test data (a fixed xorshift stream scaled to roughly N(0, 1.5)).
    fn random<const D: usize>(dims: [usize; D]) -> Tensor<D> {
        let n: usize = dims.iter().product();
        let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ n as u64;
        let values: Vec<f32> = (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 5.2
            })
            .collect();
        Tensor::from_data(TensorData::new(values, dims), &Device::flex())
    }

    /// Attention in float64 on the host: the ground truth both float32 versions approach.
    fn attention_f64(q: &Tensor<4>, k: &Tensor<4>, v: &Tensor<4>) -> Vec<f64> {
        let [b, h, n, d] = q.dims();
        let [_, _, m, dv] = v.dims();
        let values = |t: &Tensor<4>| -> Vec<f64> {
            t.clone().into_data().iter::<f32>().map(f64::from).collect()
        };
        let (q, k, v) = (values(q), values(k), values(v));
        let mut out = vec![0f64; b * h * n * dv];
        for bh in 0..b * h {
            for i in 0..n {
                let qi = &q[(bh * n + i) * d..(bh * n + i + 1) * d];
                let scores: Vec<f64> = (0..m)
                    .map(|j| {
                        let kj = &k[(bh * m + j) * d..(bh * m + j + 1) * d];
                        qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f64>() / (d as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = weights.iter().sum();
                for (j, w) in weights.iter().enumerate() {
                    for c in 0..dv {
                        out[(bh * n + i) * dv + c] += w / total * v[(bh * m + j) * dv + c];
                    }
                }
            }
        }
        out
    }

    fn error_vs(exact: &[f64], t: Tensor<4>) -> f64 {
        let scale = exact.iter().fold(1f64, |m, v| m.max(v.abs()));
        t.into_data()
            .iter::<f32>()
            .zip(exact)
            .map(|(a, e)| (f64::from(a) - e).abs())
            .fold(0.0, f64::max)
            / scale
    }

    #[test]
    fn attention_is_as_accurate_as_burns_on_odd_shapes() {
        for (b, h, n, m, d, dv) in [
            (1, 1, 1, 1, 8, 8),
            (2, 3, 77, 77, 40, 40),
            (1, 2, 130, 700, 24, 16),
            (2, 1, 64, 1025, 64, 64),
        ] {
            let (q, k, v) = (
                random([b, h, n, d]),
                random([b, h, m, d]),
                random([b, h, m, dv]),
            );
            let exact = attention_f64(&q, &k, &v);
            let ours = error_vs(&exact, attention(q.clone(), k.clone(), v.clone()));
            let burns = error_vs(&exact, reference::attention(q, k, v));
            if std::env::var_os("EMBER_TEST_VERBOSE").is_some() {
                eprintln!(
                    "attention {b}x{h}x{n}x{m}x{d}x{dv}: ours {ours:.2e}, Burn {burns:.2e} (vs float64)"
                );
            }
            // Float32 rounding in a different summation order: no worse than Burn's own.
            assert!(
                ours <= (2.0 * burns).max(1e-6),
                "attention {b}x{h}x{n}x{m}x{d}x{dv}: ours {ours:e}, Burn {burns:e}"
            );
        }
    }

    #[test]
    fn attention_takes_strided_views() {
        // The UNet hands over swapped-axis views; the kernel must see logical order.
        let q = random([2, 50, 4, 8]).swap_dims(1, 2);
        let k = random([2, 30, 4, 8]).swap_dims(1, 2);
        let v = random([2, 30, 4, 8]).swap_dims(1, 2);
        let diff = rel_diff(
            attention(q.clone(), k.clone(), v.clone()),
            reference::attention(q, k, v),
        );
        assert!(diff < 2e-6, "strided attention: {diff}");
    }

    #[test]
    fn activations_match_burn() {
        let x = random([3, 5, 7, 11]);
        assert!(
            rel_diff(silu(x.clone()), reference::silu(x.clone())) < 2e-6,
            "silu"
        );
        assert!(rel_diff(gelu(x.clone()), reference::gelu(x)) < 2e-6, "gelu");
        let y = random([2, 9, 2 * 37]);
        assert!(
            rel_diff(geglu(y.clone()), reference::geglu(y)) < 2e-6,
            "geglu"
        );
    }

    #[test]
    fn activations_leave_shared_inputs_untouched() {
        let x = random([2, 3, 4, 5]);
        let before = x.clone().into_data();
        let _ = silu(x.clone());
        assert_eq!(
            x.into_data(),
            before,
            "an in-place kernel must not write through a shared buffer"
        );
    }

    #[test]
    fn group_norm_matches_burn() {
        let device = Device::flex();
        for (groups, channels, side) in [(32, 64, 5), (8, 16, 9), (1, 3, 4)] {
            let mut norm = GroupNormConfig::new(groups, channels)
                .with_epsilon(1e-6)
                .init(&device);
            norm.gamma = Some(burn::module::Param::from_tensor(random([channels])));
            norm.beta = Some(burn::module::Param::from_tensor(random([channels])));
            let x = random([2, channels, side, side + 1])
                .mul_scalar(3.0)
                .add_scalar(5.0);
            let diff = rel_diff(group_norm(x.clone(), &norm), norm.forward(x));
            assert!(diff < 2e-6, "group norm {groups}/{channels}: {diff}");
        }
    }

    #[test]
    fn half_precision_tensors_run_in_float32_and_keep_their_type() {
        // Each kernel on f16/bf16 inputs equals the float32 kernel on the same (rounded)
        // values, rounded once to the half type (half an ulp: 2^-9 relative for bf16).
        let device = Device::flex();
        let mut norm = GroupNormConfig::new(8, 16).with_epsilon(1e-6).init(&device);
        norm.gamma = Some(burn::module::Param::from_tensor(random([16])));
        norm.beta = Some(burn::module::Param::from_tensor(random([16])));
        for (dtype, tolerance) in [(DType::BF16, 4e-3), (DType::F16, 5e-4)] {
            let half = |t: Tensor<4>| t.cast(dtype);
            let widened = |t: &Tensor<4>| t.clone().cast(DType::F32);
            let check = |name: &str, ours: Tensor<4>, exact: Tensor<4>| {
                assert_eq!(ours.dtype(), dtype, "{name}");
                let diff = rel_diff(ours.cast(DType::F32), exact);
                assert!(diff < tolerance, "{name} {dtype:?}: {diff}");
            };
            let x = half(random([2, 16, 5, 6]));
            check("silu", silu(x.clone()), silu(widened(&x)));
            let mut norm_half = norm.clone();
            norm_half.gamma = norm
                .gamma
                .as_ref()
                .map(|g| burn::module::Param::from_tensor(g.val().cast(dtype)));
            norm_half.beta = norm
                .beta
                .as_ref()
                .map(|b| burn::module::Param::from_tensor(b.val().cast(dtype)));
            let mut norm_rounded = norm_half.clone();
            norm_rounded.gamma = norm_half
                .gamma
                .as_ref()
                .map(|g| burn::module::Param::from_tensor(g.val().cast(DType::F32)));
            norm_rounded.beta = norm_half
                .beta
                .as_ref()
                .map(|b| burn::module::Param::from_tensor(b.val().cast(DType::F32)));
            check(
                "group_norm_silu",
                group_norm_silu(x.clone(), &norm_half),
                group_norm_silu(widened(&x), &norm_rounded),
            );
            let (q, k, v) = (
                half(random([1, 2, 9, 8])),
                half(random([1, 2, 7, 8])),
                half(random([1, 2, 7, 4])),
            );
            check(
                "attention",
                attention(q.clone(), k.clone(), v.clone()),
                attention(widened(&q), widened(&k), widened(&v)),
            );
        }
    }
}
