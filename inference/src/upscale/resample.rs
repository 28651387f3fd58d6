//! Resampling without a network: Lanczos for images (A1111's `Lanczos` upscaler is PIL's
//! `resize(LANCZOS)`), and torch's `interpolate` modes for latents, which A1111's latent hires
//! fix upscalers use (`Latent`, `Latent (antialiased)`, `Latent (bicubic)`, …), computed the
//! way torch's CPU kernels compute them (`UpSample.h`, `UpSampleKernel.cpp`), in float32.

use image::imageops::FilterType;

use crate::error::{Error, Result};
use crate::imaging::ImageRgb8;

/// An image resized with a Lanczos-3 filter (an unchanged copy at the same size).
pub fn lanczos(img: &ImageRgb8, (w, h): (u32, u32)) -> ImageRgb8 {
    if (w, h) == (img.width, img.height) {
        return img.clone();
    }
    let buffer = image::RgbImage::from_raw(img.width, img.height, img.pixels.clone())
        .expect("an ImageRgb8 holds width * height * 3 bytes");
    let resized = image::imageops::resize(&buffer, w, h, FilterType::Lanczos3);
    ImageRgb8 {
        width: w,
        height: h,
        pixels: resized.into_raw(),
    }
}

/// An image resized by nearest neighbour (A1111's `Nearest` upscaler).
pub fn nearest(img: &ImageRgb8, (w, h): (u32, u32)) -> ImageRgb8 {
    if (w, h) == (img.width, img.height) {
        return img.clone();
    }
    let buffer = image::RgbImage::from_raw(img.width, img.height, img.pixels.clone())
        .expect("an ImageRgb8 holds width * height * 3 bytes");
    let resized = image::imageops::resize(&buffer, w, h, FilterType::Nearest);
    ImageRgb8 {
        width: w,
        height: h,
        pixels: resized.into_raw(),
    }
}

/// torch `interpolate` modes (`align_corners=False`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum InterpolateMode {
    Nearest,
    NearestExact,
    Bilinear,
    Bicubic,
    /// `bilinear` with `antialias=True` (a triangle filter widened when shrinking).
    BilinearAntialias,
    /// `bicubic` with `antialias=True` (PIL's cubic, `a = -0.5`, widened when shrinking).
    BicubicAntialias,
}

/// Each output position's `(input index, weight)` taps along one axis, in torch's order.
type Taps = Vec<Vec<(usize, f32)>>;

/// torch's `area_pixel_compute_scale` without a scale factor: `input / output` in float32.
fn scale_of(input: usize, output: usize) -> f32 {
    input as f32 / output as f32
}

/// torch's bicubic convolution coefficients (`A = -0.75`) for fraction `t`.
fn cubic_coefficients(t: f32) -> [f32; 4] {
    const A: f32 = -0.75;
    let near = |x: f32| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let far = |x: f32| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// The antialiasing filters of torch's `_upsample_*_aa` (PIL's): triangle and cubic `a = -0.5`.
fn aa_filter(x: f32, cubic: bool) -> f32 {
    let x = x.abs();
    if !cubic {
        return if x < 1.0 { 1.0 - x } else { 0.0 };
    }
    const A: f32 = -0.5;
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// The taps of output position `i` (of `output`) over `input` positions.
fn taps_at(mode: InterpolateMode, i: usize, input: usize, output: usize) -> Vec<(usize, f32)> {
    let scale = scale_of(input, output);
    let last = input - 1;
    match mode {
        InterpolateMode::Nearest => {
            // torch's `nearest_idx` special-cases equal and doubled sizes.
            let src = if output == input {
                i
            } else if output == 2 * input {
                i >> 1
            } else {
                ((i as f32 * scale).floor() as usize).min(last)
            };
            vec![(src, 1.0)]
        }
        InterpolateMode::NearestExact => {
            // torch: `floorf((i + 0.5) * scale)`: the product in double, rounded to float
            // before the floor (which moves some sources by one, e.g. 64 -> 100, i = 87).
            let src = (((i as f64 + 0.5) * f64::from(scale)) as f32).floor() as usize;
            vec![(src.min(last), 1.0)]
        }
        InterpolateMode::Bilinear => {
            let src = (scale * (i as f32 + 0.5) - 0.5).max(0.0);
            let i0 = src as usize;
            let lambda = (src - i0 as f32).clamp(0.0, 1.0);
            // At the last input torch reads it twice (offset 0) with both weights.
            vec![(i0, 1.0 - lambda), ((i0 + 1).min(last), lambda)]
        }
        InterpolateMode::Bicubic => {
            let src = scale * (i as f32 + 0.5) - 0.5;
            let floor = src.floor();
            let t = (src - floor).clamp(0.0, 1.0);
            cubic_coefficients(t)
                .into_iter()
                .enumerate()
                .map(|(k, w)| {
                    let index = (floor as i64 - 1 + k as i64).clamp(0, last as i64);
                    (index as usize, w)
                })
                .collect()
        }
        InterpolateMode::BilinearAntialias | InterpolateMode::BicubicAntialias => {
            let cubic = mode == InterpolateMode::BicubicAntialias;
            let interp_size: f32 = if cubic { 4.0 } else { 2.0 };
            let (support, inv_scale) = if scale >= 1.0 {
                (interp_size * 0.5 * scale, 1.0 / scale)
            } else {
                (interp_size * 0.5, 1.0)
            };
            // torch: `scalar_t center = scale * (i + 0.5)` evaluates in double.
            let center = (f64::from(scale) * (i as f64 + 0.5)) as f32;
            let xmin = ((f64::from(center - support) + 0.5) as i64).max(0) as usize;
            let xmax = ((f64::from(center + support) + 0.5) as i64).min(input as i64) as usize;
            let mut taps: Vec<(usize, f32)> = (xmin..xmax)
                .map(|j| {
                    let x = (f64::from(j as f32 - center) + 0.5) * f64::from(inv_scale);
                    (j, aa_filter(x as f32, cubic))
                })
                .collect();
            let total: f32 = taps.iter().map(|(_, w)| w).sum();
            if total != 0.0 {
                taps.iter_mut().for_each(|(_, w)| *w /= total);
            }
            taps
        }
    }
}

fn taps(mode: InterpolateMode, input: usize, output: usize) -> Taps {
    (0..output)
        .map(|i| taps_at(mode, i, input, output))
        .collect()
}

/// Resamples the middle axis of `data`, seen as `[outer, n, inner]`, to `taps.len()`.
fn resample_axis(data: &[f32], (outer, n, inner): (usize, usize, usize), taps: &Taps) -> Vec<f32> {
    let m = taps.len();
    let mut out = vec![0f32; outer * m * inner];
    for o in 0..outer {
        for (i, output_taps) in taps.iter().enumerate() {
            let dst = &mut out[(o * m + i) * inner..][..inner];
            for &(index, w) in output_taps {
                let src = &data[(o * n + index) * inner..][..inner];
                for (d, s) in dst.iter_mut().zip(src) {
                    *d += w * s;
                }
            }
        }
    }
    out
}

/// torch `interpolate(x, size=(h2, w2), mode, antialias)` on `[planes, h, w]` float32
/// data: the width first, then the height, as torch's separable CPU kernel does. (torch's
/// non-antialiased bilinear and bicubic mix both axes in one expression; the results agree
/// to float32 rounding.)
pub fn interpolate(
    data: &[f32],
    (planes, h, w): (usize, usize, usize),
    (h2, w2): (usize, usize),
    mode: InterpolateMode,
) -> Result<Vec<f32>> {
    if h == 0 || w == 0 || h2 == 0 || w2 == 0 || data.len() != planes * h * w {
        return Err(Error::settings(format!(
            "cannot resample {planes} planes of {w}x{h} ({} values) to {w2}x{h2}",
            data.len()
        )));
    }
    let wide = resample_axis(data, (planes * h, w, 1), &taps(mode, w, w2));
    Ok(resample_axis(&wide, (planes, h, w2), &taps(mode, h, h2)))
}

#[cfg(test)]
mod tests {
    //! Expected values worked out from torch's formulas (`UpSample.h`): `scale = in / out`,
    //! source position `scale * (i + 0.5) - 0.5`.
    use super::*;
    use InterpolateMode::*;

    fn row(values: &[f32], out: usize, mode: InterpolateMode) -> Vec<f32> {
        interpolate(values, (1, 1, values.len()), (1, out), mode).unwrap()
    }

    #[test]
    fn bilinear_upscaling_clamps_at_the_edges() {
        // 2 -> 4, scale 0.5: sources -0.25 (clamped to 0), 0.25, 0.75, 1.25 (index 1 read
        // twice, weights 0.75 + 0.25).
        assert_eq!(row(&[0.0, 1.0], 4, Bilinear), [0.0, 0.25, 0.75, 1.0]);
        // Upscaling, the antialiased triangle filter gives the same weights.
        assert_eq!(
            row(&[0.0, 1.0], 4, BilinearAntialias),
            [0.0, 0.25, 0.75, 1.0]
        );
    }

    #[test]
    fn bicubic_overshoots_with_a_minus_three_quarters() {
        // Output 0: source -0.25, floor -1, t = 0.75; coefficients (A = -0.75)
        // far(1.75) = -0.03515625, near(0.75) = 0.26171875, near(0.25) = 0.87890625,
        // far(1.25) = -0.10546875 on inputs -2, -1, 0, 1 clamped to 0, 0, 0, 1:
        // 0 * (…) + 1 * -0.10546875.
        // Output 1: source 0.25, t = 0.25, inputs -1, 0, 1, 2 -> 0, 0, 1, 1:
        // 1 * (0.26171875 - 0.03515625) = 0.2265625.
        let out = row(&[0.0, 1.0], 4, Bicubic);
        assert_eq!(out[0], -0.105_468_75);
        assert_eq!(out[1], 0.226_562_5);
        assert_eq!(f64::from(out[2]), 0.773_437_5);
        assert!((f64::from(out[3]) - 1.105_468_75).abs() < 1e-7);
    }

    #[test]
    fn antialiasing_widens_the_filter_when_shrinking() {
        // 4 -> 2, scale 2: plain bilinear samples source 0.5 -> 0.5.
        assert_eq!(row(&[0.0, 1.0, 2.0, 3.0], 2, Bilinear)[0], 0.5);
        // Antialiased: center 1.0, support 2, inputs 0..3 at (j - 1 + 0.5) / 2 = -0.25,
        // 0.25, 0.75 -> triangle weights 0.75, 0.75, 0.25 (sum 1.75):
        // (0 * 0.75 + 1 * 0.75 + 2 * 0.25) / 1.75 = 0.7142857.
        let aa = row(&[0.0, 1.0, 2.0, 3.0], 2, BilinearAntialias)[0];
        assert!((aa - 1.25 / 1.75).abs() < 1e-6, "{aa}");
    }

    #[test]
    fn nearest_and_nearest_exact_round_differently() {
        // 3 -> 2, scale 1.5: nearest floor(i * 1.5) = 0, 1; nearest-exact
        // floor((i + 0.5) * 1.5) = 0, 2.
        assert_eq!(row(&[10.0, 20.0, 30.0], 2, Nearest), [10.0, 20.0]);
        assert_eq!(row(&[10.0, 20.0, 30.0], 2, NearestExact), [10.0, 30.0]);
    }

    #[test]
    fn both_axes_are_resampled() {
        // [[0, 1], [2, 3]] doubled with nearest: every value repeated in a 2x2 block.
        let out = interpolate(&[0.0, 1.0, 2.0, 3.0], (1, 2, 2), (4, 4), Nearest).unwrap();
        assert_eq!(&out[..8], &[0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0]);
        assert_eq!(&out[8..], &[2.0, 2.0, 3.0, 3.0, 2.0, 2.0, 3.0, 3.0]);
        assert!(interpolate(&[0.0; 3], (1, 2, 2), (4, 4), Nearest).is_err());
    }
}
