//! Attention for head sizes beyond Burn's flash kernels (the VAE's one 512-wide head) on
//! GPU backends: the scores materialised a slice of queries at a time, the softmax in f32.
//!
//! Why: Burn's attention autotune times every candidate kernel on the first call of each
//! shape class, its flash kernels among them, which keep a row of the output per unit in
//! registers and are built for heads of up to a few hundred values. On an H100 a 512² SD
//! VAE decode (4096 tokens, one 512-wide head) did not finish in 120 s on that path, a
//! 128² one took 50 ms. Two matrix products and a softmax have no such cliff, and slicing
//! the queries bounds the scores' memory (16384 tokens, an SDXL VAE's 1024² image, would
//! need a 1 GiB score matrix at once).

use burn::tensor::{DType, Tensor, activation};

/// Bytes of f32 scores per slice of queries.
pub const SLICE_BYTES: usize = 128 << 20;

/// Head sizes above this take [`sliced_attention`] on GPU backends: the UNet's (40 to 160)
/// and the text encoders' (64) stay on Burn's kernels.
pub const WIDEST_FLASH_HEAD: usize = 256;

/// `softmax(q kᵀ / √d) v`, the scores of at most `slice_bytes` at a time (at least one
/// query row), computed in f32 and rounded once to the inputs' type.
///
/// # Shapes
/// - `q`: `[batch, heads, n, d]`, `k`: `[batch, heads, m, d]`, `v`: `[batch, heads, m, dv]`
/// - returns `[batch, heads, n, dv]`
pub fn sliced_attention(q: Tensor<4>, k: Tensor<4>, v: Tensor<4>, slice_bytes: usize) -> Tensor<4> {
    let [batch, heads, n, d] = q.dims();
    let [_, _, m, _] = k.dims();
    let dtype = q.dtype();
    let f32 = |t: Tensor<4>| t.cast(DType::F32);
    let (q, keys, v) = (
        f32(q).mul_scalar(1.0 / (d as f32).sqrt()),
        f32(k).swap_dims(2, 3),
        f32(v),
    );
    let row_bytes = batch * heads * m * DType::F32.size();
    let rows = (slice_bytes / row_bytes.max(1)).clamp(1, n.max(1));
    let slices: Vec<Tensor<4>> = (0..n)
        .step_by(rows)
        .map(|first| {
            let q = q.clone().narrow(2, first, rows.min(n - first));
            let weights = activation::softmax(q.matmul(keys.clone()), 3);
            weights.matmul(v.clone())
        })
        .collect();
    let out = match slices.len() {
        1 => slices.into_iter().next().expect("one slice"),
        _ => Tensor::cat(slices, 2),
    };
    out.cast(dtype)
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Device, Distribution};

    use super::*;
    use crate::test_support::rel_diff;

    /// One slice or many (the last one short), the sliced attention gives Burn's.
    #[test]
    fn slices_of_queries_give_the_whole_attention() {
        let device = Device::flex();
        let normal =
            |dims: [usize; 4]| Tensor::<4>::random(dims, Distribution::Normal(0.0, 1.0), &device);
        let (q, k, v) = (
            normal([2, 1, 37, 24]),
            normal([2, 1, 29, 24]),
            normal([2, 1, 29, 16]),
        );
        let expected = crate::reference::attention(q.clone(), k.clone(), v.clone());
        let row_bytes = 2 * 29 * 4;
        for rows in [1, 5, 37, 1000] {
            let ours = sliced_attention(q.clone(), k.clone(), v.clone(), rows * row_bytes);
            assert_eq!(ours.dims(), [2, 1, 37, 16]);
            let error = rel_diff(ours, expected.clone());
            assert!(error < 1e-5, "{rows} rows a slice: {error}");
        }
    }
}
