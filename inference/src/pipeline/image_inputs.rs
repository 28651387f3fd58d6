//! Image conditioning for img2img and inpainting: VAE-encoded init image, mask latents,
//! masked-image latents, drawn in diffusers' order from the one generator.

use burn::tensor::Tensor;

use crate::device::tensor_from_vec;
use crate::error::{Error, Result};
use crate::imaging::{self, ImageGray8, ImageRgb8};
use crate::model::Model;
use crate::models::vae_tiles::VaeTiles;
use crate::rng::BatchRng;

/// `[1, 3, h, w]` in [-1, 1].
pub fn image_tensor(model: &Model, img: &ImageRgb8) -> Tensor<4> {
    let dims = [1, 3, img.height as usize, img.width as usize];
    tensor_from_vec(imaging::to_planar_signed(img), dims, &model.device)
}

/// diffusers `_encode_vae_image`: a posterior sample (one draw per image) times the
/// scaling factor; the VAE runs in `tiles` when given, and [`Error::Cancelled`] comes back
/// when `stop` says so before a tile.
///
/// # Shapes
/// - `image`: `[1, 3, h, w]` -> `[batch, 4, h / f, w / f]`
pub fn encode_image(
    model: &Model,
    image: Tensor<4>,
    (tiles, stop): (Option<VaeTiles>, &dyn Fn() -> bool),
    rng: &mut BatchRng,
) -> Result<Tensor<4>> {
    let posterior = super::vae_run::encode(model, image, tiles, stop).ok_or(Error::Cancelled)?;
    let [_, c, h, w] = posterior.mean.dims();
    let batch = rng.batch();
    let noise = tensor_from_vec(rng.randn(c * h * w), [batch, c, h, w], &model.device);
    let mean = posterior.mean.clone().repeat_dim(0, batch);
    let std = posterior.std().repeat_dim(0, batch);
    Ok((mean + std * noise).mul_scalar(model.vae_config.scaling_factor))
}

/// The binarised mask at latent size, `[1, 1, h / f, w / f]` (1 = repaint; nearest resize).
pub fn latent_mask(model: &Model, mask: &ImageGray8) -> Tensor<4> {
    let (w, h) = (mask.width as usize, mask.height as usize);
    let f = model.vae_factor();
    let small = imaging::resize_nearest(&imaging::binarize(mask), (w, h), (w / f, h / f));
    tensor_from_vec(small, [1, 1, h / f, w / f], &model.device)
}

/// The inpainting inputs.
pub struct MaskInputs {
    /// Binarised mask at latent size, `[1, 1, h / f, w / f]` (1 = repaint).
    pub mask_latent: Tensor<4>,
    /// The VAE latents of the image with the masked area blanked, `[batch, 4, h / f, w / f]`.
    pub masked_image_latents: Tensor<4>,
}

/// diffusers `prepare_mask_latents`: the masked image (pixels where the mask is set are
/// zeroed in [-1, 1] space) is encoded with one draw; the mask is resized by nearest.
pub fn mask_inputs(
    model: &Model,
    init: &ImageRgb8,
    mask: &ImageGray8,
    tiles: (Option<VaeTiles>, &dyn Fn() -> bool),
    rng: &mut BatchRng,
) -> Result<MaskInputs> {
    let (w, h) = (mask.width as usize, mask.height as usize);
    let binary = imaging::binarize(mask);
    let mut masked = imaging::to_planar_signed(init);
    for plane in masked.chunks_exact_mut(w * h) {
        for (v, m) in plane.iter_mut().zip(&binary) {
            if *m >= 0.5 {
                *v = 0.0;
            }
        }
    }
    let masked = tensor_from_vec(masked, [1, 3, h, w], &model.device);
    let masked_image_latents = encode_image(model, masked, tiles, rng)?;
    let mask_latent = latent_mask(model, mask);
    Ok(MaskInputs {
        mask_latent,
        masked_image_latents,
    })
}
