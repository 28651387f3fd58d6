//! A checkpoint's weight written into a model's own f32 buffer: widened from the file's
//! float format and, for a `Linear` weight (a checkpoint's `[out, in]`, Burn's `[in, out]`),
//! transposed. What reading a weight again after a LoRA costs.
//!
//! The destination is written in parallel blocks of whole rows, each transposed in 8×8
//! tiles the compiler keeps in vector registers, with the widening inlined into the tile
//! loads: `half`'s slice conversions, called a tile row at a time, cost more than the copy.

use rayon::prelude::*;

use crate::simd_math::multiversion;

/// Destination elements per parallel block (about; blocks are whole rows when transposing).
const BLOCK: usize = 1 << 16;
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

/// `dst` = `src` as f32 (`[rows, cols]` row-major), transposed to `[cols, rows]` when
/// `transpose`, in parallel blocks of whole destination rows.
///
/// # Panics
/// If `src` or `dst` does not hold `rows * cols` values.
pub fn widen_into<T: Widen>(src: &[T], dst: &mut [f32], [rows, cols]: [usize; 2], transpose: bool) {
    assert_eq!(src.len(), rows * cols, "source size");
    assert_eq!(dst.len(), rows * cols, "destination size");
    if dst.is_empty() {
        return;
    }
    if !transpose || rows <= 1 || cols <= 1 {
        // The same values in the same order (a transpose of a single row or column too).
        dst.par_chunks_mut(BLOCK)
            .zip(src.par_chunks(BLOCK))
            .for_each(|(d, s)| T::widen_slice(s, d));
        return;
    }
    // Whole tiles, and whole cache lines of the source rows (32 halves) in each block.
    let block_rows = (BLOCK / rows).max(4 * TILE).next_multiple_of(TILE);
    dst.par_chunks_mut(block_rows * rows)
        .enumerate()
        .for_each(|(i, d)| T::transpose_block(src, [rows, cols], i * block_rows, d));
}

/// Source columns `first..first + w` of `src` (`[rows, cols]`) widened and written
/// transposed into `dst` (`[w, rows]`): 8×8 tiles, then the edges.
#[inline(always)]
fn transpose_block<T: Widen>(src: &[T], [rows, cols]: [usize; 2], first: usize, dst: &mut [f32]) {
    let width = dst.len() / rows;
    let full_rows = rows - rows % TILE;
    let full_cols = width - width % TILE;
    // Along whole destination rows, `TILE` at a time: each written front to back.
    for c0 in (0..full_cols).step_by(TILE) {
        for r0 in (0..full_rows).step_by(TILE) {
            let mut tile = [[0f32; TILE]; TILE];
            for (r, line) in tile.iter_mut().enumerate() {
                let at = (r0 + r) * cols + first + c0;
                let values: &[T; TILE] = src[at..at + TILE].try_into().expect("a tile row");
                for (t, v) in line.iter_mut().zip(values) {
                    *t = v.widen();
                }
            }
            // `c` picks a column of the tile (read across its rows).
            #[allow(clippy::needless_range_loop)]
            for c in 0..TILE {
                let at = (c0 + c) * rows + r0;
                let out: &mut [f32; TILE] = (&mut dst[at..at + TILE]).try_into().expect("a tile");
                for (r, o) in out.iter_mut().enumerate() {
                    *o = tile[r][c];
                }
            }
        }
        for c in c0..c0 + TILE {
            for r in full_rows..rows {
                dst[c * rows + r] = src[r * cols + first + c].widen();
            }
        }
    }
    for c in full_cols..width {
        for r in 0..rows {
            dst[c * rows + r] = src[r * cols + first + c].widen();
        }
    }
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
