//! Attention padded to the tiles of a GPU's matrix units, so that Burn's tensor-core flash
//! kernel can take shapes it would otherwise refuse (SD 1.5's 40-wide heads above all).
//!
//! Why: Burn's accelerated attention (`blackbox_accelerated`, on cooperative matrices) only
//! launches when the head size is a multiple of its instruction's `k` (16 on NVIDIA, AMD and
//! Intel) and the query count a multiple of its stage (the instruction's `m` times 2, 4 or 8
//! planes). Where it cannot, Burn 0.22.1 quietly runs its materialising fallback in its
//! place, even inside the autotune, whose accelerated candidates then all time that
//! fallback: for SD 1.5 at 512², batch 2, a 512 MiB score matrix per call in f16. Zero
//! columns added to the queries and keys change no dot product; zero columns of the values
//! give zero outputs, cut off again; added query rows attend like any other and are cut off
//! too. Only the scale needs care: Burn's scale is `1/√d` of the padded width, and passing
//! our own would send it to the fallback (it falls back whenever `scale` is given), so the
//! queries are multiplied by `√(padded/d)` instead.

use burn::tensor::ops::PadMode;
use burn::tensor::{DType, Tensor};

/// Planes per stage that Burn's autotune tries for the accelerated kernel (2, 4 and 8 in
/// burn-cubecl 0.22.1's `attention/tune.rs`): the query count must be a multiple of one of
/// them times the instruction's `m`.
const STAGE_PLANES: [usize; 3] = [8, 4, 2];

/// The multiples the accelerated kernel needs, from the device's matrix instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatrixTiles {
    /// Of the queries per head (before the planes of a stage).
    pub queries: usize,
    /// Of the query/key width.
    pub head: usize,
    /// Of the value width.
    pub value: usize,
}

impl MatrixTiles {
    /// The multiples that suit every `(m, n, k)` instruction of half-precision inputs the
    /// device offers (Burn picks one by the problem's aspect): the least common multiples.
    /// `None` without any.
    pub fn for_instructions(shapes: impl IntoIterator<Item = (u32, u32, u32)>) -> Option<Self> {
        shapes.into_iter().fold(None, |tiles, (m, n, k)| {
            let [m, n, k] = [m, n, k].map(|x| x.max(1) as usize);
            Some(match tiles {
                None => Self {
                    queries: m,
                    head: k,
                    value: n,
                },
                Some(t) => Self {
                    queries: lcm(t.queries, m),
                    head: lcm(t.head, k),
                    value: lcm(t.value, n),
                },
            })
        })
    }

    /// The padded `[queries, head, value]` sizes for a problem of `n` queries, `d`-wide heads
    /// and `dv`-wide values. Queries take the largest stage that pads at most a sixteenth
    /// more rows, else the smallest.
    pub fn padded(&self, n: usize, d: usize, dv: usize) -> [usize; 3] {
        let stage = |planes: usize| n.next_multiple_of(self.queries * planes);
        let rows = STAGE_PLANES
            .iter()
            .map(|&planes| stage(planes))
            .find(|&rows| rows - n <= n / 16)
            .unwrap_or_else(|| stage(STAGE_PLANES[STAGE_PLANES.len() - 1]));
        [
            rows,
            d.next_multiple_of(self.head),
            dv.next_multiple_of(self.value),
        ]
    }
}

fn lcm(a: usize, b: usize) -> usize {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

/// Whether a problem of `n` queries and `d`/`dv`-wide heads must be padded for `tiles`.
pub fn needs_padding(tiles: &MatrixTiles, n: usize, d: usize, dv: usize) -> bool {
    tiles.padded(n, d, dv) != [n, d, dv]
}

/// `softmax(q kᵀ / √d) v` by Burn's attention on inputs padded to `tiles` (see the module
/// docs), the result cut back to the problem's size.
///
/// # Shapes
/// - `q`: `[batch, heads, n, d]`, `k`: `[batch, heads, m, d]`, `v`: `[batch, heads, m, dv]`
/// - returns `[batch, heads, n, dv]`
pub fn padded_attention(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    tiles: &MatrixTiles,
) -> Tensor<4> {
    let [_, _, n, d] = q.dims();
    let dv = v.dims()[3];
    let [rows, width, value_width] = tiles.padded(n, d, dv);
    let zeros = PadMode::Constant(0.0);
    // Only wider heads change Burn's scale. The factor is applied in f32, so half-precision
    // queries are rounded once more, by at most half a unit in the last place.
    let q = if width == d {
        q
    } else {
        let dtype = q.dtype();
        (q.cast(DType::F32))
            .mul_scalar((width as f64 / d as f64).sqrt())
            .cast(dtype)
    };
    let q = q.pad([(0, rows - n), (0, width - d)], zeros);
    let k = k.pad([(0, width - d)], zeros);
    let v = v.pad([(0, value_width - dv)], zeros);
    let out = crate::reference::attention(q, k, v);
    out.narrow(2, 0, n).narrow(3, 0, dv)
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Device, Distribution};

    use super::*;
    use crate::test_support::rel_diff;

    /// NVIDIA's cooperative-matrix list for f16 inputs (16×16×16, 16×8×16, 16×8×8): every
    /// multiple 16; Intel's 8×8×16 keeps 8 queries and values; nothing, no tiles.
    #[test]
    fn tiles_suit_every_instruction_the_device_offers() {
        let nvidia = MatrixTiles::for_instructions([(16, 16, 16), (16, 8, 16), (16, 8, 8)]);
        let expected = MatrixTiles {
            queries: 16,
            head: 16,
            value: 16,
        };
        assert_eq!(nvidia, Some(expected));
        let intel = MatrixTiles::for_instructions([(8, 8, 16)]).expect("tiles");
        assert_eq!((intel.queries, intel.head, intel.value), (8, 16, 8));
        assert_eq!(MatrixTiles::for_instructions([]), None);
    }

    /// SD 1.5's heads (40 wide) grow to 48; 80, 160 and SDXL's 64 stay; queries take eight
    /// planes where that adds little (3952 → 3968, SDXL 832×1216's top level) and fewer
    /// where eight would double a small problem (the 8×8 mid block's 64 stay 64; 70 → 96).
    #[test]
    fn sd_shapes_are_padded_only_where_the_kernel_needs_it() {
        let tiles = MatrixTiles::for_instructions([(16, 16, 16)]).expect("tiles");
        assert_eq!(tiles.padded(4096, 40, 40), [4096, 48, 48]);
        for d in [64, 80, 160] {
            assert!(!needs_padding(&tiles, 4096, d, d), "head {d}");
        }
        assert_eq!(tiles.padded(3952, 64, 64), [3968, 64, 64]);
        assert_eq!(tiles.padded(64, 160, 160), [64, 160, 160]);
        assert_eq!(tiles.padded(70, 160, 160), [96, 160, 160]);
    }

    /// Padded heads, values and queries give Burn's attention on the original shapes (f32,
    /// on the CPU: the padding is plain Burn; `gpu::tests` runs it on wgpu).
    #[test]
    fn padding_changes_nothing_but_the_shapes() {
        let device = Device::flex();
        let normal =
            |dims: [usize; 4]| Tensor::<4>::random(dims, Distribution::Normal(0.0, 1.0), &device);
        let (q, k, v) = (
            normal([2, 3, 70, 40]),
            normal([2, 3, 77, 40]),
            normal([2, 3, 77, 40]),
        );
        let tiles = MatrixTiles::for_instructions([(16, 16, 16)]).expect("tiles");
        assert_eq!(tiles.padded(70, 40, 40), [96, 48, 48]);
        let expected = crate::reference::attention(q.clone(), k.clone(), v.clone());
        let ours = padded_attention(q.clone(), k.clone(), v.clone(), &tiles);
        assert_eq!(ours.dims(), [2, 3, 70, 40]);
        let error = rel_diff(ours, expected.clone());
        assert!(error < 1e-5, "{error}");
        // Heads already a multiple: only the queries grow, the scale stays.
        let queries_only = MatrixTiles {
            head: 8,
            value: 8,
            ..tiles
        };
        assert_eq!(queries_only.padded(70, 40, 40), [96, 40, 40]);
        let error = rel_diff(padded_attention(q, k, v, &queries_only), expected);
        assert!(error < 1e-5, "queries only: {error}");
    }
}
