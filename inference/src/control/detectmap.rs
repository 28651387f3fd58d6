//! A control map fitted to the generation size as A1111's ControlNet extension fits it
//! (`detectmap_proc`): "Just Resize" stretches, "Crop and Resize" covers and crops the
//! centre, "Resize and Fill" fits inside on the median colour of the map's border. Its
//! `high_quality_resize` keeps maps of few colours flat (nearest), and black-and-white maps
//! black and white: averaged, Otsu-thresholded and, for one-pixel edges, thinned again.

use crate::canvas::FitMode;
use crate::imaging::ImageRgb8;

use super::morphology::{Gray, binary_post};
use super::resize::{Interpolation, resize};

/// The size a map of `(old_w, old_h)` is resized to before `mode` crops or pads it to
/// `(w, h)`.
pub fn scaled_size((old_w, old_h): (u32, u32), mode: FitMode, (w, h): (u32, u32)) -> (u32, u32) {
    if mode == FitMode::Resize {
        return (w, h);
    }
    let (old_w, old_h) = (f64::from(old_w), f64::from(old_h));
    let (k0, k1) = (f64::from(h) / old_h, f64::from(w) / old_w);
    let k = if mode == FitMode::Fill {
        k0.min(k1)
    } else {
        k0.max(k1)
    };
    (
        ((old_w * k).round_ties_even() as u32).max(1),
        ((old_h * k).round_ties_even() as u32).max(1),
    )
}

/// `map` at `(w, h)` by `mode`.
pub fn fit(map: &ImageRgb8, mode: FitMode, (w, h): (u32, u32)) -> ImageRgb8 {
    if mode == FitMode::Resize {
        return high_quality_resize(map, (w, h));
    }
    let size = scaled_size((map.width, map.height), mode, (w, h));
    let border = (mode == FitMode::Fill).then(|| median_border(map));
    let scaled = high_quality_resize(map, size);
    let mut out = Vec::with_capacity((w * h * 3) as usize);
    let (sw, sh) = (scaled.width as i64, scaled.height as i64);
    // Fill: the scaled map's corner inside; crop: the output's corner inside the scaled map.
    let (dx, dy) = match border {
        Some(_) => (
            (i64::from(w) - sw).max(0) / 2,
            (i64::from(h) - sh).max(0) / 2,
        ),
        None => (
            -((sw - i64::from(w)).max(0) / 2),
            -((sh - i64::from(h)).max(0) / 2),
        ),
    };
    for y in 0..i64::from(h) {
        for x in 0..i64::from(w) {
            let (sx, sy) = (x - dx, y - dy);
            if (0..sw).contains(&sx) && (0..sh).contains(&sy) {
                let i = ((sy * sw + sx) * 3) as usize;
                out.extend_from_slice(&scaled.pixels[i..i + 3]);
            } else {
                out.extend_from_slice(&border.unwrap_or([0; 3]));
            }
        }
    }
    ImageRgb8 {
        width: w,
        height: h,
        pixels: out,
    }
}

/// Per channel, the median of the first and last rows and columns (numpy's median: the
/// mean of the two middle values for an even count, made 8-bit by truncation).
fn median_border(map: &ImageRgb8) -> [u8; 3] {
    let (w, h) = (map.width as usize, map.height as usize);
    let at = |x: usize, y: usize| &map.pixels[(y * w + x) * 3..(y * w + x) * 3 + 3];
    let mut border: Vec<&[u8]> = Vec::with_capacity(2 * (w + h));
    border.extend((0..w).map(|x| at(x, 0)));
    border.extend((0..w).map(|x| at(x, h - 1)));
    border.extend((0..h).map(|y| at(0, y)));
    border.extend((0..h).map(|y| at(w - 1, y)));
    [0, 1, 2].map(|c| {
        let mut values: Vec<u8> = border.iter().map(|p| p[c]).collect();
        values.sort_unstable();
        let n = values.len();
        if n % 2 == 1 {
            values[n / 2]
        } else {
            ((f64::from(values[n / 2 - 1]) + f64::from(values[n / 2])) / 2.0) as u8
        }
    })
}

/// The extension's `high_quality_resize` of a 3-channel map.
pub fn high_quality_resize(map: &ImageRgb8, size: (u32, u32)) -> ImageRgb8 {
    if (map.width, map.height) == size {
        return map.clone();
    }
    let old = u64::from(map.width) * u64::from(map.height);
    let new = u64::from(size.0) * u64::from(size.1);
    let colours = count_colours(map, 200);
    let binary = colours == 2
        && map.pixels.iter().min().is_some_and(|&v| v < 16)
        && map.pixels.iter().max().is_some_and(|&v| v > 240);
    let how = if (3..200).contains(&colours) {
        Interpolation::Nearest
    } else if new < old {
        Interpolation::Area
    } else {
        Interpolation::Cubic
    };
    let resized = resize(map, size, how);
    if !binary {
        return resized;
    }
    let one_pixel_edges = super::morphology::is_one_pixel_edge(map);
    // `np.mean(y.astype(float32), axis=2).astype(uint8)`: float32 mean, truncated.
    let mean = Gray {
        width: size.0 as usize,
        height: size.1 as usize,
        pixels: resized
            .pixels
            .chunks_exact(3)
            .map(|p| {
                let sum = f32::from(p[0]) + f32::from(p[1]) + f32::from(p[2]);
                (sum / 3.0).clamp(0.0, 255.0) as u8
            })
            .collect(),
    };
    let out = binary_post(mean, one_pixel_edges, new > old);
    super::preprocess::gray_to_rgb(&out.pixels, size.0, size.1)
}

/// The number of distinct RGB colours in `map`, counting no further than `limit`.
fn count_colours(map: &ImageRgb8, limit: usize) -> usize {
    let mut seen = std::collections::HashSet::new();
    for p in map.pixels.chunks_exact(3) {
        seen.insert([p[0], p[1], p[2]]);
        if seen.len() >= limit {
            break;
        }
    }
    seen.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(width: u32, height: u32, f: impl Fn(u32, u32) -> [u8; 3]) -> ImageRgb8 {
        let pixels = (0..height)
            .flat_map(|y| (0..width).map(move |x| (x, y)))
            .flat_map(|(x, y)| f(x, y))
            .collect();
        ImageRgb8 {
            width,
            height,
            pixels,
        }
    }

    #[test]
    fn crop_and_resize_keeps_the_centre() {
        // 8x4 with a marker column at x = 3..5 (the centre) -> 4x4: scale 1, crop 2 each side.
        let map = image(8, 4, |x, _| {
            if (3..5).contains(&x) {
                [9, 9, 9]
            } else {
                [1, 2, 3]
            }
        });
        let out = fit(&map, FitMode::Crop, (4, 4));
        assert_eq!((out.width, out.height), (4, 4));
        let row: Vec<u8> = out.pixels[..12].chunks(3).map(|p| p[0]).collect();
        assert_eq!(row, vec![1, 9, 9, 1]);
    }

    #[test]
    fn resize_and_fill_pads_with_the_border_median() {
        // 4x2 -> 4x6: scale 1, two rows of fill above and below; the border's median is
        // the majority colour.
        let map = image(4, 2, |x, _| if x == 0 { [200, 0, 0] } else { [10, 20, 30] });
        let out = fit(&map, FitMode::Fill, (4, 6));
        assert_eq!(&out.pixels[..3], &[10, 20, 30], "fill colour");
        assert_eq!(
            &out.pixels[2 * 12..2 * 12 + 3],
            &[200, 0, 0],
            "the map starts at row 2"
        );
    }

    #[test]
    fn few_colour_maps_stay_flat_and_binary_maps_stay_binary() {
        let seg = image(9, 9, |x, y| [(x / 3 * 80) as u8, (y / 3 * 80) as u8, 7]);
        let out = high_quality_resize(&seg, (20, 20));
        assert!(
            count_colours(&out, 200) <= 9,
            "nearest keeps the segment colours"
        );
        let edges = image(32, 32, |x, y| if x == y { [255; 3] } else { [0; 3] });
        for size in [(64, 64), (20, 20)] {
            let out = high_quality_resize(&edges, size);
            assert!(out.pixels.iter().all(|&v| v == 0 || v == 255), "{size:?}");
            assert!(out.pixels.contains(&255), "{size:?}: the edge survives");
        }
    }
}
