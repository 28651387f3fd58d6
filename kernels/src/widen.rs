//! A checkpoint's weight written into a model's own f32 buffer: widened from the file's
//! float format and, for a `Linear` weight (a checkpoint's `[out, in]`, Burn's `[in, out]`),
//! transposed. What reading a weight again after a LoRA costs, so it runs in parallel
//! strips: a transpose is bound by cache and TLB misses, not by memory bandwidth.

use rayon::prelude::*;

/// Columns of the file's layout (rows of the destination) each parallel task writes.
const STRIP: usize = 64;
/// Rows of the file's layout widened at a time into a buffer that stays in L1.
const ROWS: usize = 16;

/// `dst` = `src` as f32 (`[rows, cols]` row-major), transposed to `[cols, rows]` when
/// `transpose`. `widen` converts a slice exactly as loading converts it (for f16 and bf16
/// `half`'s vectorised conversions, which are exact).
///
/// # Panics
/// If `src` or `dst` does not hold `rows * cols` values.
pub fn widen_into<T: Copy + Sync>(
    src: &[T],
    dst: &mut [f32],
    [rows, cols]: [usize; 2],
    transpose: bool,
    widen: impl Fn(&[T], &mut [f32]) + Sync,
) {
    assert_eq!(src.len(), rows * cols, "source size");
    assert_eq!(dst.len(), rows * cols, "destination size");
    if !transpose || rows <= 1 || cols <= 1 {
        let chunk = (STRIP * 1024).max(1);
        dst.par_chunks_mut(chunk)
            .zip(src.par_chunks(chunk))
            .for_each(|(d, s)| widen(s, d));
        return;
    }
    dst.par_chunks_mut(STRIP * rows)
        .enumerate()
        .for_each(|(strip, d)| {
            let first = strip * STRIP;
            let width = d.len() / rows;
            let mut block = vec![0f32; ROWS * width];
            for r0 in (0..rows).step_by(ROWS) {
                let n = ROWS.min(rows - r0);
                for r in 0..n {
                    let at = (r0 + r) * cols + first;
                    widen(&src[at..at + width], &mut block[r * width..(r + 1) * width]);
                }
                for c in 0..width {
                    let out = &mut d[c * rows + r0..c * rows + r0 + n];
                    for (r, o) in out.iter_mut().enumerate() {
                        *o = block[r * width + c];
                    }
                }
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, Tensor, TensorData};

    #[test]
    fn matches_burns_transpose_for_every_shape_and_f16() {
        for [rows, cols] in [[1, 7], [7, 1], [3, 5], [64, 64], [70, 200], [321, 67]] {
            let values: Vec<f32> = (0..rows * cols).map(|i| i as f32 * 0.5 - 3.0).collect();
            let expected = Tensor::<2>::from_data(
                TensorData::new(values.clone(), [rows, cols]),
                &Device::flex(),
            )
            .transpose()
            .into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap();
            let mut dst = vec![0f32; rows * cols];
            widen_into(&values, &mut dst, [rows, cols], true, |s, d| {
                d.copy_from_slice(s)
            });
            assert_eq!(dst, expected, "{rows}x{cols} transposed");
            let halves: Vec<half::f16> = values.iter().map(|&v| half::f16::from_f32(v)).collect();
            let mut plain = vec![0f32; rows * cols];
            widen_into(&halves, &mut plain, [rows, cols], false, |s, d| {
                use half::slice::HalfFloatSliceExt;
                s.convert_to_f32_slice(d)
            });
            let exact: Vec<f32> = halves.iter().map(|h| h.to_f32()).collect();
            assert_eq!(plain, exact, "{rows}x{cols} f16");
        }
    }
}
