//! Flash attention on the CPU: `softmax(q k^T * scale) v` in query blocks and key tiles with
//! an online softmax, so the n x m score matrix is never stored. The block products run on
//! the `gemm` crate's kernels; the softmax on [`crate::simd_math`]. Query blocks of all heads
//! are spread over the rayon pool. A cancel in scope ([`crate::interrupt`]) is asked before
//! every key tile: one call at 2048² is minutes of two cores.

use rayon::prelude::*;

use crate::gemm::{Gemm, gemm_f32};
use crate::interrupt::{self, Scope};
use crate::simd_math::{exp, exp_shifted_sum, max, multiversion};

/// Query rows per parallel task.
const BLOCK_Q: usize = 256;
/// Key/value rows per inner step.
const TILE_KV: usize = 1024;

/// Shapes of one attention call over contiguous row-major buffers.
#[derive(Clone, Copy, Debug)]
pub struct AttentionShape {
    /// Batch x heads.
    pub heads: usize,
    /// Query rows per head.
    pub n: usize,
    /// Key/value rows per head.
    pub m: usize,
    /// Query/key width.
    pub d: usize,
    /// Value width.
    pub dv: usize,
}

/// Computes attention for every head. `q` is `[heads, n, d]`, `k` `[heads, m, d]`,
/// `v` `[heads, m, dv]`; returns `[heads, n, dv]`, unfinished when the cancel in scope asks
/// it to stop (its scope then drops it).
///
/// # Panics
/// If a buffer's length does not match `shape`.
pub fn flash_attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    shape: AttentionShape,
    scale: f32,
) -> Vec<f32> {
    let AttentionShape { heads, n, m, d, dv } = shape;
    assert_eq!(q.len(), heads * n * d, "query size");
    assert_eq!(k.len(), heads * m * d, "key size");
    assert_eq!(v.len(), heads * m * dv, "value size");
    let mut out = vec![0f32; heads * n * dv];
    if out.is_empty() || m == 0 {
        return out;
    }
    let blocks_per_head = n.div_ceil(BLOCK_Q);
    // One task per (head, query block); the last block of a head may be short.
    let mut tasks: Vec<(usize, usize, &mut [f32])> = Vec::with_capacity(heads * blocks_per_head);
    let cancel = interrupt::current();
    for (h, head_out) in out.chunks_exact_mut(n * dv).enumerate() {
        for (b, block) in head_out.chunks_mut(BLOCK_Q * dv).enumerate() {
            tasks.push((h, b * BLOCK_Q, block));
        }
    }
    tasks.into_par_iter().for_each_init(
        || vec![0f32; BLOCK_Q * TILE_KV],
        |scores, (h, row0, block)| {
            let rows = block.len() / dv;
            let q = &q[(h * n + row0) * d..(h * n + row0 + rows) * d];
            let k = &k[h * m * d..(h + 1) * m * d];
            let v = &v[h * m * dv..(h + 1) * m * dv];
            attend_block(q, k, v, block, scores, rows, shape, scale, cancel.as_ref());
        },
    );
    out
}

/// One query block against all keys (online softmax over key tiles); it stops between tiles
/// when `cancel` says so.
#[allow(clippy::too_many_arguments)]
fn attend_block(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &mut [f32],
    scores: &mut [f32],
    rows: usize,
    s: AttentionShape,
    scale: f32,
    cancel: Option<&Scope>,
) {
    let (m, d, dv) = (s.m, s.d, s.dv);
    let mut row_max = [f32::NEG_INFINITY; BLOCK_Q];
    let mut row_sum = [0f32; BLOCK_Q];
    for kv0 in (0..m).step_by(TILE_KV) {
        if cancel.is_some_and(Scope::stop) {
            return;
        }
        let tile = TILE_KV.min(m - kv0);
        let scores = &mut scores[..rows * tile];
        // scores = scale * q k_tile^T
        gemm_f32(Gemm {
            m: rows,
            n: tile,
            k: d,
            dst: scores,
            dst_row_stride: tile,
            accumulate: false,
            lhs: q,
            lhs_row_stride: d,
            lhs_col_stride: 1,
            rhs: &k[kv0 * d..(kv0 + tile) * d],
            rhs_row_stride: 1,
            rhs_col_stride: d,
            scale,
        });
        softmax_step(
            scores,
            tile,
            &mut row_max[..rows],
            &mut row_sum[..rows],
            &mut out[..rows * dv],
            dv,
        );
        // out += p v_tile
        gemm_f32(Gemm {
            m: rows,
            n: dv,
            k: tile,
            dst: &mut out[..rows * dv],
            dst_row_stride: dv,
            accumulate: true,
            lhs: scores,
            lhs_row_stride: tile,
            lhs_col_stride: 1,
            rhs: &v[kv0 * dv..(kv0 + tile) * dv],
            rhs_row_stride: dv,
            rhs_col_stride: 1,
            scale: 1.0,
        });
    }
    for (o, sum) in out.chunks_exact_mut(dv).zip(&row_sum) {
        let inv = 1.0 / sum;
        o.iter_mut().for_each(|v| *v *= inv);
    }
}

multiversion! {
    /// One key tile of the online softmax: exponentiates each score row against the running
    /// row maximum, updates the running sums and rescales the output rows accumulated so far.
    fn softmax_step(scores: &mut [f32], tile: usize, row_max: &mut [f32], row_sum: &mut [f32], out: &mut [f32], dv: usize) {
        for (((row, m), s), o) in scores.chunks_exact_mut(tile).zip(row_max.iter_mut()).zip(row_sum.iter_mut()).zip(out.chunks_exact_mut(dv)) {
            let new_max = m.max(max(row));
            let correction = exp(*m - new_max);
            *s = *s * correction + exp_shifted_sum(row, new_max);
            *m = new_max;
            o.iter_mut().for_each(|v| *v *= correction);
        }
    }
}
