//! Pixel operations: composite, crop and paste, resizing and fitting, masked-content fill,
//! outpainting.

use image::imageops::{self, FilterType};
use image::{GrayImage, Rgb32FImage, RgbImage, Rgba32FImage};

use super::Rect;
use crate::imaging::{ImageGray8, ImageRgb8};

fn rgb(img: &ImageRgb8) -> RgbImage {
    RgbImage::from_raw(img.width, img.height, img.pixels.clone()).expect("buffer matches size")
}

fn from_rgb(img: RgbImage) -> ImageRgb8 {
    let (width, height) = img.dimensions();
    ImageRgb8 {
        width,
        height,
        pixels: img.into_raw(),
    }
}

fn gray(mask: &ImageGray8) -> GrayImage {
    GrayImage::from_raw(mask.width, mask.height, mask.pixels.clone()).expect("buffer matches size")
}

fn from_gray(img: GrayImage) -> ImageGray8 {
    let (width, height) = img.dimensions();
    ImageGray8 {
        width,
        height,
        pixels: img.into_raw(),
    }
}

/// `generated` over `original` through `mask` (255 = generated): pixels where the mask is
/// 0 are copied from `original` byte for byte, where it is 255 from `generated`, and
/// blended in between. All three have the same size.
pub fn composite(original: &ImageRgb8, generated: &ImageRgb8, mask: &ImageGray8) -> ImageRgb8 {
    let pixels = original
        .pixels
        .chunks_exact(3)
        .zip(generated.pixels.chunks_exact(3))
        .zip(&mask.pixels)
        .flat_map(|((o, g), &m)| {
            let blend = move |a: u8, b: u8| match m {
                0 => a,
                255 => b,
                _ => {
                    let w = f32::from(m) / 255.0;
                    (f32::from(a) + (f32::from(b) - f32::from(a)) * w).round() as u8
                }
            };
            [blend(o[0], g[0]), blend(o[1], g[1]), blend(o[2], g[2])]
        })
        .collect();
    ImageRgb8 {
        width: original.width,
        height: original.height,
        pixels,
    }
}

pub fn crop(img: &ImageRgb8, r: Rect) -> ImageRgb8 {
    from_rgb(imageops::crop_imm(&rgb(img), r.x1, r.y1, r.width(), r.height()).to_image())
}

pub(super) fn crop_mask(mask: &ImageGray8, r: Rect) -> ImageGray8 {
    from_gray(imageops::crop_imm(&gray(mask), r.x1, r.y1, r.width(), r.height()).to_image())
}

/// Lanczos resize (a no-op at the same size).
pub fn resize(img: &ImageRgb8, (w, h): (u32, u32)) -> ImageRgb8 {
    if (img.width, img.height) == (w, h) {
        return img.clone();
    }
    from_rgb(imageops::resize(&rgb(img), w, h, FilterType::Lanczos3))
}

pub(super) fn resize_mask(mask: &ImageGray8, (w, h): (u32, u32)) -> ImageGray8 {
    if (mask.width, mask.height) == (w, h) {
        return mask.clone();
    }
    from_gray(imageops::resize(&gray(mask), w, h, FilterType::Lanczos3))
}

/// A copy of `base` with `patch` at the region's corner.
pub(super) fn paste(base: &ImageRgb8, patch: &ImageRgb8, r: Rect) -> ImageRgb8 {
    let mut out = rgb(base);
    imageops::replace(&mut out, &rgb(patch), i64::from(r.x1), i64::from(r.y1));
    from_rgb(out)
}

/// How a source image of another size becomes the generation size (A1111's resize modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FitMode {
    /// "Just resize": stretch to the size.
    Resize,
    /// "Crop and resize": scale to cover, crop the overflow around the centre.
    Crop,
    /// "Resize and fill": scale to fit inside, fill the bars by stretching the edges.
    Fill,
}

impl FitMode {
    /// Every mode, in A1111's order.
    pub const ALL: [FitMode; 3] = [FitMode::Resize, FitMode::Crop, FitMode::Fill];

    /// `resize`, `crop` or `fill` (the settings file's and the CLI's names).
    pub fn name(self) -> &'static str {
        match self {
            FitMode::Resize => "resize",
            FitMode::Crop => "crop",
            FitMode::Fill => "fill",
        }
    }

    /// A1111's label.
    pub fn a1111_name(self) -> &'static str {
        match self {
            FitMode::Resize => "Just resize",
            FitMode::Crop => "Crop and resize",
            FitMode::Fill => "Resize and fill",
        }
    }

    /// The ControlNet extension's label (`Crop and Resize`).
    pub fn controlnet_name(self) -> &'static str {
        match self {
            FitMode::Resize => "Just Resize",
            FitMode::Crop => "Crop and Resize",
            FitMode::Fill => "Resize and Fill",
        }
    }

    /// The mode of an A1111 label, img2img's or the ControlNet extension's, any case.
    pub fn parse_a1111(label: &str) -> Option<Self> {
        let label = label.trim();
        Self::ALL
            .into_iter()
            .find(|m| m.a1111_name().eq_ignore_ascii_case(label))
    }

    /// The mode named `name` (see [`FitMode::name`]).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name.trim())
    }
}

/// `img` at exactly `size`, by `mode`.
pub fn fit(img: &ImageRgb8, size: (u32, u32), mode: FitMode) -> ImageRgb8 {
    let (w, h) = (f64::from(size.0), f64::from(size.1));
    let (iw, ih) = (f64::from(img.width), f64::from(img.height));
    match mode {
        FitMode::Resize => resize(img, size),
        FitMode::Crop => {
            let scale = (w / iw).max(h / ih);
            let (sw, sh) = ((iw * scale).round() as u32, (ih * scale).round() as u32);
            let scaled = resize(img, (sw.max(size.0), sh.max(size.1)));
            let x = (scaled.width - size.0) / 2;
            let y = (scaled.height - size.1) / 2;
            crop(
                &scaled,
                Rect {
                    x1: x,
                    y1: y,
                    x2: x + size.0,
                    y2: y + size.1,
                },
            )
        }
        FitMode::Fill => {
            let scale = (w / iw).min(h / ih);
            let (sw, sh) = (
                ((iw * scale).round() as u32).clamp(1, size.0),
                ((ih * scale).round() as u32).clamp(1, size.1),
            );
            let scaled = resize(img, (sw, sh));
            let (x, y) = ((size.0 - sw) / 2, (size.1 - sh) / 2);
            extend_edges(&scaled, size, (x, y))
        }
    }
}

/// A mask fitted like [`fit`] fits its image, so the two stay aligned.
pub fn fit_mask(mask: &ImageGray8, size: (u32, u32), mode: FitMode) -> ImageGray8 {
    let as_rgb = ImageRgb8 {
        width: mask.width,
        height: mask.height,
        pixels: mask.pixels.iter().flat_map(|&v| [v, v, v]).collect(),
    };
    let fitted = fit(&as_rgb, size, mode);
    ImageGray8 {
        width: fitted.width,
        height: fitted.height,
        pixels: fitted.pixels.chunks_exact(3).map(|p| p[0]).collect(),
    }
}

/// `img` placed at `offset` on a canvas of `size`, the rest filled by repeating the nearest
/// edge pixel.
pub(crate) fn extend_edges(img: &ImageRgb8, size: (u32, u32), offset: (u32, u32)) -> ImageRgb8 {
    let mut pixels = Vec::with_capacity((size.0 * size.1 * 3) as usize);
    for y in 0..size.1 {
        let sy = y.saturating_sub(offset.1).min(img.height - 1);
        for x in 0..size.0 {
            let sx = x.saturating_sub(offset.0).min(img.width - 1);
            let i = ((sy * img.width + sx) * 3) as usize;
            pixels.extend_from_slice(&img.pixels[i..i + 3]);
        }
    }
    ImageRgb8 {
        width: size.0,
        height: size.1,
        pixels,
    }
}

/// A1111's "fill" masked content: the masked area painted with the surrounding colours,
/// by compositing ever finer blurs of the unmasked image (premultiplied by its coverage).
pub fn fill_masked(img: &ImageRgb8, mask: &ImageGray8) -> ImageRgb8 {
    let (w, h) = (img.width, img.height);
    // Premultiplied RGBA in [0, 1] (the image crate clamps float pixels to that range):
    // alpha 1 where unmasked.
    let premultiplied = Rgba32FImage::from_fn(w, h, |x, y| {
        let i = (y * w + x) as usize;
        let a = 1.0 - f32::from(mask.pixels[i]) / 255.0;
        let p = &img.pixels[i * 3..i * 3 + 3];
        let channel = |v: u8| f32::from(v) / 255.0 * a;
        image::Rgba([channel(p[0]), channel(p[1]), channel(p[2]), a])
    });
    let mut out = Rgb32FImage::new(w, h);
    for (radius, repeats) in [
        (256.0, 1),
        (64.0, 1),
        (16.0, 2),
        (4.0, 4),
        (2.0, 2),
        (0.0, 1),
    ] {
        let blurred = if radius > 0.0 {
            imageops::fast_blur(&premultiplied, radius)
        } else {
            premultiplied.clone()
        };
        for _ in 0..repeats {
            for (o, b) in out.pixels_mut().zip(blurred.pixels()) {
                let a = b[3].clamp(0.0, 1.0);
                if a <= 0.0 {
                    continue;
                }
                // Alpha compositing of the un-premultiplied colour over what is there.
                for c in 0..3 {
                    o[c] = b[c] / b[3] * a + o[c] * (1.0 - a);
                }
            }
        }
    }
    let pixels = out
        .pixels()
        .flat_map(|p| p.0.map(|v| (v * 255.0).round().clamp(0.0, 255.0) as u8))
        .collect();
    ImageRgb8 {
        width: w,
        height: h,
        pixels,
    }
}

/// The sides [`outpaint`] really adds to an image of `size`: `ext` with each axis rounded
/// up to a multiple of 8.
pub fn outpaint_placement(size: (u32, u32), ext: Extension) -> Extension {
    let round = |size: u32, lo: u32, hi: u32| -> (u32, u32) {
        let extra = (size + lo + hi).next_multiple_of(8) - (size + lo + hi);
        match (lo, hi) {
            (_, h) if h > 0 => (lo, h + extra),
            (l, _) if l > 0 => (l + extra, hi),
            _ => (lo, hi + extra),
        }
    };
    let (left, right) = round(size.0, ext.left, ext.right);
    let (up, down) = round(size.1, ext.up, ext.down);
    Extension {
        left,
        right,
        up,
        down,
    }
}

/// How many pixels outpainting adds on each side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extension {
    pub left: u32,
    pub right: u32,
    pub up: u32,
    pub down: u32,
}

/// The canvas grown by `ext` (each axis rounded up to a multiple of 8, the extra going to
/// the right or bottom side being extended, else the left or top), the new area filled by
/// stretching the edges, and the mask of the new area (white).
pub fn outpaint(img: &ImageRgb8, ext: Extension) -> (ImageRgb8, ImageGray8) {
    let Extension {
        left,
        right,
        up,
        down,
    } = outpaint_placement((img.width, img.height), ext);
    let size = (img.width + left + right, img.height + up + down);
    let canvas = extend_edges(img, size, (left, up));
    let pixels = (0..size.1)
        .flat_map(|y| {
            (0..size.0).map(move |x| {
                let inside = x >= left && x < left + img.width && y >= up && y < up + img.height;
                if inside { 0 } else { 255 }
            })
        })
        .collect();
    let mask = ImageGray8 {
        width: size.0,
        height: size.1,
        pixels,
    };
    (canvas, mask)
}
