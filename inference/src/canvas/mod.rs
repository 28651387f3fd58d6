//! The canvas: pure functions on images and masks around an inpainting run (mask blur,
//! "only masked" crop and paste-back, masked-content fill, outpainting, the pixel-space
//! composite that keeps unmasked pixels exactly), and fitting a source image to the
//! generation size. No tensors here: the engine sees only the prepared image and mask.
//!
//! A1111's names: "Mask blur", "Inpaint area" (Whole picture / Only masked, "Only masked
//! padding, pixels"), "Masked content" (fill / original / latent noise / latent nothing),
//! "Resize mode" (Just resize / Crop and resize / Resize and fill).

mod job;
mod mask;
mod paint;
pub(crate) use paint::extend_edges;

pub use job::{CanvasJob, CanvasOptions, canvas_job};
pub use mask::{Rect, blur_mask, crop_region, invert};
pub use paint::{
    Extension, FitMode, composite, crop, fill_masked, fit, fit_mask, outpaint, outpaint_placement,
    resize,
};

use crate::api::MaskedContent;
use crate::error::{Error, Result};
use crate::imaging::{ImageGray8, ImageRgb8};

/// The generation size for a source image of `width`×`height`: each side rounded down to a
/// multiple of 8 (the VAE's factor) within `8..=MAX_SIDE`, so Generate never fails on a size
/// the app or the CLI picked itself.
pub fn generation_size(width: u32, height: u32) -> (u32, u32) {
    let side = |v: u32| (v / 8 * 8).clamp(8, crate::api::MAX_SIDE);
    (side(width), side(height))
}

/// Where inpainting generates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InpaintArea {
    /// The whole picture at the generation size.
    Whole,
    /// A box around the (blurred) mask, `padding` pixels wider on each side, grown to the
    /// generation's aspect ratio, generated at the full generation size and pasted back.
    OnlyMasked { padding: u32 },
}

/// Everything about an inpainting run that is not the engine's business.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InpaintOptions {
    /// Gaussian blur (sigma, pixels) of the mask: feathers the composite and the crop.
    pub mask_blur: u32,
    pub area: InpaintArea,
    /// `Fill` is done here; the latent modes by the engine (see [`MaskedContent`]).
    pub masked_content: MaskedContent,
}

impl Default for InpaintOptions {
    /// A1111's defaults: blur 4, whole picture (padding 32 when switched), original content.
    fn default() -> Self {
        Self {
            mask_blur: 4,
            area: InpaintArea::Whole,
            masked_content: MaskedContent::Original,
        }
    }
}

/// The engine's inputs, and what [`finish`] needs to put its outputs back.
#[derive(Clone)]
pub struct Prepared {
    /// The image to inpaint, at the generation size.
    pub init: ImageRgb8,
    /// Its mask, at the generation size (blurred; the engine binarises it).
    pub mask: ImageGray8,
    pub paste: Paste,
}

/// How generated images go back onto the source. Read back (a job kept in `queue.json`), a
/// mask of another size or a box outside the canvas is refused: [`finish`] relies on both.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "PasteParts")]
pub struct Paste {
    /// The source (canvas) and its blurred mask, at the canvas size.
    source: ImageRgb8,
    mask: ImageGray8,
    /// The "only masked" box on the canvas; `None` for the whole picture.
    region: Option<Rect>,
}

/// A [`Paste`] as read, before its checks.
#[derive(serde::Deserialize)]
struct PasteParts {
    source: ImageRgb8,
    mask: ImageGray8,
    region: Option<Rect>,
}

impl TryFrom<PasteParts> for Paste {
    type Error = String;

    fn try_from(parts: PasteParts) -> std::result::Result<Self, String> {
        let PasteParts {
            source,
            mask,
            region,
        } = parts;
        let (width, height) = (source.width, source.height);
        if (mask.width, mask.height) != (width, height) {
            return Err(format!(
                "a canvas job's mask is {}x{} but its canvas {width}x{height}",
                mask.width, mask.height
            ));
        }
        if let Some(r) = region
            && !(r.x1 < r.x2 && r.x2 <= width && r.y1 < r.y2 && r.y2 <= height)
        {
            return Err(format!(
                "a canvas job's \"only masked\" box ({}, {})-({}, {}) is not inside its \
                 {width}x{height} canvas",
                r.x1, r.y1, r.x2, r.y2
            ));
        }
        Ok(Paste {
            source,
            mask,
            region,
        })
    }
}

/// Prepares `source` and `mask` (same size: the canvas) for a generation of `size`.
pub fn prepare(
    source: &ImageRgb8,
    mask: &ImageGray8,
    size: (u32, u32),
    options: &InpaintOptions,
) -> Result<Prepared> {
    if (source.width, source.height) != (mask.width, mask.height) {
        return Err(Error::settings(format!(
            "the mask is {}x{} but the image is {}x{}; they must be the same size",
            mask.width, mask.height, source.width, source.height
        )));
    }
    let (source, mask) = match options.area {
        // The whole picture is generated at the generation size, so the canvas is too.
        InpaintArea::Whole if (source.width, source.height) != size => {
            (resize(source, size), paint::resize_mask(mask, size))
        }
        _ => (source.clone(), mask.clone()),
    };
    let blurred = blur_mask(&mask, options.mask_blur);
    let (mut init, init_mask, region) = match options.area {
        InpaintArea::Whole => (source.clone(), blurred.clone(), None),
        InpaintArea::OnlyMasked { padding } => {
            let region = crop_region(&blurred, padding, size).ok_or_else(|| {
                Error::settings("the mask is empty: paint the area to inpaint first")
            })?;
            let init = resize(&crop(&source, region), size);
            let init_mask = paint::resize_mask(&paint::crop_mask(&blurred, region), size);
            (init, init_mask, Some(region))
        }
    };
    if options.masked_content == MaskedContent::Fill {
        init = fill_masked(&init, &init_mask);
    }
    Ok(Prepared {
        init,
        mask: init_mask,
        paste: Paste {
            source,
            mask: blurred,
            region,
        },
    })
}

/// Puts a generated image back onto the source: resized into the "only masked" box, then
/// (with `composite_on`) over the source through the blurred mask, so unmasked pixels stay
/// exactly as they were. Without it: the raw generation (pasted as a rectangle for "only
/// masked").
pub fn finish(generated: &ImageRgb8, paste: &Paste, composite_on: bool) -> ImageRgb8 {
    let canvas = (paste.source.width, paste.source.height);
    let placed = match paste.region {
        None if (generated.width, generated.height) == canvas => generated.clone(),
        // A whole picture generated at another size by "Just resize" (or, from a damaged
        // kept queue, a request and canvas job that disagree): the image covers the canvas.
        None => resize(generated, canvas),
        Some(region) => {
            let patch = resize(generated, (region.width(), region.height()));
            paint::paste(&paste.source, &patch, region)
        }
    };
    if composite_on {
        composite(&paste.source, &placed, &paste.mask)
    } else {
        placed
    }
}

#[cfg(test)]
mod tests;
