//! Live previews: the latents projected to RGB with the model family's linear factors
//! (ComfyUI's `Latent2RGBPreviewer`), at latent resolution; the UI's texture sampler
//! upscales it. Computed on the tensor's device; only `h * w * 3` values are read back.

use burn::tensor::Tensor;

use crate::device::tensor_from_vec;
use crate::imaging::ImageRgb8;

/// SD 1.x latent channel -> RGB factors (ComfyUI `latent_formats.SD15`).
const SD15_LATENT_RGB: [[f32; 3]; 4] = [
    [0.3512, 0.2297, 0.3227],
    [0.3250, 0.4974, 0.2350],
    [-0.2829, 0.1762, 0.2721],
    [-0.2120, -0.2616, -0.7177],
];

/// An RGB preview of the first image of a latent batch: `((latent @ factors) + 1) / 2`,
/// clamped, as 8-bit pixels.
///
/// # Shapes
/// - `latents`: `[batch, 4, h, w]` (scaled latents, as the sampler holds them) -> `h x w`
pub fn latent_preview(latents: &Tensor<4>) -> ImageRgb8 {
    let [_, c, h, w] = latents.dims();
    let device = latents.device();
    let factors = tensor_from_vec(
        SD15_LATENT_RGB.iter().flatten().copied().collect(),
        [4, 3, 1, 1],
        &device,
    )
    .reshape([4, 3]);
    let first = latents
        .clone()
        .narrow(0, 0, 1)
        .reshape([c, h * w])
        .swap_dims(0, 1); // [hw, 4]
    let rgb = first
        .matmul(factors)
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
