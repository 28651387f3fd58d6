//! A checkpoint's weight written into a model's own f32 buffer: widened from the file's
//! float format and, for a `Linear` weight (a checkpoint's `[out, in]`, Burn's `[in, out]`),
//! transposed, optionally with a LoRA's low-rank product added on the way. What reading a
//! weight again after a LoRA, or changing a LoRA's strength, costs.
//!
//! The destination is written in parallel blocks of whole rows. A transposed block takes
//! eight source rows at a time: widened into a band by a loop the compiler vectorises, then
//! transposed as 8×8 tiles by AVX shuffles; the blocks are wide enough that each source
//! row is read in long runs. A LoRA's product is added to each block while it is in cache.

use rayon::prelude::*;

use crate::gemm::{Gemm, gemm_f32};
use crate::simd_math::multiversion;

/// Destination elements per parallel block (about; blocks are whole rows when transposing).
const BLOCK: usize = 1 << 16;
/// Destination elements per parallel block when transposing (about).
const TILE_BLOCK: usize = 1 << 18;
/// Side of the square tiles transposed in registers.
const TILE: usize = 8;

/// A float format a checkpoint stores, widened to f32 exactly as `half` (and so loading)
/// widens it: every value bit for bit, a NaN quieted as F16C does.
pub trait Widen: Copy + Send + Sync {
    fn widen(self) -> f32;
    /// `dst[i] = src[i].widen()`, compiled for the running CPU.
    fn widen_slice(src: &[Self], dst: &mut [f32]);
    /// Source columns `first..` of `src` (`size`: `[rows, cols]`) widened and written
    /// transposed into `dst` (`[w, rows]`), compiled for the running CPU.
    fn transpose_block(src: &[Self], size: [usize; 2], first: usize, dst: &mut [f32]);
}

impl Widen for f32 {
    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
    fn widen_slice(src: &[Self], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
    fn transpose_block(src: &[Self], size: [usize; 2], first: usize, dst: &mut [f32]) {
        transpose_f32(src, size, first, dst);
    }
}

impl Widen for half::f16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        let h = u32::from(self.to_bits());
        let sign = (h & 0x8000) << 16;
        let shifted = (h & 0x7fff) << 13;
        let exponent = shifted & 0x0f80_0000;
        let bits = if exponent == 0x0f80_0000 {
            // Infinity or NaN (quieted): the exponent all ones.
            let quiet = if shifted & 0x007f_e000 != 0 {
                0x0040_0000
            } else {
                0
            };
            (shifted + ((255 - 31) << 23)) | quiet
        } else if exponent == 0 {
            // Zero or subnormal: m·2⁻²⁴, exactly, as (2⁻¹⁴ + m·2⁻²⁴) − 2⁻¹⁴.
            (f32::from_bits(shifted + (113 << 23)) - f32::from_bits(113 << 23)).to_bits()
        } else {
            shifted + ((127 - 15) << 23)
        };
        f32::from_bits(bits | sign)
    }
    fn widen_slice(src: &[Self], dst: &mut [f32]) {
        widen_f16(src, dst);
    }
    fn transpose_block(src: &[Self], size: [usize; 2], first: usize, dst: &mut [f32]) {
        transpose_f16(src, size, first, dst);
    }
}

impl Widen for half::bf16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        let b = u32::from(self.to_bits());
        let quiet = if b & 0x7fff > 0x7f80 { 0x40 } else { 0 };
        f32::from_bits((b | quiet) << 16)
    }
    fn widen_slice(src: &[Self], dst: &mut [f32]) {
        widen_bf16(src, dst);
    }
    fn transpose_block(src: &[Self], size: [usize; 2], first: usize, dst: &mut [f32]) {
        transpose_bf16(src, size, first, dst);
    }
}

/// A low-rank change `scale · up @ down` of a `[rows, cols]` weight, in the orientation
/// the weight is stored in (a LoRA's `[out, rank]` up and `[rank, in]` down factors).
pub struct LowRank<'a> {
    pub up: &'a [f32],
    pub down: &'a [f32],
    pub rank: usize,
    pub scale: f32,
}

/// `dst` = `src` as f32 (`[rows, cols]` row-major), transposed to `[cols, rows]` when
/// `transpose`, in parallel blocks of whole destination rows.
///
/// # Panics
/// If `src` or `dst` does not hold `rows * cols` values.
pub fn widen_into<T: Widen>(src: &[T], dst: &mut [f32], size: [usize; 2], transpose: bool) {
    widen_add_into(src, dst, size, transpose, None);
}

/// [`widen_into`] with `update` (in the source's orientation) added when given, to each
/// block of destination rows while it is still in cache: a weight read again from its
/// file and a LoRA merged into it in one pass over memory instead of two.
///
/// # Panics
/// If a slice does not hold the values its sizes say.
pub fn widen_add_into<T: Widen>(
    src: &[T],
    dst: &mut [f32],
    [rows, cols]: [usize; 2],
    transpose: bool,
    update: Option<&LowRank<'_>>,
) {
    assert_eq!(src.len(), rows * cols, "source size");
    assert_eq!(dst.len(), rows * cols, "destination size");
    if let Some(u) = update {
        assert_eq!(u.up.len(), rows * u.rank, "up factor size");
        assert_eq!(u.down.len(), u.rank * cols, "down factor size");
    }
    if dst.is_empty() {
        return;
    }
    // A single row or column is the same values in the same order transposed.
    let tiled = transpose && rows > 1 && cols > 1;
    let width = if transpose { rows } else { cols };
    let block_rows = if tiled {
        // Whole tiles, and long runs of each source row (whole cache lines, and enough of
        // them for the prefetcher to follow), but blocks for every thread to take.
        // With a product, at least four times its rank: `gemm` packs the `rank × rows`
        // factor again for every block.
        let threads = rayon::current_num_threads().max(1);
        let most = cols.div_ceil(2 * threads).next_multiple_of(TILE);
        let rank = update.map_or(0, |u| u.rank);
        (TILE_BLOCK / rows)
            .max(4 * rank)
            .clamp(4 * TILE, most.max(4 * TILE))
            .next_multiple_of(TILE)
    } else if update.is_some() {
        (BLOCK / width).max(1)
    } else {
        // No product: blocks need not be whole rows.
        dst.par_chunks_mut(BLOCK)
            .zip(src.par_chunks(BLOCK))
            .for_each(|(d, s)| T::widen_slice(s, d));
        return;
    };
    dst.par_chunks_mut(block_rows * width)
        .enumerate()
        .for_each(|(i, d)| {
            let first = i * block_rows;
            if tiled {
                T::transpose_block(src, [rows, cols], first, d);
            } else {
                T::widen_slice(&src[first * width..first * width + d.len()], d);
            }
            if let Some(u) = update {
                add_low_rank(d, first, [rows, cols], transpose, u);
            }
        });
}

/// Adds `update` to the destination rows `first..` held in `dst`: `up @ down` for the
/// source's orientation, `downᵀ @ upᵀ` (the same factors read across) for the transposed.
fn add_low_rank(
    dst: &mut [f32],
    first: usize,
    [rows, cols]: [usize; 2],
    transpose: bool,
    u: &LowRank<'_>,
) {
    if u.rank == 0 {
        return;
    }
    let (n, lhs, lhs_strides, rhs, rhs_strides) = if transpose {
        // dst[c][r] += Σp down[p][c] · up[r][p]
        let lhs = &u.down[first..];
        (rows, lhs, [1, cols], u.up, [1, u.rank])
    } else {
        // dst[r][c] += Σp up[r][p] · down[p][c]
        let lhs = &u.up[first * u.rank..];
        (cols, lhs, [u.rank, 1], u.down, [cols, 1])
    };
    gemm_f32(Gemm {
        m: dst.len() / n,
        n,
        k: u.rank,
        dst,
        dst_row_stride: n,
        accumulate: true,
        lhs,
        lhs_row_stride: lhs_strides[0],
        lhs_col_stride: lhs_strides[1],
        rhs,
        rhs_row_stride: rhs_strides[0],
        rhs_col_stride: rhs_strides[1],
        scale: u.scale,
    });
}

/// Source columns `first..first + w` of `src` (`[rows, cols]`) widened and written
/// transposed into `dst` (`[w, rows]`): eight source rows at a time, widened into a band
/// (a loop the compiler vectorises; widening inside the tiles it leaves scalar), then
/// transposed as 8×8 tiles, then the edges. Every cache line of the source is read once,
/// whole: going down a strip of columns instead, each of eight rows streams from another
/// page.
#[inline(always)]
fn transpose_block<T: Widen>(src: &[T], [rows, cols]: [usize; 2], first: usize, dst: &mut [f32]) {
    let width = dst.len() / rows;
    let full_rows = rows - rows % TILE;
    let full_cols = width - width % TILE;
    let shuffles = shuffles();
    let mut band = vec![0f32; TILE * width];
    for r0 in (0..full_rows).step_by(TILE) {
        for (r, line) in band.chunks_exact_mut(width).enumerate() {
            let at = (r0 + r) * cols + first;
            widen_slice(&src[at..at + width], line);
        }
        for c0 in (0..full_cols).step_by(TILE) {
            let tile: [Row; TILE] = std::array::from_fn(|r| {
                let at = r * width + c0;
                band[at..at + TILE].try_into().expect("a tile row")
            });
            for (c, column) in transpose_tile(shuffles, tile).iter().enumerate() {
                let at = (c0 + c) * rows + r0;
                dst[at..at + TILE].copy_from_slice(column);
            }
        }
        for c in full_cols..width {
            for r in 0..TILE {
                dst[c * rows + r0 + r] = band[r * width + c];
            }
        }
    }
    for r in full_rows..rows {
        for c in 0..width {
            dst[c * rows + r] = src[r * cols + first + c].widen();
        }
    }
}

type Row = [f32; TILE];

/// AVX, when the running CPU has AVX2 (`pulp`'s safe wrappers of the intrinsics): the
/// compiler does not vectorise an 8×8 transpose written as indexing, and scalar moves make
/// reading a weight again four times slower than widening it.
#[cfg(target_arch = "x86_64")]
type Shuffles = Option<pulp::core_arch::x86::Avx>;
#[cfg(not(target_arch = "x86_64"))]
type Shuffles = Option<()>;

#[inline(always)]
fn shuffles() -> Shuffles {
    #[cfg(target_arch = "x86_64")]
    return pulp::x86::V3::try_new().map(|simd| simd.avx);
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// An 8×8 tile transposed: AVX's unpack / shuffle / lane-permute network where there is one.
#[inline(always)]
fn transpose_tile(shuffles: Shuffles, t: [Row; TILE]) -> [Row; TILE] {
    #[cfg(target_arch = "x86_64")]
    if let Some(avx) = shuffles {
        use std::arch::x86_64::__m256;
        let v: [__m256; TILE] = t.map(pulp::cast);
        let a = [
            avx._mm256_unpacklo_ps(v[0], v[1]),
            avx._mm256_unpackhi_ps(v[0], v[1]),
            avx._mm256_unpacklo_ps(v[2], v[3]),
            avx._mm256_unpackhi_ps(v[2], v[3]),
            avx._mm256_unpacklo_ps(v[4], v[5]),
            avx._mm256_unpackhi_ps(v[4], v[5]),
            avx._mm256_unpacklo_ps(v[6], v[7]),
            avx._mm256_unpackhi_ps(v[6], v[7]),
        ];
        // Pairs 0,1 of each 128-bit lane from both (0b01_00_01_00), then pairs 2,3.
        const LOW_PAIRS: i32 = 0x44;
        const HIGH_PAIRS: i32 = 0xEE;
        let b = [
            avx._mm256_shuffle_ps::<LOW_PAIRS>(a[0], a[2]),
            avx._mm256_shuffle_ps::<HIGH_PAIRS>(a[0], a[2]),
            avx._mm256_shuffle_ps::<LOW_PAIRS>(a[1], a[3]),
            avx._mm256_shuffle_ps::<HIGH_PAIRS>(a[1], a[3]),
            avx._mm256_shuffle_ps::<LOW_PAIRS>(a[4], a[6]),
            avx._mm256_shuffle_ps::<HIGH_PAIRS>(a[4], a[6]),
            avx._mm256_shuffle_ps::<LOW_PAIRS>(a[5], a[7]),
            avx._mm256_shuffle_ps::<HIGH_PAIRS>(a[5], a[7]),
        ];
        // The low 128-bit lanes of both (0x20), then the high ones (0x31).
        let c = [
            avx._mm256_permute2f128_ps::<0x20>(b[0], b[4]),
            avx._mm256_permute2f128_ps::<0x20>(b[1], b[5]),
            avx._mm256_permute2f128_ps::<0x20>(b[2], b[6]),
            avx._mm256_permute2f128_ps::<0x20>(b[3], b[7]),
            avx._mm256_permute2f128_ps::<0x31>(b[0], b[4]),
            avx._mm256_permute2f128_ps::<0x31>(b[1], b[5]),
            avx._mm256_permute2f128_ps::<0x31>(b[2], b[6]),
            avx._mm256_permute2f128_ps::<0x31>(b[3], b[7]),
        ];
        return c.map(pulp::cast);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = shuffles;
    let mut out = [[0f32; TILE]; TILE];
    for (c, column) in out.iter_mut().enumerate() {
        for (r, o) in column.iter_mut().enumerate() {
            *o = t[r][c];
        }
    }
    out
}

#[inline(always)]
fn widen_slice<T: Widen>(src: &[T], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.widen();
    }
}

multiversion! {
    fn transpose_f32(src: &[f32], size: [usize; 2], first: usize, dst: &mut [f32]) {
        transpose_block(src, size, first, dst)
    }
}

multiversion! {
    fn transpose_f16(src: &[half::f16], size: [usize; 2], first: usize, dst: &mut [f32]) {
        transpose_block(src, size, first, dst)
    }
}

multiversion! {
    fn transpose_bf16(src: &[half::bf16], size: [usize; 2], first: usize, dst: &mut [f32]) {
        transpose_block(src, size, first, dst)
    }
}

multiversion! {
    fn widen_f16(src: &[half::f16], dst: &mut [f32]) {
        widen_slice(src, dst)
    }
}

multiversion! {
    fn widen_bf16(src: &[half::bf16], dst: &mut [f32]) {
        widen_slice(src, dst)
    }
}

#[cfg(test)]
mod tests;
