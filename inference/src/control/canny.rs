//! The Canny edge map A1111's ControlNet extension makes (`cv2.Canny(img, low, high)` on the
//! RGB image: 3×3 Sobel with replicated borders, per pixel the channel of largest L1
//! gradient, non-maximum suppression with OpenCV's fixed-point 22.5° sectors, hysteresis
//! over 8 neighbours), reproduced exactly so a control map matches A1111's.

use crate::imaging::{ImageGray8, ImageRgb8};

/// OpenCV's `CANNY_SHIFT` and `tan(22.5°)` in that fixed point.
const SHIFT: u32 = 15;
const TG22: i64 = 13573;

/// Sobel derivatives of every channel, `[height, width, channels]` row-major, as OpenCV's
/// `Sobel(src, CV_16S, 1, 0 / 0, 1, 3, BORDER_REPLICATE)` gives them.
pub fn sobel(image: &ImageRgb8) -> (Vec<i16>, Vec<i16>) {
    let (w, h) = (image.width as usize, image.height as usize);
    let at = |x: isize, y: isize, c: usize| -> i32 {
        let x = x.clamp(0, w as isize - 1) as usize;
        let y = y.clamp(0, h as isize - 1) as usize;
        i32::from(image.pixels[(y * w + x) * 3 + c])
    };
    let mut dx = vec![0i16; w * h * 3];
    let mut dy = vec![0i16; w * h * 3];
    for y in 0..h as isize {
        for x in 0..w as isize {
            for c in 0..3 {
                let p = |ox: isize, oy: isize| at(x + ox, y + oy, c);
                let gx = p(1, -1) + 2 * p(1, 0) + p(1, 1) - p(-1, -1) - 2 * p(-1, 0) - p(-1, 1);
                let gy = p(-1, 1) + 2 * p(0, 1) + p(1, 1) - p(-1, -1) - 2 * p(0, -1) - p(1, -1);
                let i = (y as usize * w + x as usize) * 3 + c;
                dx[i] = gx as i16;
                dy[i] = gy as i16;
            }
        }
    }
    (dx, dy)
}

/// OpenCV's `Canny(image, low, high)` (aperture 3, L1 gradient): 255 on edges, 0 elsewhere.
pub fn canny(image: &ImageRgb8, low: f64, high: f64) -> ImageGray8 {
    let (w, h) = (image.width as usize, image.height as usize);
    let (low, high) = if low > high { (high, low) } else { (low, high) };
    let (low, high) = (low.floor() as i32, high.floor() as i32);
    let (sx, sy) = sobel(image);
    // Per pixel, the channel with the largest |dx| + |dy| (the first on ties).
    let mut gx = vec![0i32; w * h];
    let mut gy = vec![0i32; w * h];
    // Magnitudes with a zero border all round: (h + 2) x (w + 2).
    let stride = w + 2;
    let mut mag = vec![0i32; (h + 2) * stride];
    for i in 0..w * h {
        let norm = |c: usize| i32::from(sx[i * 3 + c]).abs() + i32::from(sy[i * 3 + c]).abs();
        let best = (1..3).fold(0, |b, c| if norm(c) > norm(b) { c } else { b });
        gx[i] = i32::from(sx[i * 3 + best]);
        gy[i] = i32::from(sy[i * 3 + best]);
        mag[(i / w + 1) * stride + i % w + 1] = norm(best);
    }
    // 0: weak candidate, 1: not an edge, 2: edge.
    let mut map = vec![1u8; (h + 2) * stride];
    let mut stack = Vec::new();
    for y in 0..h {
        let mut prev_flag = false;
        for x in 0..w {
            let k = (y + 1) * stride + x + 1;
            let m = mag[k];
            let candidate = m > low && {
                let (xs, ys) = (i64::from(gx[y * w + x]), i64::from(gy[y * w + x]));
                let ax = xs.abs();
                let ay = ys.abs() << SHIFT;
                let tg22x = ax * TG22;
                if ay < tg22x {
                    m > mag[k - 1] && m >= mag[k + 1]
                } else {
                    let tg67x = tg22x + (ax << (SHIFT + 1));
                    if ay > tg67x {
                        m > mag[k - stride] && m >= mag[k + stride]
                    } else {
                        let s: isize = if (xs ^ ys) < 0 { -1 } else { 1 };
                        let up = (k - stride) as isize - s;
                        let down = (k + stride) as isize + s;
                        m > mag[up as usize] && m > mag[down as usize]
                    }
                }
            };
            if !candidate {
                prev_flag = false;
                continue;
            }
            if !prev_flag && m > high && map[k - stride] != 2 {
                map[k] = 2;
                stack.push(k);
                prev_flag = true;
            } else {
                map[k] = 0;
            }
        }
    }
    // Hysteresis: weak candidates joined to an edge become edges.
    while let Some(k) = stack.pop() {
        for n in [
            k - stride - 1,
            k - stride,
            k - stride + 1,
            k - 1,
            k + 1,
            k + stride - 1,
            k + stride,
            k + stride + 1,
        ] {
            if map[n] == 0 {
                map[n] = 2;
                stack.push(n);
            }
        }
    }
    let pixels = (0..w * h)
        .map(|i| {
            if map[(i / w + 1) * stride + i % w + 1] == 2 {
                255
            } else {
                0
            }
        })
        .collect();
    ImageGray8 {
        width: image.width,
        height: image.height,
        pixels,
    }
}
