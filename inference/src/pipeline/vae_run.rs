//! Running a model's VAE for a generation: whole or in tiles ([`super::vae_plan`]), and in
//! half precision with an f32 fallback. An f16 VAE overflows on some images (the SD 1.x and
//! SDXL VAEs are known to), which would save a black or NaN image; instead the image is
//! decoded (or encoded) again by an f32 copy of the VAE, kept for the rest of the session,
//! as A1111's automatic "no half VAE" does.

use burn::module::Module;
use burn::tensor::{DType, Tensor};

use crate::device::{CastParams, Precision};
use crate::model::Model;
use crate::models::vae::{Posterior, Vae};
use crate::models::vae_tiles::VaeTiles;

/// What a generation says when its model's VAE had to change to f32 during it.
pub const F32_FALLBACK_WARNING: &str = "the VAE overflowed in half precision (a black \
    image); it ran again in f32 and stays in f32 for this model";

/// The VAE that runs in f32: the model's own in f32, else its f32 copy (made now).
fn f32_vae(model: &Model) -> &Vae {
    match model.vae_precision {
        Precision::F32 => &model.vae,
        _ => model
            .vae_f32
            .get_or_init(|| model.vae.clone().map(&mut CastParams(DType::F32))),
    }
}

/// A device failure counts as finite: f32 would not help, and the generation's own check
/// reports it.
fn finite<const D: usize>(t: &Tensor<D>) -> bool {
    crate::device::all_finite(t).unwrap_or(true)
}

/// Runs `f` on the model's VAE in its precision, or in f32 when that overflows (or
/// overflowed before). `input` and the result are f32.
fn with_fallback<T>(
    model: &Model,
    input: Tensor<4>,
    f: impl Fn(&Vae, Tensor<4>) -> T,
    to_f32: impl Fn(T) -> T,
    ok: impl Fn(&T) -> bool,
) -> T {
    if model.vae_precision == Precision::F32 || model.vae_f32.get().is_some() {
        return f(f32_vae(model), input);
    }
    let half = to_f32(f(
        &model.vae,
        input.clone().cast(model.vae_precision.dtype()),
    ));
    if ok(&half) {
        return half;
    }
    f(f32_vae(model), input)
}

/// Decodes latents (already divided by the scaling factor), in `tiles` when given; `None`
/// when `stop` says so (before a tile, or by the end: an overflowed half-precision image
/// is then no failure, and a kernel may have left it unfinished).
///
/// # Shapes
/// - `latents`: `[1, latent_channels, h, w]` (f32) -> `[1, 3, h * f, w * f]` (f32)
pub fn decode(
    model: &Model,
    latents: Tensor<4>,
    tiles: Option<VaeTiles>,
    stop: &dyn Fn() -> bool,
) -> Option<Tensor<4>> {
    with_fallback(
        model,
        latents,
        |vae, z| match tiles {
            Some(tiles) => vae.decode_tiled_until(z, tiles, stop),
            None => Some(vae.decode(z)),
        },
        |t| t.map(|t| t.cast(DType::F32)),
        // Stopped (before a tile or inside a kernel): nothing to fall back for.
        |t| t.as_ref().is_none_or(finite) || stop(),
    )
    .filter(|_| !stop())
}

/// Encodes an image in [-1, 1] to the posterior, in `tiles` when given; `None` when
/// `stop` says so before a tile.
///
/// # Shapes
/// - `image`: `[1, 3, h, w]` (f32) -> mean, logvar `[1, latent_channels, h / f, w / f]` (f32)
pub fn encode(
    model: &Model,
    image: Tensor<4>,
    tiles: Option<VaeTiles>,
    stop: &dyn Fn() -> bool,
) -> Option<Posterior> {
    with_fallback(
        model,
        image,
        |vae, x| match tiles {
            Some(tiles) => vae.encode_tiled_until(x, tiles, stop),
            None => Some(vae.encode(x)),
        },
        |p| {
            p.map(|p| Posterior {
                mean: p.mean.cast(DType::F32),
                logvar: p.logvar.cast(DType::F32),
            })
        },
        // Stopped (before a tile or inside a kernel): nothing to fall back for.
        |p| {
            p.as_ref()
                .is_none_or(|p| finite(&p.mean) && finite(&p.logvar))
                || stop()
        },
    )
}
