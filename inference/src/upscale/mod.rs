//! Image upscalers: ESRGAN / Real-ESRGAN models (RRDBNet), run in overlapping tiles, and the
//! plain resamplers (Lanczos, and torch's `interpolate` modes for latents) that hires fix and
//! the Extras tab use.
//!
//! Channel order: the networks were trained on RGB (basicsr converts OpenCV's BGR to RGB),
//! and ComfyUI feeds RGB; A1111's `upscale_with_model` feeds BGR. [`ChannelOrder`] picks.

mod load;
pub mod resample;
pub mod rrdbnet;
pub mod tiles;

use std::ops::ControlFlow;

pub use load::{UpscaleModel, load};
use tiles::Planar;

use crate::error::{Error, Result};
use crate::imaging::ImageRgb8;

/// Largest width or height an upscale may produce.
pub const MAX_OUTPUT_SIDE: u32 = 16_384;
/// Largest output in pixels (64 megapixels: 8192 x 8192; its float accumulator is 1 GiB).
pub const MAX_OUTPUT_PIXELS: u64 = 64 << 20;
/// Largest factor `ember upscale` and the Extras tab accept.
pub const MAX_SCALE: f32 = 8.0;
/// The model runs at most this many times in a row for a large factor (A1111's limit).
const MAX_PASSES: usize = 3;

/// The order of the colour channels the network sees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ChannelOrder {
    /// What the models were trained on (ComfyUI, Real-ESRGAN's own scripts).
    #[default]
    Rgb,
    /// A1111 (`upscale_with_model` converts the image to BGR first).
    Bgr,
}

impl ChannelOrder {
    pub fn parse(name: &str) -> Result<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "rgb" => Ok(Self::Rgb),
            "bgr" | "a1111" => Ok(Self::Bgr),
            other => Err(Error::settings(format!(
                "unknown channel order {other:?}; valid: rgb, bgr"
            ))),
        }
    }
}

/// How to run an upscaler.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UpscaleOptions {
    /// The factor of the result; `None` is the model's own.
    pub scale: Option<f32>,
    /// Tile side in input pixels.
    pub tile: u32,
    /// Pixels neighbouring tiles share.
    pub overlap: u32,
    pub channel_order: ChannelOrder,
}

impl Default for UpscaleOptions {
    fn default() -> Self {
        Self {
            scale: None,
            tile: 256,
            overlap: 32,
            channel_order: ChannelOrder::Rgb,
        }
    }
}

/// An upscale job as plain data (the app's Extras view sends it to the worker).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UpscaleRequest {
    pub image: ImageRgb8,
    /// The ESRGAN model file.
    #[serde(with = "crate::path_json")]
    pub model: std::path::PathBuf,
    pub options: UpscaleOptions,
    /// The source image's own generation parameters, kept on the result.
    pub source_parameters: Option<String>,
}

/// A1111's `extras` text for an upscale by `scale` with the model named `model`.
pub fn extras_text(scale: f32, model: &str) -> String {
    format!("Postprocess upscale by: {scale}, Postprocess upscaler: {model}")
}

/// An f32 setting as the Python float a person typed (`1.3`, not 1.2999999523…): A1111
/// does its size arithmetic in doubles on the number from the UI.
pub fn typed(v: f32) -> f64 {
    v.to_string().parse().unwrap_or(f64::from(v))
}

/// The size `(w, h)` scaled by `scale` as A1111's upscalers compute it
/// (`int(w * scale // 8 * 8)`: whole multiples of 8), checked against the output limits.
pub fn target_size((w, h): (u32, u32), scale: f32) -> Result<(u32, u32)> {
    check_scale(scale)?;
    let side = |v: u32| ((f64::from(v) * typed(scale) / 8.0).floor() * 8.0) as u32;
    let out = (side(w), side(h));
    if out.0 == 0 || out.1 == 0 {
        return Err(Error::settings(format!(
            "a {w}x{h} image upscaled by {scale} is under 8 pixels a side"
        )));
    }
    check_output_size(out)?;
    Ok(out)
}

/// Refuses factors outside 1 to [`MAX_SCALE`].
pub fn check_scale(scale: f32) -> Result<()> {
    if !scale.is_finite() || !(1.0..=MAX_SCALE).contains(&scale) {
        return Err(Error::settings(format!(
            "the upscale factor must be between 1 and {MAX_SCALE}, got {scale}"
        )));
    }
    Ok(())
}

/// Refuses outputs over [`MAX_OUTPUT_SIDE`] or [`MAX_OUTPUT_PIXELS`].
pub fn check_output_size((w, h): (u32, u32)) -> Result<()> {
    if w == 0 || h == 0 {
        return Err(Error::settings(format!(
            "an upscaled size of {w}x{h} has no pixels"
        )));
    }
    if w > MAX_OUTPUT_SIDE || h > MAX_OUTPUT_SIDE || u64::from(w) * u64::from(h) > MAX_OUTPUT_PIXELS
    {
        return Err(Error::settings(format!(
            "the upscaled image would be {w}x{h}; Ember makes at most {MAX_OUTPUT_SIDE} pixels a \
             side and 64 megapixels; choose a smaller factor"
        )));
    }
    Ok(())
}

/// Upscales `image` with `model` to `options.scale` (the model's own by default) as A1111's
/// `Upscaler.upscale` does: the model runs at least once and until the image covers the
/// target (at most 3 times), then a Lanczos resize makes the exact size.
/// `on_tile(done, total)` reports each tile and may cancel.
pub fn upscale(
    model: &UpscaleModel,
    image: &ImageRgb8,
    options: &UpscaleOptions,
    on_tile: &mut dyn FnMut(usize, usize) -> ControlFlow<()>,
) -> Result<ImageRgb8> {
    let native = model.scale() as f32;
    let target = target_size((image.width, image.height), options.scale.unwrap_or(native))?;
    run_passes(model, image, target, (options, true), on_tile)
}

/// [`upscale`] to an exact size (`options.scale` is not read), for the hires fix: the model
/// runs only while the image does not cover `target`.
pub fn upscale_to(
    model: &UpscaleModel,
    image: &ImageRgb8,
    target: (u32, u32),
    options: &UpscaleOptions,
    on_tile: &mut dyn FnMut(usize, usize) -> ControlFlow<()>,
) -> Result<ImageRgb8> {
    run_passes(model, image, target, (options, false), on_tile)
}

fn run_passes(
    model: &UpscaleModel,
    image: &ImageRgb8,
    target: (u32, u32),
    (options, at_least_once): (&UpscaleOptions, bool),
    on_tile: &mut dyn FnMut(usize, usize) -> ControlFlow<()>,
) -> Result<ImageRgb8> {
    check_output_size(target)?;
    if options.tile < 16 || options.overlap >= options.tile / 2 {
        return Err(Error::settings(format!(
            "tiles must be at least 16 pixels and overlap by less than half: got {} with {} \
             overlap",
            options.tile, options.overlap
        )));
    }
    let mut current = image.clone();
    let s = model.scale() as u32;
    for pass in 0..MAX_PASSES {
        let covered = current.width >= target.0 && current.height >= target.1;
        if covered && !(at_least_once && pass == 0) {
            break;
        }
        // A pass that would overshoot the output limit runs on the image shrunk so that it
        // lands on the target instead (the Lanczos resize would only shrink it again).
        if check_output_size((current.width * s, current.height * s)).is_err() {
            let smaller = (target.0.div_ceil(s).max(1), target.1.div_ceil(s).max(1));
            current = resample::lanczos(&current, smaller);
        }
        let input = to_planar_unit(&current, options.channel_order);
        let out = tiles::run_tiled(
            model,
            &input,
            (options.tile as usize, options.overlap as usize),
            on_tile,
        )?;
        current = from_planar_unit(&out, options.channel_order);
        if model.scale() == 1 {
            break;
        }
    }
    Ok(resample::lanczos(&current, target))
}

/// `[3, h, w]` in [0, 1] (`v / 255`) in the network's channel order.
pub fn to_planar_unit(img: &ImageRgb8, order: ChannelOrder) -> Planar {
    let n = (img.width * img.height) as usize;
    let mut data = vec![0f32; 3 * n];
    for (i, px) in img.pixels.chunks_exact(3).enumerate() {
        for (c, &v) in px.iter().enumerate() {
            let plane = match order {
                ChannelOrder::Rgb => c,
                ChannelOrder::Bgr => 2 - c,
            };
            data[plane * n + i] = f32::from(v) / 255.0;
        }
    }
    Planar {
        width: img.width as usize,
        height: img.height as usize,
        data,
    }
}

/// Back to 8 bits: clamped to [0, 1], times 255, rounded (A1111's `torch_bgr_to_pil_image`).
pub fn from_planar_unit(planar: &Planar, order: ChannelOrder) -> ImageRgb8 {
    let n = planar.width * planar.height;
    let mut pixels = vec![0u8; 3 * n];
    for (i, px) in pixels.chunks_exact_mut(3).enumerate() {
        for (c, p) in px.iter_mut().enumerate() {
            let plane = match order {
                ChannelOrder::Rgb => c,
                ChannelOrder::Bgr => 2 - c,
            };
            *p = (planar.data[plane * n + i].clamp(0.0, 1.0) * 255.0).round() as u8;
        }
    }
    ImageRgb8 {
        width: planar.width as u32,
        height: planar.height as u32,
        pixels,
    }
}
