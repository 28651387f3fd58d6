//! The VAE in tiles, as diffusers' `AutoencoderKL.enable_tiling()` runs it: tiles of the
//! config's `sample_size` (latent tiles that size over the down-sampling factor) a quarter
//! overlapped, each blended into the tile above and the tile to its left with linear ramps
//! and cut to the part not overlapped. Memory then grows with the tile, not the image, at
//! the price of a slightly different image (each tile's GroupNorm sees only its tile).

use burn::tensor::Tensor;

use super::vae::{Posterior, Vae, VaeConfig};

/// How much neighbouring tiles overlap (diffusers' `tile_overlap_factor`).
const OVERLAP: f64 = 0.25;

/// One direction of diffusers' tiling: tiles of `tile` input elements start every `step`;
/// each output tile is blended over `blend` elements and keeps its first `keep`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Grid {
    tile: usize,
    step: usize,
    blend: usize,
    keep: usize,
}

impl Grid {
    /// `tile` input elements give `out_tile` output elements.
    fn new(tile: usize, out_tile: usize) -> Self {
        let blend = (out_tile as f64 * OVERLAP) as usize;
        Grid {
            tile,
            step: ((tile as f64 * (1.0 - OVERLAP)) as usize).max(1),
            blend,
            keep: out_tile - blend,
        }
    }
}

/// Tiles are halved to fit in memory down to this side in pixels (32 latents at a factor
/// of 8: below that the overlap is most of a tile and the seams show).
pub const MIN_TILE_SIDE: usize = 256;

/// A VAE's tile sides: `sample` pixels, `sample / f` latents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VaeTiles {
    pub sample: usize,
    pub latent: usize,
}

impl VaeTiles {
    /// diffusers' tiles for a VAE config.
    pub fn of(config: &VaeConfig) -> Self {
        let sample = config.sample_size.max(1);
        VaeTiles {
            sample,
            latent: (sample / config.factor()).max(1),
        }
    }

    /// Tiles of `sample` pixels in a VAE of `config` (the same tile side in another VAE,
    /// such as a refiner's, whose latent factor may differ).
    pub fn sized(sample: usize, config: &VaeConfig) -> Self {
        VaeTiles {
            sample,
            latent: (sample / config.factor()).max(1),
        }
    }

    /// Tiles half as wide (Ember's, not diffusers': where memory is short), never below
    /// [`MIN_TILE_SIDE`] pixels; `None` when these are already that small.
    pub fn halved(&self, config: &VaeConfig) -> Option<Self> {
        let sample = self.sample / 2;
        (sample >= MIN_TILE_SIDE).then(|| VaeTiles {
            sample,
            latent: (sample / config.factor()).max(1),
        })
    }

    /// The smallest tiles [`halved`](Self::halved) reaches from diffusers' ones.
    pub fn smallest(config: &VaeConfig) -> Self {
        let mut tiles = Self::of(config);
        while let Some(smaller) = tiles.halved(config) {
            tiles = smaller;
        }
        tiles
    }

    /// Whether decoding latents of this size splits them (diffusers: either side larger
    /// than a latent tile).
    pub fn split_decode(&self, [h, w]: [usize; 2]) -> bool {
        h > self.latent || w > self.latent
    }

    /// Whether encoding an image of this size splits it.
    pub fn split_encode(&self, [h, w]: [usize; 2]) -> bool {
        h > self.sample || w > self.sample
    }
}

impl Vae {
    /// [`Vae::decode`] in tiles (the whole image when it fits in one).
    ///
    /// # Shapes
    /// - `latents`: `[batch, latent_channels, h, w]` -> `[batch, 3, h * f, w * f]`
    pub fn decode_tiled(&self, latents: Tensor<4>, tiles: VaeTiles) -> Tensor<4> {
        self.decode_tiled_until(latents, tiles, &|| false)
            .expect("never stopped")
    }

    /// [`Vae::decode_tiled`], asking `stop` before each tile: `None` once it says to (a
    /// cancelled job; a large decode on the CPU takes minutes).
    pub fn decode_tiled_until(
        &self,
        latents: Tensor<4>,
        tiles: VaeTiles,
        stop: &dyn Fn() -> bool,
    ) -> Option<Tensor<4>> {
        let [_, _, h, w] = latents.dims();
        if !tiles.split_decode([h, w]) {
            return Some(self.decode(latents));
        }
        let grid = Grid::new(tiles.latent, tiles.sample);
        tiled(latents, grid, |tile| self.decode(tile), stop)
    }

    /// [`Vae::encode`] in tiles (the whole image when it fits in one).
    ///
    /// # Shapes
    /// - `image`: `[batch, 3, h, w]` -> `[batch, latent_channels, h / f, w / f]` each
    pub fn encode_tiled(&self, image: Tensor<4>, tiles: VaeTiles) -> Posterior {
        self.encode_tiled_until(image, tiles, &|| false)
            .expect("never stopped")
    }

    /// [`Vae::encode_tiled`], asking `stop` before each tile: `None` once it says to (a
    /// cancelled job's large init image).
    pub fn encode_tiled_until(
        &self,
        image: Tensor<4>,
        tiles: VaeTiles,
        stop: &dyn Fn() -> bool,
    ) -> Option<Posterior> {
        let [_, _, h, w] = image.dims();
        if !tiles.split_encode([h, w]) {
            return Some(self.encode(image));
        }
        let grid = Grid::new(tiles.sample, tiles.latent);
        tiled(image, grid, |tile| self.moments(tile), stop).map(Posterior::from_moments)
    }
}

/// Runs `f` on overlapping tiles of `x` and joins the results, in diffusers' order: each
/// result is blended with the (already blended) one above it, then with the one to its
/// left, then cut to `keep` rows and columns. `None` when `stop` says so before a tile.
fn tiled(
    x: Tensor<4>,
    grid: Grid,
    f: impl Fn(Tensor<4>) -> Tensor<4>,
    stop: &dyn Fn() -> bool,
) -> Option<Tensor<4>> {
    let [_, _, h, w] = x.dims();
    let starts = |n: usize| (0..n).step_by(grid.step).collect::<Vec<_>>();
    let (rows, cols) = (starts(h), starts(w));
    let mut done: Vec<Vec<Tensor<4>>> = Vec::with_capacity(rows.len());
    let mut joined_rows = Vec::with_capacity(rows.len());
    for (i, &y) in rows.iter().enumerate() {
        let mut row: Vec<Tensor<4>> = Vec::with_capacity(cols.len());
        let mut kept = Vec::with_capacity(cols.len());
        for (j, &x0) in cols.iter().enumerate() {
            if stop() {
                return None;
            }
            let tile =
                x.clone()
                    .narrow(2, y, grid.tile.min(h - y))
                    .narrow(3, x0, grid.tile.min(w - x0));
            let mut tile = f(tile);
            if i > 0 {
                tile = blend(&done[i - 1][j], tile, grid.blend, 2);
            }
            if j > 0 {
                tile = blend(&row[j - 1], tile, grid.blend, 3);
            }
            let [_, _, th, tw] = tile.dims();
            kept.push(
                tile.clone()
                    .narrow(2, 0, grid.keep.min(th))
                    .narrow(3, 0, grid.keep.min(tw)),
            );
            row.push(tile);
        }
        joined_rows.push(Tensor::cat(kept, 3));
        done.push(row);
    }
    Some(Tensor::cat(joined_rows, 2))
}

/// diffusers' `blend_v` (`dim` 2) / `blend_h` (`dim` 3): the first `extent` rows (columns)
/// of `b` fade in from the last `extent` of `a`, weight `k / extent` on `b` at offset `k`.
fn blend(a: &Tensor<4>, b: Tensor<4>, extent: usize, dim: usize) -> Tensor<4> {
    let extent = extent.min(a.dims()[dim]).min(b.dims()[dim]);
    if extent == 0 {
        return b;
    }
    let device = b.device();
    let weights: Vec<f32> = (0..extent)
        .map(|k| (k as f64 / extent as f64) as f32)
        .collect();
    let mut shape = [1, 1, 1, 1];
    shape[dim] = extent;
    // The ramps in the tiles' own type: a half-precision VAE's tiles are f16 or bf16.
    let dtype = b.dtype();
    let w = Tensor::<1>::from_floats(weights.as_slice(), &device)
        .reshape(shape)
        .cast(dtype);
    // diffusers multiplies by `1 - y / extent` computed in double, then rounded.
    let inverse: Vec<f32> = (0..extent)
        .map(|k| (1.0 - k as f64 / extent as f64) as f32)
        .collect();
    let inv = Tensor::<1>::from_floats(inverse.as_slice(), &device)
        .reshape(shape)
        .cast(dtype);
    let from_a = a.clone().narrow(dim, a.dims()[dim] - extent, extent);
    let len = b.dims()[dim];
    let head = b.clone().narrow(dim, 0, extent);
    let mixed = from_a * inv + head * w;
    if len == extent {
        mixed
    } else {
        Tensor::cat(vec![mixed, b.narrow(dim, extent, len - extent)], dim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_tiles_blend_in_their_own_type() {
        use burn::tensor::{DType, Device, Distribution};
        let device = Device::flex();
        let a = Tensor::<4>::random([1, 3, 8, 6], Distribution::Normal(0.0, 1.0), &device);
        let b = Tensor::<4>::random([1, 3, 8, 6], Distribution::Normal(0.0, 1.0), &device);
        for dtype in [DType::BF16, DType::F16] {
            let (a, b) = (a.clone().cast(dtype), b.clone().cast(dtype));
            let exact = blend(
                &a.clone().cast(DType::F32),
                b.clone().cast(DType::F32),
                4,
                3,
            );
            let ours = blend(&a, b, 4, 3);
            assert_eq!(ours.dtype(), dtype);
            let diff = (ours.cast(DType::F32) - exact)
                .abs()
                .max()
                .into_scalar::<f32>();
            assert!(diff < 0.05, "{dtype:?}: {diff}");
        }
    }

    #[test]
    fn grids_follow_diffusers_arithmetic() {
        // SD 1.5: 512 px tiles, 64 latent, overlap 0.25.
        assert_eq!(
            Grid::new(64, 512),
            Grid {
                tile: 64,
                step: 48,
                blend: 128,
                keep: 384
            }
        );
        assert_eq!(
            Grid::new(512, 64),
            Grid {
                tile: 512,
                step: 384,
                blend: 16,
                keep: 48
            }
        );
    }
}
