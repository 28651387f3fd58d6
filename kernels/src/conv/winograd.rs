//! Winograd F(2×2, 3×3) convolution on the CPU: the 3×3, stride-1, one-pixel-padded
//! convolutions that make up most of an SD UNet's and VAE's convolution work, with 16
//! multiplications per 2×2 block of output pixels instead of 36.
//!
//! Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks" (2015): each 4×4
//! input patch `d` (tiles overlap by two pixels) becomes `V = Bᵀ d B`, each 3×3 kernel `g`
//! becomes `U = G g Gᵀ`, and the 2×2 output block is `Aᵀ [Σ_c U ⊙ V] A`. The sum over input
//! channels is, for each of the 16 positions `ξ` of the 4×4 transform, one matrix product
//! `M_ξ (c_out × tiles) = U_ξ (c_out × c_in) · V_ξ (c_in × tiles)`, so 2.25× fewer FLOPs run
//! through the same `gemm` microkernel. The transforms only add and subtract (G's halves are
//! exact), and they move less memory than the im2col matrix they replace (4 floats per input
//! pixel and channel instead of 9). In float32 its error stays at the direct product's
//! level (measured over 2,560 channels: 8e-7 of the largest output against 4e-7); larger
//! tiles, F(4×4, 3×3) and up, save more FLOPs but lose accuracy quickly.

use std::ops::Range;

use rayon::prelude::*;

use super::ConvShape;
use crate::gemm::{Gemm, gemm_f32};
use crate::simd_math::multiversion;

/// Fewer channels than this (a UNet's 4-channel `conv_in` and `conv_out`) leave the
/// products too thin to repay the transforms.
const MIN_CHANNELS: usize = 16;

/// Floats of transformed input (or of products) per band of tile rows: 16 MiB, half this
/// L3, so that the products read the band from cache.
const BAND_FLOATS: usize = 1 << 22;

/// Tiles per band at least, whatever the channel count: the products of every band pack the
/// transformed weights again, a cost that only a wide enough band makes small.
const MIN_BAND_TILES: usize = 512;

/// Whether the Winograd path computes `shape`.
pub(super) fn applies(shape: &ConvShape) -> bool {
    shape.kernel == [3, 3]
        && shape.stride == [1, 1]
        && shape.padding == [1; 4]
        && shape.c_in >= MIN_CHANNELS
        && shape.c_out >= MIN_CHANNELS
}

/// Convolves NCHW `input` with `weight` (`[c_out, c_in, 3, 3]`) at stride 1 and padding 1
/// and adds `bias`, returning the NCHW output of the input's size.
///
/// The 2×2 output tiles of every image, in rows `(image, tile row)`, are taken a band of
/// tile rows at a time: the band's input is transformed, multiplied by the transformed
/// weights (the 16 products shared out over the cores) and transformed back into the
/// output.
pub(super) fn conv3x3(
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    shape: ConvShape,
) -> Vec<f32> {
    debug_assert!(applies(&shape));
    let tiles_w = shape.width.div_ceil(2);
    let channels = shape.c_in.max(shape.c_out);
    let band_rows = (BAND_FLOATS / (16 * channels * tiles_w)).max(MIN_BAND_TILES.div_ceil(tiles_w));
    conv3x3_in_bands(input, weight, bias, shape, band_rows)
}

/// [`conv3x3`] a band of `band_rows` tile rows at a time.
pub(super) fn conv3x3_in_bands(
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    shape: ConvShape,
    band_rows: usize,
) -> Vec<f32> {
    let ConvShape {
        batch,
        c_in,
        height,
        width,
        c_out,
        ..
    } = shape;
    let tiles_w = width.div_ceil(2);
    let tile_rows = batch * height.div_ceil(2);
    let band_rows = band_rows.clamp(1, tile_rows);
    let u = transform_weights(weight, c_out, c_in);
    let mut output = vec![0f32; batch * c_out * height * width];
    let mut v = vec![0f32; 16 * c_in * band_rows * tiles_w];
    let mut m = vec![0f32; 16 * c_out * band_rows * tiles_w];
    for first in (0..tile_rows).step_by(band_rows) {
        let rows = first..(first + band_rows).min(tile_rows);
        let n = rows.len() * tiles_w;
        let v = &mut v[..16 * c_in * n];
        let m = &mut m[..16 * c_out * n];
        transform_input(v, input, shape, rows.clone());
        m.par_chunks_mut(c_out * n)
            .enumerate()
            .for_each(|(xi, m_xi)| {
                gemm_f32(Gemm {
                    m: c_out,
                    n,
                    k: c_in,
                    dst: m_xi,
                    dst_row_stride: n,
                    accumulate: false,
                    lhs: &u[xi * c_in..],
                    lhs_row_stride: 16 * c_in,
                    lhs_col_stride: 1,
                    rhs: &v[xi * n..],
                    rhs_row_stride: 16 * n,
                    rhs_col_stride: 1,
                    scale: 1.0,
                })
            });
        transform_output(&mut output, m, bias, shape, rows);
    }
    output
}

/// `U = G g Gᵀ` of every kernel, laid out `[c_out, 16, c_in]`: the product for position `ξ`
/// reads `U_ξ` as a `c_out × c_in` matrix at offset `ξ · c_in`, row stride `16 · c_in`.
fn transform_weights(weight: &[f32], c_out: usize, c_in: usize) -> Vec<f32> {
    let mut u = vec![0f32; c_out * 16 * c_in];
    u.par_chunks_mut(16 * c_in)
        .zip(weight.par_chunks(9 * c_in))
        .for_each_init(
            || vec![0f32; 21 * c_in],
            |scratch, (u, kernels)| transform_kernels(kernels, scratch, u),
        );
    u
}

multiversion! {
    /// `U = G g Gᵀ` of one output channel's `c_in` kernels (`kernels`, `[c_in, 3, 3]`) into
    /// its 16 rows of `u` (`[16, c_in]`), with `G = [[1, 0, 0], [½, ½, ½], [½, −½, ½],
    /// [0, 0, 1]]`. The taps are first gathered into nine rows over the channels so that every
    /// step after is a unit-stride loop across channels.
    fn transform_kernels(kernels: &[f32], scratch: &mut [f32], u: &mut [f32]) {
        let c_in = kernels.len() / 9;
        let (taps, g_g) = scratch.split_at_mut(9 * c_in);
        for (c, kernel) in kernels.chunks_exact(9).enumerate() {
            for (t, &value) in kernel.iter().enumerate() {
                taps[t * c_in + c] = value;
            }
        }
        // `G g` (4 × 3): row r, column col at g_g[(r * 3 + col) * c_in ..].
        for col in 0..3 {
            let tap = |row: usize| &taps[(row * 3 + col) * c_in..][..c_in];
            let (g0, g1, g2) = (tap(0), tap(1), tap(2));
            let [r0, r1, r2, r3] = four_rows(&mut g_g[col * c_in..], 3 * c_in, c_in);
            for c in 0..c_in {
                r0[c] = g0[c];
                r1[c] = 0.5 * (g0[c] + g1[c] + g2[c]);
                r2[c] = 0.5 * (g0[c] - g1[c] + g2[c]);
                r3[c] = g2[c];
            }
        }
        // Each row of `G g` times `Gᵀ`.
        for r in 0..4 {
            let row = |col: usize| &g_g[(r * 3 + col) * c_in..][..c_in];
            let (a, b, d) = (row(0), row(1), row(2));
            let [u0, u1, u2, u3] = four_rows(&mut u[4 * r * c_in..], c_in, c_in);
            for c in 0..c_in {
                u0[c] = a[c];
                u1[c] = 0.5 * (a[c] + b[c] + d[c]);
                u2[c] = 0.5 * (a[c] - b[c] + d[c]);
                u3[c] = d[c];
            }
        }
    }
}

/// `V = Bᵀ d B` of every input tile in tile rows `rows`, laid out `[c_in, 16, tiles]`
/// (`tiles` the band's, row by row).
fn transform_input(v: &mut [f32], input: &[f32], shape: ConvShape, rows: Range<usize>) {
    let ConvShape {
        c_in,
        height,
        width,
        ..
    } = shape;
    let tiles_h = height.div_ceil(2);
    let tiles_w = width.div_ceil(2);
    let n = rows.len() * tiles_w;
    let plane = height * width;
    v.par_chunks_mut(16 * n).enumerate().for_each_init(
        || vec![0f32; 8 * (tiles_w + 1)],
        |scratch, (c, v)| {
            for (band_row, row) in rows.clone().enumerate() {
                let (image, tile_row) = (row / tiles_h, row % tiles_h);
                let channel = &input[(image * c_in + c) * plane..][..plane];
                let input_row = |r: usize| {
                    let y = (2 * tile_row + r).checked_sub(1).filter(|&y| y < height)?;
                    Some(&channel[y * width..][..width])
                };
                let rows = [input_row(0), input_row(1), input_row(2), input_row(3)];
                input_tile_row(rows, scratch, v, n, band_row * tiles_w);
            }
        },
    );
}

multiversion! {
    /// `V = Bᵀ d B` of the tiles of one tile row of one channel, with `Bᵀ = [[1, 0, −1, 0],
    /// [0, 1, 1, 0], [0, −1, 1, 0], [0, 1, 0, −1]]`. `rows` are the four input rows the tiles
    /// read (`None` above or below the image): tile `j` reads their columns `2j − 1 ..= 2j + 2`
    /// (zero outside the image). `v` is the channel's 16 rows of the band (`n` long each),
    /// this tile row's tiles from `at`. Splitting each padded row into its even and odd
    /// columns makes every step a unit-stride loop over the tiles.
    fn input_tile_row(rows: [Option<&[f32]>; 4], scratch: &mut [f32], v: &mut [f32], n: usize, at: usize) {
        let len = scratch.len() / 8;
        let tiles = len - 1;
        let (even, odd) = scratch.split_at_mut(4 * len);
        let mut even = four_rows(even, len, len);
        let mut odd = four_rows(odd, len, len);
        for ((row, even), odd) in rows.iter().zip(even.iter_mut()).zip(odd.iter_mut()) {
            match row {
                Some(row) => split_padded_row(row, even, odd),
                None => {
                    even.fill(0.0);
                    odd.fill(0.0);
                }
            }
        }
        for [d0, d1, d2, d3] in [&mut even, &mut odd] {
            for j in 0..len {
                let (x0, x1, x2, x3) = (d0[j], d1[j], d2[j], d3[j]);
                d0[j] = x0 - x2;
                d1[j] = x1 + x2;
                d2[j] = x2 - x1;
                d3[j] = x1 - x3;
            }
        }
        for a in 0..4 {
            let (e, o) = (&even[a][..len], &odd[a][..len]);
            let [v0, v1, v2, v3] = four_rows(&mut v[4 * a * n + at..], n, tiles);
            for j in 0..tiles {
                let (e0, e1, o0, o1) = (e[j], e[j + 1], o[j], o[j + 1]);
                v0[j] = e0 - e1;
                v1[j] = o0 + e1;
                v2[j] = e1 - o0;
                v3[j] = o0 - o1;
            }
        }
    }
}

/// The first four `len`-long rows of `rows`, `stride` apart.
#[inline(always)]
fn four_rows(rows: &mut [f32], stride: usize, len: usize) -> [&mut [f32]; 4] {
    let (r0, rest) = rows.split_at_mut(stride);
    let (r1, rest) = rest.split_at_mut(stride);
    let (r2, rest) = rest.split_at_mut(stride);
    [
        &mut r0[..len],
        &mut r1[..len],
        &mut r2[..len],
        &mut rest[..len],
    ]
}

/// Splits one input row, padded by a zero on the left and with zeros on the right, into its
/// even (`even[m]` = column `2m − 1`) and odd (`odd[m]` = column `2m`) padded columns.
#[inline(always)]
fn split_padded_row(row: &[f32], even: &mut [f32], odd: &mut [f32]) {
    let pairs = row.len() / 2;
    even[0] = 0.0;
    for ((o, e), pair) in odd[..pairs]
        .iter_mut()
        .zip(&mut even[1..=pairs])
        .zip(row.chunks_exact(2))
    {
        *o = pair[0];
        *e = pair[1];
    }
    odd[pairs..].fill(0.0);
    even[pairs + 1..].fill(0.0);
    if let [.., last] = row
        && row.len() % 2 == 1
    {
        odd[pairs] = *last;
    }
}

/// Writes the output rows of tile rows `rows` from the products `m` (`[16, c_out, tiles]`).
fn transform_output(
    output: &mut [f32],
    m: &[f32],
    bias: Option<&[f32]>,
    shape: ConvShape,
    rows: Range<usize>,
) {
    let ConvShape {
        height,
        width,
        c_out,
        ..
    } = shape;
    let tiles_h = height.div_ceil(2);
    let tiles_w = width.div_ceil(2);
    let n = rows.len() * tiles_w;
    let images = rows.start / tiles_h..(rows.end - 1) / tiles_h + 1;
    let planes = images.start * c_out..images.end * c_out;
    output[planes.start * height * width..planes.end * height * width]
        .par_chunks_mut(height * width)
        .zip(planes)
        .for_each_init(
            || vec![0f32; 4 * tiles_w],
            |scratch, (out, plane)| {
                let (image, k) = (plane / c_out, plane % c_out);
                let bias = bias.map_or(0.0, |b| b[k]);
                let own = rows.start.max(image * tiles_h)..rows.end.min((image + 1) * tiles_h);
                for row in own {
                    let at = (row - rows.start) * tiles_w;
                    let products =
                        std::array::from_fn(|xi| &m[(xi * c_out + k) * n + at..][..tiles_w]);
                    let y = 2 * (row % tiles_h);
                    let (top, bottom) = out[y * width..].split_at_mut(width);
                    let bottom = (y + 1 < height).then(|| &mut bottom[..width]);
                    output_tile_row(products, bias, scratch, top, bottom);
                }
            },
        );
}

multiversion! {
    /// One tile row's output pixels, `Y = Aᵀ M A + bias` with `Aᵀ = [[1, 1, 1, 0], [0, 1, −1,
    /// −1]]`, from the 16 products' rows `m` into the output rows `top` and `bottom` (`None`
    /// below an odd-height output; the last tile's right column is dropped for an odd width).
    fn output_tile_row(m: [&[f32]; 16], bias: f32, scratch: &mut [f32], top: &mut [f32], bottom: Option<&mut [f32]>) {
        let tiles = m[0].len();
        let [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15] =
            m.map(|row| &row[..tiles]);
        let [y00, y01, y10, y11] = four_rows(scratch, tiles, tiles);
        for j in 0..y00.len() {
            // Z = Aᵀ M (2 × 4), then Y = Z A (2 × 2); M's row a, column b is m[4a + b].
            let z00 = m0[j] + m4[j] + m8[j];
            let z01 = m1[j] + m5[j] + m9[j];
            let z02 = m2[j] + m6[j] + m10[j];
            let z03 = m3[j] + m7[j] + m11[j];
            let z10 = m4[j] - m8[j] - m12[j];
            let z11 = m5[j] - m9[j] - m13[j];
            let z12 = m6[j] - m10[j] - m14[j];
            let z13 = m7[j] - m11[j] - m15[j];
            y00[j] = z00 + z01 + z02 + bias;
            y01[j] = z01 - z02 - z03 + bias;
            y10[j] = z10 + z11 + z12 + bias;
            y11[j] = z11 - z12 - z13 + bias;
        }
        interleave(top, y00, y01);
        if let Some(bottom) = bottom {
            interleave(bottom, y10, y11);
        }
    }
}

/// `out[2j] = left[j]`, `out[2j + 1] = right[j]`, up to `out`'s length.
#[inline(always)]
fn interleave(out: &mut [f32], left: &[f32], right: &[f32]) {
    for ((pair, l), r) in out.chunks_exact_mut(2).zip(left).zip(right) {
        pair[0] = *l;
        pair[1] = *r;
    }
    if out.len() % 2 == 1 {
        out[out.len() - 1] = left[out.len() / 2];
    }
}
