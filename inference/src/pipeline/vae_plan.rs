//! Whether one generation's VAE runs on the whole image or in tiles: decided once, before
//! the job, from the request's [`VaeTiling`] and the memory free then.

use crate::api::{GenerateRequest, VaeTiling};
use crate::memory;
use crate::model::Model;
use crate::models::vae_tiles::VaeTiles;

/// Where free memory is not known (no `/proc/meminfo`, no `EMBER_MEMORY_LIMIT`), `auto`
/// tiles images whose whole-image VAE would need more than this.
const UNKNOWN_MEMORY_LIMIT: u64 = 8 << 30;

/// The VAE's tiles for this generation, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct VaePlan {
    /// Tiles to encode the init image and decode the latents in; `None`: the whole image.
    pub tiles: Option<VaeTiles>,
    /// Said to the user when tiles were chosen for them (`auto`).
    pub warning: Option<String>,
}

impl VaePlan {
    /// The plan for `request` on `model` with `available` bytes free.
    pub fn decide(model: &Model, request: &GenerateRequest, available: Option<u64>) -> Self {
        let tiles = VaeTiles::of(&model.vae_config);
        let f = model.vae_factor();
        let (w, h) = (request.width as usize, request.height as usize);
        let splits = tiles.split_decode([h / f, w / f]) || tiles.split_encode([h, w]);
        let whole = memory::vae_bytes(&model.vae_config, (request.width, request.height), false);
        let use_tiles = use_tiles(request.vae_tiling, splits, whole, available);
        let warning = (use_tiles && request.vae_tiling == VaeTiling::Auto).then(|| {
            let free = match available {
                Some(bytes) => format!("{} is free", memory::human_bytes(bytes)),
                None => format!(
                    "free memory is unknown here (tiles above {})",
                    memory::human_bytes(UNKNOWN_MEMORY_LIMIT)
                ),
            };
            format!(
                "the VAE ran in {} px tiles: the whole {w}x{h} image needs about {} and {free} \
                 (tiles blend, but the image differs slightly from an untiled one; \
                 --vae-tiling off refuses instead)",
                tiles.sample,
                memory::human_bytes(whole)
            )
        });
        VaePlan {
            tiles: use_tiles.then_some(tiles),
            warning,
        }
    }
}

/// The rule: tiles when the image `splits` into more than one and the mode asks for them,
/// `auto` when the `whole`-image VAE, with the quarter margin the memory check allows,
/// would need more than the `available` bytes.
pub fn use_tiles(mode: VaeTiling, splits: bool, whole: u64, available: Option<u64>) -> bool {
    splits
        && match mode {
            VaeTiling::Off => false,
            VaeTiling::On => true,
            VaeTiling::Auto => {
                whole.saturating_mul(5) / 4 > available.unwrap_or(UNKNOWN_MEMORY_LIMIT)
            }
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_tiles_only_what_does_not_fit() {
        let gib = 1u64 << 30;
        assert!(use_tiles(VaeTiling::Auto, true, 17 * gib, Some(12 * gib)));
        assert!(!use_tiles(VaeTiling::Auto, true, 4 * gib, Some(12 * gib)));
        assert!(
            use_tiles(VaeTiling::Auto, true, 11 * gib, Some(12 * gib)),
            "no margin"
        );
        // Unknown free memory: a fixed limit.
        assert!(use_tiles(VaeTiling::Auto, true, 17 * gib, None));
        assert!(!use_tiles(VaeTiling::Auto, true, 4 * gib, None));
        // One tile is the whole image: nothing to split.
        assert!(!use_tiles(VaeTiling::Auto, false, 17 * gib, Some(gib)));
        assert!(!use_tiles(VaeTiling::On, false, 17 * gib, Some(gib)));
        assert!(use_tiles(VaeTiling::On, true, 1, Some(12 * gib)));
        assert!(!use_tiles(VaeTiling::Off, true, 17 * gib, Some(gib)));
    }
}
