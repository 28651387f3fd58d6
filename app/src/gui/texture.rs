//! Pictures as egui textures, fitted within the largest side the window's GPU takes.
//!
//! A texture wider or taller than `max_texture_side` (8192 on many GPUs) makes egui and wgpu
//! panic, so every picture Ember shows goes through here: a larger one is shown scaled down,
//! while the image itself (saved, painted on, upscaled) keeps its own size. Whoever maps
//! screen positions to image pixels uses the image's size, never the texture's.

use egui::{ColorImage, TextureHandle, TextureOptions};
use image::imageops::FilterType;

/// `image` scaled down, keeping its aspect ratio, so that neither side exceeds `max_side`;
/// as it is when it already fits.
pub fn fitted(image: ColorImage, max_side: usize) -> ColorImage {
    let [w, h] = image.size;
    let max_side = max_side.max(1);
    if w <= max_side && h <= max_side {
        return image;
    }
    let scale = max_side as f64 / w.max(h) as f64;
    let side = |v: usize| ((v as f64 * scale).round() as usize).clamp(1, max_side);
    let (nw, nh) = (side(w), side(h));
    let Some(rgba) = image::RgbaImage::from_raw(w as u32, h as u32, image.as_raw().to_vec()) else {
        // The sizes and pixels of an egui image always agree; a blank texture rather than
        // a panic if they ever did not.
        return ColorImage::filled([nw, nh], egui::Color32::BLACK);
    };
    let small = image::imageops::resize(&rgba, nw as u32, nh as u32, FilterType::Triangle);
    ColorImage::from_rgba_premultiplied([nw, nh], small.as_raw())
}

/// A new texture of `image`, fitted within the context's largest texture side.
pub fn load(
    ctx: &egui::Context,
    name: impl Into<String>,
    image: ColorImage,
    options: TextureOptions,
) -> TextureHandle {
    let max_side = ctx.input(|i| i.max_texture_side);
    ctx.load_texture(name, fitted(image, max_side), options)
}

/// Replaces `texture`'s picture with `image`, fitted as [`load`] fits it.
pub fn set(
    texture: &mut TextureHandle,
    ctx: &egui::Context,
    image: ColorImage,
    options: TextureOptions,
) {
    let max_side = ctx.input(|i| i.max_texture_side);
    texture.set(fitted(image, max_side), options);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_picture_larger_than_the_gpu_takes_is_scaled_down_keeping_its_aspect() {
        let image = ColorImage::filled([300, 60], egui::Color32::from_rgb(200, 10, 10));
        let small = fitted(image.clone(), 100);
        assert_eq!(small.size, [100, 20]);
        assert_eq!(small.pixels[0], image.pixels[0], "the colours stay");
        assert_eq!(fitted(image.clone(), 300).size, [300, 60], "fits: as it is");
        let tall = ColorImage::filled([3, 1000], egui::Color32::WHITE);
        assert_eq!(fitted(tall, 10).size, [1, 10], "never a side of 0");
    }
}
