//! Whether one generation's VAE runs on the whole image or in tiles, and how large: decided
//! once, before the job, from the request's [`VaeTiling`] and the memory free then on the
//! model's device (the GPU's own memory on a GPU).

use crate::api::{GenerateRequest, VaeTiling};
use crate::memory;
use crate::model::Model;
use crate::models::vae::VaeConfig;
use crate::models::vae_tiles::VaeTiles;

/// Where free memory is not known (no `/proc/meminfo`, no `EMBER_MEMORY_LIMIT`; a GPU whose
/// driver does not say, without `EMBER_GPU_MEMORY`), `auto` tiles images whose whole-image
/// VAE would need more than this.
const UNKNOWN_MEMORY_LIMIT: u64 = 8 << 30;

/// The VAE's tiles for this generation, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct VaePlan {
    /// Tiles to encode the init image and decode the latents in; `None`: the whole image.
    pub tiles: Option<VaeTiles>,
    /// Said to the user when tiles were chosen for them (`auto`) or made smaller than
    /// diffusers' to fit.
    pub warning: Option<String>,
}

impl VaePlan {
    /// The plan for `request` on `model` with `available` bytes free.
    pub fn decide(model: &Model, request: &GenerateRequest, available: Option<u64>) -> Self {
        let config = &model.vae_config;
        let size = (request.width, request.height);
        let tiles = plan_tiles(request.effective_vae_tiling(), config, size, available);
        let (w, h) = size;
        let whole = memory::vae_bytes(config, size, false);
        let free = || match available {
            Some(bytes) => format!("{} is free", memory::human_bytes(bytes)),
            None => format!(
                "free memory is unknown here (tiles above {})",
                memory::human_bytes(UNKNOWN_MEMORY_LIMIT)
            ),
        };
        let warning = tiles.and_then(|t| {
            let shrunk = t != VaeTiles::of(config);
            match request.vae_tiling {
                VaeTiling::Auto => Some(format!(
                    "the VAE ran in {} px tiles: the whole {w}x{h} image needs about {} and {} \
                     (tiles blend, but the image differs slightly from an untiled one; \
                     --vae-tiling off refuses instead)",
                    t.sample,
                    memory::human_bytes(whole),
                    free()
                )),
                VaeTiling::On if shrunk => Some(format!(
                    "the VAE ran in {} px tiles, smaller than the usual {} px, to fit: {}",
                    t.sample,
                    VaeTiles::of(config).sample,
                    free()
                )),
                _ => None,
            }
        });
        VaePlan { tiles, warning }
    }

    /// The planned tiles, at their planned (perhaps halved) side, in the VAE of `decoder`
    /// (a refiner's may differ in its config). Not that VAE's own diffusers tiles: SDXL's
    /// are the whole 1024² image, so taking them undid the halving and an 8 GiB card ran
    /// out of memory decoding (measured with `tests/cuda_dry_run`'s stand-in driver).
    pub fn decode_tiles(&self, decoder: &VaeConfig) -> Option<VaeTiles> {
        self.tiles
            .map(|planned| VaeTiles::sized(planned.sample, decoder))
    }
}

/// The tiles for a `width` x `height` image: `None` (the whole image) when `mode` is off,
/// when `auto` finds the whole image fits in `available` bytes, or when the tiles chosen
/// would not split it; else diffusers' tiles, halved while a tile does not fit (down to
/// [`crate::models::vae_tiles::MIN_TILE_SIDE`]).
pub fn plan_tiles(
    mode: VaeTiling,
    config: &VaeConfig,
    (width, height): (u32, u32),
    available: Option<u64>,
) -> Option<VaeTiles> {
    let fits = |w: u32, h: u32| fits(memory::vae_bytes(config, (w, h), false), available);
    let wanted = match mode {
        VaeTiling::Off => false,
        VaeTiling::On => true,
        VaeTiling::Auto => !fits(width, height),
    };
    if !wanted {
        return None;
    }
    let mut tiles = VaeTiles::of(config);
    while !fits(tiles.sample as u32, tiles.sample as u32) {
        match tiles.halved(config) {
            Some(smaller) => tiles = smaller,
            None => break,
        }
    }
    let f = config.factor();
    let (w, h) = (width as usize, height as usize);
    let splits = tiles.split_decode([h / f, w / f]) || tiles.split_encode([h, w]);
    splits.then_some(tiles)
}

/// Whether a VAE pass needing `bytes` fits in `available` with the quarter margin the
/// memory check allows.
fn fits(bytes: u64, available: Option<u64>) -> bool {
    bytes.saturating_mul(5) / 4 <= available.unwrap_or(UNKNOWN_MEMORY_LIMIT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::Family;

    const GIB: u64 = 1 << 30;

    fn sides(mode: VaeTiling, family: Family, side: u32, available: Option<u64>) -> Option<usize> {
        let config = family.spec().vae_preset();
        plan_tiles(mode, &config, (side, side), available).map(|t| t.sample)
    }

    #[test]
    fn auto_tiles_only_what_does_not_fit_and_shrinks_tiles_that_do_not() {
        use Family::{Sd1, Sdxl};
        use VaeTiling::Auto;
        // SD's VAE at 1024²: about 4 GiB whole, 1 GiB in its own 512 px tiles.
        assert_eq!(sides(Auto, Sd1, 1024, Some(12 * GIB)), None);
        assert_eq!(sides(Auto, Sd1, 1024, Some(2 * GIB)), Some(512));
        assert_eq!(sides(Auto, Sd1, 1024, Some(GIB)), Some(256));
        // Nothing fits: the smallest tiles (the job's memory check refuses it, with hints).
        assert_eq!(sides(Auto, Sd1, 1024, Some(1)), Some(256));
        // SDXL's tile is the whole 1024² image: on an 8 GiB GPU holding the weights, it is
        // halved so the decode splits at all.
        assert_eq!(sides(Auto, Sdxl, 1024, Some(3 * GIB / 2)), Some(512));
        // Free memory unknown: a fixed 8 GiB.
        assert_eq!(sides(Auto, Sd1, 2048, None), Some(512));
        assert_eq!(sides(Auto, Sd1, 1024, None), None);
    }

    /// SDXL's decode at 1024² on an 8 GiB card: the 512 px tiles planned, not the VAE's
    /// own 1024 px tile (the whole image).
    #[test]
    fn the_decoder_runs_the_planned_tiles() {
        let config = Family::Sdxl.spec().vae_preset();
        let tiles = plan_tiles(VaeTiling::Auto, &config, (1024, 1024), Some(3 * GIB / 2));
        let plan = VaePlan {
            tiles,
            warning: None,
        };
        let decoded = plan.decode_tiles(&config).unwrap();
        assert_eq!((decoded.sample, decoded.latent), (512, 64));
        assert_eq!(
            VaeTiles::of(&config).sample,
            1024,
            "the VAE's own tile is larger"
        );
        let whole = VaePlan {
            tiles: None,
            warning: None,
        };
        assert_eq!(whole.decode_tiles(&config), None);
    }

    #[test]
    fn on_uses_diffusers_tiles_where_they_fit_and_off_never_tiles() {
        use Family::Sd1;
        assert_eq!(sides(VaeTiling::On, Sd1, 1024, Some(12 * GIB)), Some(512));
        assert_eq!(sides(VaeTiling::On, Sd1, 1024, Some(GIB)), Some(256));
        // One tile is the whole image: nothing to split.
        assert_eq!(sides(VaeTiling::On, Sd1, 512, Some(12 * GIB)), None);
        assert_eq!(sides(VaeTiling::Off, Sd1, 2048, Some(1)), None);
    }
}
