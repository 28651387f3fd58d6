//! The extension's `scribble_xdog`: a difference of Gaussians (σ 0.5 and 5, OpenCV's
//! `GaussianBlur` on float pixels with reflected borders), its per-pixel minimum over the
//! channels made 8-bit, and a threshold, keeping the extension's 8-bit wrap-around.

use crate::imaging::ImageRgb8;

/// OpenCV's `getGaussianKernel(n, sigma)` for float images, `n` from `sigma` as
/// `GaussianBlur` picks it (`round(sigma * 8 + 1) | 1`).
fn kernel(sigma: f64) -> Vec<f32> {
    let n = ((sigma * 8.0 + 1.0).round() as usize) | 1;
    let mid = (n as f64 - 1.0) / 2.0;
    let raw: Vec<f64> = (0..n)
        .map(|i| (-(i as f64 - mid).powi(2) / (2.0 * sigma * sigma)).exp())
        .collect();
    let sum: f64 = raw.iter().sum();
    raw.iter().map(|v| (v / sum) as f32).collect()
}

/// OpenCV's `BORDER_REFLECT_101` index (`dcb|abcd|cba`).
fn reflect(i: isize, n: usize) -> usize {
    if n == 1 {
        return 0;
    }
    let period = 2 * (n as isize - 1);
    let i = i.rem_euclid(period);
    (if i >= n as isize { period - i } else { i }) as usize
}

/// A separable Gaussian blur of one float plane (`w` x `h`), rows first.
fn blur(plane: &[f32], (w, h): (usize, usize), sigma: f64) -> Vec<f32> {
    let k = kernel(sigma);
    let r = (k.len() / 2) as isize;
    let mut rows = vec![0f32; w * h];
    for y in 0..h {
        for x in 0..w {
            rows[y * w + x] = k
                .iter()
                .enumerate()
                .map(|(j, kv)| kv * plane[y * w + reflect(x as isize + j as isize - r, w)])
                .sum();
        }
    }
    let mut out = vec![0f32; w * h];
    for y in 0..h {
        for x in 0..w {
            out[y * w + x] = k
                .iter()
                .enumerate()
                .map(|(j, kv)| kv * rows[reflect(y as isize + j as isize - r, h) * w + x])
                .sum();
        }
    }
    out
}

/// The scribble map (one channel, 0 or 255) of `img` with XDoG threshold `threshold`.
pub fn scribble(img: &ImageRgb8, threshold: f32) -> Vec<u8> {
    let (w, h) = (img.width as usize, img.height as usize);
    let mut least = vec![f32::INFINITY; w * h];
    for c in 0..3 {
        let plane: Vec<f32> = img.pixels[c..]
            .iter()
            .step_by(3)
            .map(|&v| f32::from(v))
            .collect();
        let fine = blur(&plane, (w, h), 0.5);
        let coarse = blur(&plane, (w, h), 5.0);
        for (i, l) in least.iter_mut().enumerate() {
            *l = l.min(coarse[i] - fine[i]);
        }
    }
    least
        .iter()
        .map(|&d| {
            // `dog = (255 - min).clip(0, 255).astype(uint8)`, then `2 * (255 - dog)` in
            // uint8 arithmetic, which wraps: the extension's own behaviour, kept.
            let dog = (255.0 - d).clamp(0.0, 255.0) as u8;
            let doubled = (255 - dog).wrapping_mul(2);
            if f32::from(doubled) > threshold {
                255
            } else {
                0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_have_opencvs_sizes_and_sum_to_one() {
        assert_eq!(kernel(0.5).len(), 5);
        assert_eq!(kernel(5.0).len(), 41);
        let sum: f32 = kernel(5.0).iter().sum();
        assert!((sum - 1.0).abs() < 1e-6);
    }

    #[test]
    fn reflect_101_mirrors_without_repeating_the_edge() {
        let row: Vec<usize> = (-3..7).map(|i| reflect(i, 4)).collect();
        assert_eq!(row, vec![3, 2, 1, 0, 1, 2, 3, 2, 1, 0]);
    }

    #[test]
    fn a_dark_line_on_white_becomes_a_white_line() {
        let (w, h) = (40usize, 30usize);
        let pixels = (0..w * h)
            .flat_map(|i| [if i % w == 20 { 0 } else { 255 }; 3])
            .collect();
        let img = ImageRgb8 {
            width: w as u32,
            height: h as u32,
            pixels,
        };
        let map = scribble(&img, 32.0);
        assert_eq!(map[15 * w + 20], 255, "on the line");
        assert_eq!(map[15 * w + 5], 0, "far from it");
    }
}
