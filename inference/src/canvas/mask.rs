//! Mask operations: blur, inversion, and A1111's "only masked" crop region.

use image::GrayImage;

use crate::imaging::ImageGray8;

/// A pixel rectangle `[x1, x2) x [y1, y2)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rect {
    pub x1: u32,
    pub y1: u32,
    pub x2: u32,
    pub y2: u32,
}

impl Rect {
    pub fn width(&self) -> u32 {
        self.x2 - self.x1
    }

    pub fn height(&self) -> u32 {
        self.y2 - self.y1
    }
}

/// Gaussian blur with standard deviation `radius` pixels; 0 returns the mask unchanged.
pub fn blur_mask(mask: &ImageGray8, radius: u32) -> ImageGray8 {
    if radius == 0 {
        return mask.clone();
    }
    let img = GrayImage::from_raw(mask.width, mask.height, mask.pixels.clone())
        .expect("mask buffer matches its size");
    let blurred = image::imageops::blur(&img, radius as f32);
    ImageGray8 {
        width: mask.width,
        height: mask.height,
        pixels: blurred.into_raw(),
    }
}

/// White becomes black and black white.
pub fn invert(mask: &ImageGray8) -> ImageGray8 {
    ImageGray8 {
        width: mask.width,
        height: mask.height,
        pixels: mask.pixels.iter().map(|&v| 255 - v).collect(),
    }
}

/// The box of non-zero mask pixels, `None` for an empty mask (PIL `getbbox`).
fn bounding_box(mask: &ImageGray8) -> Option<Rect> {
    let w = mask.width as usize;
    let mut found: Option<Rect> = None;
    for (i, &v) in mask.pixels.iter().enumerate() {
        if v == 0 {
            continue;
        }
        let (x, y) = ((i % w) as u32, (i / w) as u32);
        found = Some(match found {
            None => Rect {
                x1: x,
                y1: y,
                x2: x + 1,
                y2: y + 1,
            },
            Some(r) => Rect {
                x1: r.x1.min(x),
                y1: r.y1.min(y),
                x2: r.x2.max(x + 1),
                y2: r.y2.max(y + 1),
            },
        });
    }
    found
}

/// A1111's "only masked" region: the mask's box grown by `padding` (clipped to the image),
/// then grown along one axis to the aspect ratio of `size`, shifted back inside the image
/// where it overflows (`get_crop_region_v2` + `expand_crop_region`). `None` for an empty
/// mask.
pub fn crop_region(mask: &ImageGray8, padding: u32, size: (u32, u32)) -> Option<Rect> {
    let b = bounding_box(mask)?;
    let (iw, ih) = (i64::from(mask.width), i64::from(mask.height));
    let p = i64::from(padding);
    let (mut x1, mut y1) = ((i64::from(b.x1) - p).max(0), (i64::from(b.y1) - p).max(0));
    let (mut x2, mut y2) = ((i64::from(b.x2) + p).min(iw), (i64::from(b.y2) + p).min(ih));
    let ratio_crop = (x2 - x1) as f64 / (y2 - y1) as f64;
    let ratio_target = f64::from(size.0) / f64::from(size.1);
    // Grow one axis about its centre, then slide it back inside [0, limit].
    let grow = |lo: &mut i64, hi: &mut i64, desired: f64, limit: i64| {
        let diff = (desired - (*hi - *lo) as f64) as i64;
        *lo -= diff / 2;
        *hi += diff - diff / 2;
        if *hi >= limit {
            let over = *hi - limit;
            *hi -= over;
            *lo -= over;
        }
        if *lo < 0 {
            *hi -= *lo;
            *lo = 0;
        }
        if *hi >= limit {
            *hi = limit;
        }
    };
    if ratio_crop > ratio_target {
        grow(&mut y1, &mut y2, (x2 - x1) as f64 / ratio_target, ih);
    } else {
        grow(&mut x1, &mut x2, (y2 - y1) as f64 * ratio_target, iw);
    }
    Some(Rect {
        x1: x1 as u32,
        y1: y1 as u32,
        x2: x2 as u32,
        y2: y2 as u32,
    })
}
