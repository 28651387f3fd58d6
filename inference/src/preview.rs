//! Live previews: the latents projected to RGB with the model family's linear factors
//! (ComfyUI's `Latent2RGBPreviewer`), at latent resolution; the UI's texture sampler
//! upscales it. Computed on the tensor's device; only `h * w * 3` values are read back.

use burn::tensor::Tensor;

use crate::device::tensor_from_vec;
use crate::family::Family;
use crate::imaging::ImageRgb8;

/// An RGB preview of the first image of a latent batch: `((latent @ factors + bias) + 1) / 2`
/// with the family's factors, clamped, as 8-bit pixels.
///
/// # Shapes
/// - `latents`: `[batch, 4, h, w]` (scaled latents, as the sampler holds them) -> `h x w`
pub fn latent_preview(latents: &Tensor<4>, family: Family) -> ImageRgb8 {
    let spec = family.spec();
    let [_, c, h, w] = latents.dims();
    let device = latents.device();
    let factors = tensor_from_vec(
        spec.preview_factors.iter().flatten().copied().collect(),
        [4, 3, 1, 1],
        &device,
    )
    .reshape([4, 3]);
    let bias = tensor_from_vec(spec.preview_bias.to_vec(), [1, 3, 1, 1], &device).reshape([1, 3]);
    let first = latents
        .clone()
        .narrow(0, 0, 1)
        .reshape([c, h * w])
        .swap_dims(0, 1); // [hw, 4]
    let rgb = (first.matmul(factors) + bias)
        .add_scalar(1.0)
        .div_scalar(2.0)
        .clamp(0.0, 1.0)
        .mul_scalar(255.0)
        .round();
    let pixels = rgb.into_data().iter::<f32>().map(|v| v as u8).collect();
    ImageRgb8 {
        width: w as u32,
        height: h as u32,
        pixels,
    }
}
