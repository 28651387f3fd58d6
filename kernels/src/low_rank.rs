//! `base + scale * lhs @ rhs` for a weight matrix and a low-rank update (a LoRA merge),
//! written into a buffer the caller hands back for reuse.
//!
//! Merging a LoRA is memory-bound: the product has rank 4 to 128, the weight millions of
//! elements. Burn's ops would allocate the product, then the sum, each from fresh pages the
//! kernel has to zero; here the weight is copied into the destination a block of rows at a
//! time and the product accumulated onto that block while it is still in cache, and a
//! destination from the previous merge is written over instead of allocating another.

use burn::tensor::{Tensor, TensorData};
use rayon::prelude::*;

use crate::gemm::{Gemm, gemm_f32};
use crate::{on_cpu_f32, reference, with_host_slice};

/// Destination elements per parallel task: a block stays in a core's cache between the
/// copy and the product.
const BLOCK: usize = 1 << 16;

/// `base + scale * lhs @ rhs`. On the CPU in f32 the result is written into `reuse`'s
/// buffer when one of the same size is given and no other tensor shares it (nothing is
/// allocated), otherwise into a new buffer. Other devices and dtypes run the plain-Burn [`reference::add_product`].
///
/// # Shapes
/// - `base`: `[m, n]`, `lhs`: `[m, k]`, `rhs`: `[k, n]`, `reuse`: `[m, n]` -> `[m, n]`
pub fn add_product(
    base: Tensor<2>,
    lhs: Tensor<2>,
    rhs: Tensor<2>,
    scale: f32,
    reuse: Option<Tensor<2>>,
) -> Tensor<2> {
    let [m, n] = base.dims();
    let [lhs_rows, k] = lhs.dims();
    let fits = lhs_rows == m && rhs.dims() == [k, n];
    if !(fits && on_cpu_f32(&base) && on_cpu_f32(&lhs) && on_cpu_f32(&rhs)) {
        return reference::add_product(base, lhs, rhs, scale);
    }
    let device = base.device();
    // The factors are small: contiguous copies in logical order.
    let (lhs, rhs) = (lhs.into_data(), rhs.into_data());
    let (lhs, rhs) = (f32s(&lhs), f32s(&rhs));
    let reuse = reuse.filter(|t| t.dims() == [m, n] && on_cpu_f32(t));
    let dst = match reuse {
        Some(target) => {
            let mut dst = target.into_data();
            with_host_slice(base, |base| {
                add_product_into(mut_f32s(&mut dst), Some(base), lhs, rhs, [m, n, k], scale)
            });
            dst
        }
        None => {
            // A zeroed vector comes from untouched pages without a pass of its own; the copy
            // is made a block at a time beside the product (`into_data` on a shared tensor
            // would copy twice to align the buffer).
            let mut dst = vec![0f32; m * n];
            with_host_slice(base, |base| {
                add_product_into(&mut dst, Some(base), lhs, rhs, [m, n, k], scale)
            });
            TensorData::new(dst, [m, n])
        }
    };
    Tensor::from_data(dst, &device)
}

/// `target + scale * lhs @ rhs`, written into `target`'s own buffer on the CPU in f32 when
/// no other tensor shares it (nothing is allocated: a LoRA merged into the loaded weights
/// themselves). Otherwise as [`add_product`] without a buffer to reuse.
///
/// # Shapes
/// - `target`: `[m, n]`, `lhs`: `[m, k]`, `rhs`: `[k, n]` -> `[m, n]`
pub fn add_product_in_place(
    target: Tensor<2>,
    lhs: Tensor<2>,
    rhs: Tensor<2>,
    scale: f32,
) -> Tensor<2> {
    let [m, n] = target.dims();
    let [lhs_rows, k] = lhs.dims();
    let fits = lhs_rows == m && rhs.dims() == [k, n];
    if !(fits && on_cpu_f32(&target) && on_cpu_f32(&lhs) && on_cpu_f32(&rhs)) {
        return reference::add_product(target, lhs, rhs, scale);
    }
    let device = target.device();
    let (lhs, rhs) = (lhs.into_data(), rhs.into_data());
    let mut dst = target.into_data();
    add_product_into(
        mut_f32s(&mut dst),
        None,
        f32s(&lhs),
        f32s(&rhs),
        [m, n, k],
        scale,
    );
    Tensor::from_data(dst, &device)
}

fn f32s(t: &TensorData) -> &[f32] {
    t.as_slice::<f32>().expect("float32 tensor data")
}

fn mut_f32s(t: &mut TensorData) -> &mut [f32] {
    t.as_mut_slice::<f32>().expect("float32 tensor data")
}

/// `dst = (base or dst) + scale * lhs @ rhs` over row-major slices: `dst` and `base`
/// `[m, n]`, `lhs` `[m, k]`, `rhs` `[k, n]`; with `base` `None`, `dst` already holds it.
///
/// # Panics
/// If a slice's length does not match the sizes.
pub fn add_product_into(
    dst: &mut [f32],
    base: Option<&[f32]>,
    lhs: &[f32],
    rhs: &[f32],
    [m, n, k]: [usize; 3],
    scale: f32,
) {
    assert_eq!(dst.len(), m * n, "destination size");
    assert_eq!(lhs.len(), m * k, "left factor size");
    assert_eq!(rhs.len(), k * n, "right factor size");
    if let Some(base) = base {
        assert_eq!(base.len(), m * n, "base size");
    }
    if dst.is_empty() {
        return;
    }
    let rows = (BLOCK / n).max(1);
    dst.par_chunks_mut(rows * n)
        .enumerate()
        .for_each(|(block, dst)| {
            let first = block * rows;
            let count = dst.len() / n;
            if let Some(base) = base {
                dst.copy_from_slice(&base[first * n..(first + count) * n]);
            }
            if k == 0 {
                return;
            }
            gemm_f32(Gemm {
                m: count,
                n,
                k,
                dst,
                dst_row_stride: n,
                accumulate: true,
                lhs: &lhs[first * k..(first + count) * k],
                lhs_row_stride: k,
                lhs_col_stride: 1,
                rhs,
                rhs_row_stride: n,
                rhs_col_stride: 1,
                scale,
            });
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;
    use burn::tensor::Device;

    fn values<const D: usize>(dims: [usize; D], seed: u64) -> Tensor<D> {
        let n: usize = dims.iter().product();
        let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ seed;
        let data: Vec<f32> = (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        Tensor::from_data(TensorData::new(data, dims), &Device::flex())
    }

    fn max_diff(a: Tensor<2>, b: Tensor<2>) -> f32 {
        (a - b).abs().max().into_scalar::<f32>()
    }

    #[test]
    fn matches_burn_with_and_without_a_buffer_to_reuse() {
        for [m, n, k] in [
            [1, 1, 1],
            [320, 320, 8],
            [77, 1000, 32],
            [5, 70_000, 3],
            [9, 4, 0],
        ] {
            let base = values([m, n], 1);
            // A LoRA's factors arrive transposed (`downᵀ`, `upᵀ`): strided views.
            let lhs = values([k, m], 2).transpose();
            let rhs = values([n, k], 3).transpose();
            let expected = reference::add_product(base.clone(), lhs.clone(), rhs.clone(), 0.7);
            let fresh = add_product(base.clone(), lhs.clone(), rhs.clone(), 0.7, None);
            let reused = add_product(base.clone(), lhs, rhs, 0.7, Some(values([m, n], 4)));
            // f32 sums of k products in another order.
            let tolerance = 1e-6 * (k as f32).max(1.0);
            assert!(
                max_diff(fresh, expected.clone()) <= tolerance,
                "{m}x{n}x{k} fresh"
            );
            assert!(
                max_diff(reused, expected) <= tolerance,
                "{m}x{n}x{k} reused"
            );
        }
    }

    #[test]
    fn a_shared_base_or_buffer_is_never_written() {
        let base = values([64, 48], 5);
        let reuse = values([64, 48], 6);
        let (base_before, reuse_before) = (base.to_data(), reuse.to_data());
        let lhs = values([64, 4], 7);
        let rhs = values([4, 48], 8);
        let _ = add_product(base.clone(), lhs.clone(), rhs.clone(), 1.0, None);
        let _ = add_product(base.clone(), lhs, rhs, 1.0, Some(reuse.clone()));
        assert_eq!(base.into_data(), base_before, "the kept weight changed");
        assert_eq!(
            reuse.into_data(),
            reuse_before,
            "a shared buffer was written"
        );
    }

    #[test]
    fn an_unshared_buffer_is_written_in_place() {
        let base = values([32, 16], 9);
        let reuse = values([32, 16], 10);
        let address = |t: &Tensor<2>| {
            t.clone()
                .try_into_primitive::<Flex>()
                .map(|f| f.bytes().as_ptr() as usize)
                .unwrap()
        };
        let before = address(&reuse);
        let out = add_product(
            base,
            values([32, 2], 11),
            values([2, 16], 12),
            1.0,
            Some(reuse),
        );
        assert_eq!(address(&out), before, "the merge allocated a new buffer");
    }

    #[test]
    fn in_place_matches_burn_writes_its_own_buffer_and_never_a_shared_one() {
        let address = |t: &Tensor<2>| {
            t.clone()
                .try_into_primitive::<Flex>()
                .map(|f| f.bytes().as_ptr() as usize)
                .unwrap()
        };
        for [m, n, k] in [[1, 1, 1], [320, 320, 8], [77, 1000, 32], [9, 4, 0]] {
            let target = values([m, n], 13);
            let lhs = values([k, m], 14).transpose();
            let rhs = values([n, k], 15).transpose();
            let expected = reference::add_product(target.clone(), lhs.clone(), rhs.clone(), 0.3);
            let before = address(&target);
            let out = add_product_in_place(target, lhs, rhs, 0.3);
            assert_eq!(address(&out), before, "{m}x{n}x{k}: a new buffer");
            assert!(
                max_diff(out, expected) <= 1e-6 * (k as f32).max(1.0),
                "{m}x{n}x{k}"
            );
        }
        let shared = values([16, 8], 16);
        let kept = shared.to_data();
        let _ = add_product_in_place(shared.clone(), values([16, 2], 17), values([2, 8], 18), 1.0);
        assert_eq!(shared.into_data(), kept, "a shared weight was written");
    }
}
