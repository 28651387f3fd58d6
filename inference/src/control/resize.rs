//! OpenCV's `cv2.resize` on 8-bit images as A1111's ControlNet extension calls it:
//! `INTER_AREA` when shrinking, `INTER_CUBIC` when enlarging, `INTER_NEAREST` for maps of
//! a few flat colours. Same sampling positions, same border rule (edge pixels repeat) and
//! arithmetic: area and nearest match OpenCV exactly; cubic uses OpenCV's 11-bit
//! fixed-point weights and rounds a few values one level apart from the wheel's (see
//! tests/reference/control_maps.rs for the measured figures).

use crate::imaging::ImageRgb8;

/// Which `cv2.resize` interpolation to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interpolation {
    Nearest,
    Area,
    Cubic,
}

/// `img` resized to `(w, h)` by `how` (a copy at the same size, as OpenCV gives).
pub fn resize(img: &ImageRgb8, (w, h): (u32, u32), how: Interpolation) -> ImageRgb8 {
    assert!(w > 0 && h > 0, "resize to an empty image");
    if (img.width, img.height) == (w, h) {
        return img.clone();
    }
    match how {
        Interpolation::Nearest => nearest(img, (w, h)),
        // OpenCV's area algorithm applies when both sides shrink; otherwise INTER_AREA is
        // its bilinear with area-style weights, which for these maps cubic approximates
        // closely. A1111 only asks for area when the pixel count shrinks.
        Interpolation::Area if w <= img.width && h <= img.height => area(img, (w, h)),
        Interpolation::Area | Interpolation::Cubic => cubic(img, (w, h)),
    }
}

/// `INTER_NEAREST`: source index `floor(dst * src / dst_size)`.
fn nearest(img: &ImageRgb8, (w, h): (u32, u32)) -> ImageRgb8 {
    let (sw, sh) = (img.width as usize, img.height as usize);
    let sx = |x: usize| ((x as f64 * sw as f64 / f64::from(w)).floor() as usize).min(sw - 1);
    let sy = |y: usize| ((y as f64 * sh as f64 / f64::from(h)).floor() as usize).min(sh - 1);
    let mut pixels = Vec::with_capacity(w as usize * h as usize * 3);
    for y in 0..h as usize {
        let row = sy(y) * sw;
        for x in 0..w as usize {
            let i = (row + sx(x)) * 3;
            pixels.extend_from_slice(&img.pixels[i..i + 3]);
        }
    }
    ImageRgb8 {
        width: w,
        height: h,
        pixels,
    }
}

/// One output index's source taps and weights.
type Taps = Vec<(usize, f32)>;

/// The source pixels each output pixel of a shrinking axis covers, weighted by overlap, as
/// `cv::computeResizeAreaTab` computes them (in f64, stored as f32).
fn area_taps(src: usize, dst: usize) -> Vec<Taps> {
    let scale = src as f64 / dst as f64;
    (0..dst)
        .map(|d| {
            let (f1, f2) = (d as f64 * scale, (d as f64 + 1.0) * scale);
            let (mut s1, s2) = (f1.ceil() as usize, (f2.floor() as usize).min(src));
            let cell = scale.min(src as f64 - f1);
            let mut taps = Vec::new();
            if s1 as f64 - f1 > 1e-3 {
                taps.push((s1 - 1, ((s1 as f64 - f1) / cell) as f32));
            }
            while s1 < s2 {
                taps.push((s1, (1.0 / cell) as f32));
                s1 += 1;
            }
            if f2 - s2 as f64 > 1e-3 && s2 < src {
                let part = (f2 - s2 as f64).min(1.0).min(cell);
                taps.push((s2, (part / cell) as f32));
            }
            taps
        })
        .collect()
}

/// `INTER_AREA` for shrinking: per source row a float32 weighted row sum, the rows then
/// summed by their weights in float32 and rounded to nearest even (OpenCV's order, which
/// decides ties the maps' later equality tests see).
fn area(img: &ImageRgb8, (w, h): (u32, u32)) -> ImageRgb8 {
    let (sw, sh) = (img.width as usize, img.height as usize);
    if sw.is_multiple_of(w as usize) && sh.is_multiple_of(h as usize) {
        return area_whole(img, (w, h));
    }
    let (xt, yt) = (area_taps(sw, w as usize), area_taps(sh, h as usize));
    let mut pixels = Vec::with_capacity(w as usize * h as usize * 3);
    let mut buf = vec![0f32; w as usize * 3];
    let mut sum = vec![0f32; w as usize * 3];
    for ys in &yt {
        sum.fill(0.0);
        for &(sy, beta) in ys {
            buf.fill(0.0);
            for (dx, xs) in xt.iter().enumerate() {
                for &(sx, alpha) in xs {
                    let i = (sy * sw + sx) * 3;
                    for c in 0..3 {
                        buf[dx * 3 + c] += f32::from(img.pixels[i + c]) * alpha;
                    }
                }
            }
            for (s, b) in sum.iter_mut().zip(&buf) {
                *s += beta * b;
            }
        }
        pixels.extend(
            sum.iter()
                .map(|v| v.round_ties_even().clamp(0.0, 255.0) as u8),
        );
    }
    ImageRgb8 {
        width: w,
        height: h,
        pixels,
    }
}

/// OpenCV's `resizeAreaFast` for whole-number factors: the block's integer sum, made 8-bit
/// as `(sum + 2) >> 2` for 2×2 blocks (its vector path) and `round(sum * (1 / area))` in f32
/// for other sizes.
fn area_whole(img: &ImageRgb8, (w, h): (u32, u32)) -> ImageRgb8 {
    let (sw, w, h) = (img.width as usize, w as usize, h as usize);
    let (kx, ky) = (sw / w, img.height as usize / h);
    let scale = 1.0 / (kx * ky) as f32;
    let mut pixels = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            for c in 0..3 {
                let mut sum = 0u32;
                for by in 0..ky {
                    for bx in 0..kx {
                        sum += u32::from(img.pixels[((y * ky + by) * sw + x * kx + bx) * 3 + c]);
                    }
                }
                pixels.push(if (kx, ky) == (2, 2) {
                    ((sum + 2) >> 2) as u8
                } else {
                    (sum as f32 * scale).round_ties_even().clamp(0.0, 255.0) as u8
                });
            }
        }
    }
    ImageRgb8 {
        width: w as u32,
        height: h as u32,
        pixels,
    }
}

/// OpenCV's `INTER_RESIZE_COEF_BITS`.
const COEF_BITS: u32 = 11;

/// `cv::interpolateCubic` (A = -0.75) at fraction `x`, as 11-bit fixed-point weights whose
/// sum is exactly 2048 (OpenCV moves any rounding surplus onto the largest weight).
fn cubic_weights(x: f32) -> [i32; 4] {
    const A: f32 = -0.75;
    let c0 = ((A * (x + 1.0) - 5.0 * A) * (x + 1.0) + 8.0 * A) * (x + 1.0) - 4.0 * A;
    let c1 = ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let c2 = ((A + 2.0) * (1.0 - x) - (A + 3.0)) * (1.0 - x) * (1.0 - x) + 1.0;
    let c3 = 1.0 - c0 - c1 - c2;
    let scale = (1 << COEF_BITS) as f32;
    let mut fixed = [c0, c1, c2, c3].map(|c| (c * scale).round_ties_even() as i32);
    let surplus = (1 << COEF_BITS) - fixed.iter().sum::<i32>();
    if surplus != 0 {
        let (largest, _) = fixed
            .iter()
            .enumerate()
            .fold((0, i32::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b });
        fixed[largest] += surplus;
    }
    fixed
}

/// Per output index: the first of 4 source taps and their fixed-point weights.
fn cubic_taps(src: usize, dst: usize) -> Vec<(isize, [i32; 4])> {
    let scale = src as f64 / dst as f64;
    (0..dst)
        .map(|d| {
            let f = ((d as f64 + 0.5) * scale - 0.5) as f32;
            let s = f.floor();
            (s as isize - 1, cubic_weights(f - s))
        })
        .collect()
}

/// `INTER_CUBIC` on 8-bit pixels: a horizontal pass to integer sums, a vertical pass, then
/// `(v + 2^21) >> 22` saturated, as OpenCV's fixed-point path computes it.
fn cubic(img: &ImageRgb8, (w, h): (u32, u32)) -> ImageRgb8 {
    let (sw, sh) = (img.width as usize, img.height as usize);
    let (w, h) = (w as usize, h as usize);
    let xt = cubic_taps(sw, w);
    let clamp = |i: isize, n: usize| i.clamp(0, n as isize - 1) as usize;
    // Horizontal pass over every source row.
    let mut rows = vec![0i32; sh * w * 3];
    for y in 0..sh {
        for (x, &(first, weights)) in xt.iter().enumerate() {
            for c in 0..3 {
                rows[(y * w + x) * 3 + c] = (0..4)
                    .map(|k| {
                        let sx = clamp(first + k as isize, sw);
                        i32::from(img.pixels[(y * sw + sx) * 3 + c]) * weights[k]
                    })
                    .sum();
            }
        }
    }
    let mut pixels = vec![0u8; w * h * 3];
    for (y, (first, weights)) in cubic_taps(sh, h).into_iter().enumerate() {
        for i in 0..w * 3 {
            let v: i64 = (0..4)
                .map(|k| {
                    let sy = clamp(first + k as isize, sh);
                    i64::from(rows[sy * w * 3 + i]) * i64::from(weights[k])
                })
                .sum();
            let shift = 2 * COEF_BITS;
            pixels[y * w * 3 + i] = ((v + (1 << (shift - 1))) >> shift).clamp(0, 255) as u8;
        }
    }
    ImageRgb8 {
        width: w as u32,
        height: h as u32,
        pixels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gray(width: u32, height: u32, f: impl Fn(u32, u32) -> u8) -> ImageRgb8 {
        let pixels = (0..height)
            .flat_map(|y| (0..width).map(move |x| (x, y)))
            .flat_map(|(x, y)| [f(x, y); 3])
            .collect();
        ImageRgb8 {
            width,
            height,
            pixels,
        }
    }

    #[test]
    fn cubic_weights_sum_to_one_in_fixed_point() {
        for i in 0..64 {
            let w = cubic_weights(i as f32 / 64.0);
            assert_eq!(w.iter().sum::<i32>(), 2048, "{i}");
        }
        // At a whole pixel the kernel is the identity.
        assert_eq!(cubic_weights(0.0), [0, 2048, 0, 0]);
    }

    #[test]
    fn flat_images_stay_flat_and_sizes_are_exact() {
        let flat = gray(13, 7, |_, _| 77);
        for how in [
            Interpolation::Nearest,
            Interpolation::Area,
            Interpolation::Cubic,
        ] {
            for size in [(5, 3), (26, 14), (13, 20), (1, 1)] {
                let out = resize(&flat, size, how);
                assert_eq!((out.width, out.height), size);
                assert!(out.pixels.iter().all(|&v| v == 77), "{how:?} {size:?}");
            }
        }
    }

    #[test]
    fn area_halving_averages_each_block() {
        // 4x2 -> 2x1: each output is the mean of a 2x2 block (ties round to even).
        let img = gray(4, 2, |x, y| {
            [[0, 10, 100, 101], [20, 30, 103, 104]][y as usize][x as usize]
        });
        let out = resize(&img, (2, 1), Interpolation::Area);
        assert_eq!(out.pixels, vec![15, 15, 15, 102, 102, 102]);
    }

    #[test]
    fn nearest_picks_floor_of_the_scaled_index() {
        let img = gray(3, 1, |x, _| x as u8 * 100);
        let out = resize(&img, (7, 1), Interpolation::Nearest);
        let row: Vec<u8> = out.pixels.chunks(3).map(|p| p[0]).collect();
        // floor(x * 3 / 7): 0 0 0 1 1 2 2
        assert_eq!(row, vec![0, 0, 0, 100, 100, 200, 200]);
    }
}
