//! The binary-map steps of the extension's `high_quality_resize`, on OpenCV's rules:
//! the one-pixel-edge test (a 3×3 opening), `nake_nms` (directional dilations), Otsu's
//! threshold (`cv2.threshold(…, THRESH_OTSU)`) and `lvmin_thin` (hit-or-miss thinning with
//! its 8 kernels for 32 rounds, and 8 pruning kernels when the map grew).

use crate::imaging::ImageRgb8;

/// One 8-bit plane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gray {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
}

/// `erode` then `dilate` with a 3×3 square (OpenCV's borders: outside counts as 255 for the
/// erosion and 0 for the dilation), per channel; the map has one-pixel edges when more than
/// half of its bright values do not survive the opening.
pub fn is_one_pixel_edge(map: &ImageRgb8) -> bool {
    let (w, h) = (map.width as usize, map.height as usize);
    let window = |src: &[u8], x: usize, y: usize, c: usize, outside: u8, pick: fn(u8, u8) -> u8| {
        let mut v = None::<u8>;
        for dy in -1isize..=1 {
            for dx in -1isize..=1 {
                let (sx, sy) = (x as isize + dx, y as isize + dy);
                let value = if sx < 0 || sy < 0 || sx >= w as isize || sy >= h as isize {
                    outside
                } else {
                    src[(sy as usize * w + sx as usize) * 3 + c]
                };
                v = Some(v.map_or(value, |v| pick(v, value)));
            }
        }
        v.unwrap_or(outside)
    };
    let mut eroded = vec![0u8; w * h * 3];
    for y in 0..h {
        for x in 0..w {
            for c in 0..3 {
                eroded[(y * w + x) * 3 + c] = window(&map.pixels, x, y, c, 255, u8::min);
            }
        }
    }
    let (mut thin, mut bright) = (0usize, 0usize);
    for y in 0..h {
        for x in 0..w {
            for c in 0..3 {
                let i = (y * w + x) * 3 + c;
                let opened = window(&eroded, x, y, c, 0, u8::max);
                thin += usize::from(opened < map.pixels[i]);
                bright += usize::from(map.pixels[i] > 127);
            }
        }
    }
    thin * 2 > bright
}

/// The resized, channel-averaged binary map made binary again.
pub fn binary_post(mean: Gray, one_pixel_edges: bool, grew: bool) -> Gray {
    if one_pixel_edges {
        let nms = nake_nms(&mean);
        lvmin_thin(otsu(&nms), grew)
    } else {
        otsu(&mean)
    }
}

/// `nake_nms`: a pixel keeps its value where it is the maximum of its horizontal,
/// vertical or either diagonal line of three; elsewhere 0.
fn nake_nms(x: &Gray) -> Gray {
    let (w, h) = (x.width as isize, x.height as isize);
    let at = |px: isize, py: isize| -> u8 {
        if px < 0 || py < 0 || px >= w || py >= h {
            0
        } else {
            x.pixels[(py * w + px) as usize]
        }
    };
    let lines = [
        [(-1, 0), (1, 0)],
        [(0, -1), (0, 1)],
        [(-1, -1), (1, 1)],
        [(1, -1), (-1, 1)],
    ];
    let mut y = vec![0u8; x.pixels.len()];
    for py in 0..h {
        for px in 0..w {
            let v = at(px, py);
            let peak = lines
                .iter()
                .any(|line| line.iter().all(|&(dx, dy)| at(px + dx, py + dy) <= v));
            if peak {
                y[(py * w + px) as usize] = v;
            }
        }
    }
    Gray {
        pixels: y,
        ..x.clone()
    }
}

/// OpenCV's Otsu threshold (`getThreshVal_Otsu_8u`), then 255 above it and 0 elsewhere.
pub fn otsu(x: &Gray) -> Gray {
    let mut hist = [0f64; 256];
    for &v in &x.pixels {
        hist[v as usize] += 1.0;
    }
    let scale = 1.0 / x.pixels.len().max(1) as f64;
    let mu: f64 = hist
        .iter()
        .enumerate()
        .map(|(i, h)| i as f64 * h)
        .sum::<f64>()
        * scale;
    let (mut q1, mut mu1, mut max_sigma, mut threshold) = (0f64, 0f64, 0f64, 0u8);
    let eps = f64::from(f32::EPSILON);
    for (i, h) in hist.iter().enumerate() {
        let p = h * scale;
        mu1 *= q1;
        q1 += p;
        let q2 = 1.0 - q1;
        if q1.min(q2) < eps || q1.max(q2) > 1.0 - eps {
            continue;
        }
        mu1 = (mu1 + i as f64 * p) / q1;
        let mu2 = (mu - q1 * mu1) / q2;
        let sigma = q1 * q2 * (mu1 - mu2) * (mu1 - mu2);
        if sigma > max_sigma {
            max_sigma = sigma;
            threshold = i as u8;
        }
    }
    Gray {
        pixels: x
            .pixels
            .iter()
            .map(|&v| if v > threshold { 255 } else { 0 })
            .collect(),
        ..x.clone()
    }
}

/// A hit-or-miss kernel: 1 must be set, -1 must be clear, 0 either.
type Kernel = [[i8; 3]; 3];

/// `np.rot90(k, r)`: `r` quarter turns counter-clockwise.
fn rot90(k: Kernel, r: usize) -> Kernel {
    let mut k = k;
    for _ in 0..r {
        let mut t = [[0; 3]; 3];
        for (i, row) in t.iter_mut().enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = k[j][2 - i];
            }
        }
        k = t;
    }
    k
}

/// The raw kernels in all four rotations, in the extension's order (rotation-major).
fn rotations(raw: [Kernel; 2]) -> Vec<Kernel> {
    (0..4)
        .flat_map(|r| raw.iter().map(move |&k| rot90(k, r)))
        .collect()
}

const THIN: [Kernel; 2] = [
    [[-1, -1, -1], [0, 1, 0], [1, 1, 1]],
    [[0, -1, -1], [1, 1, -1], [0, 1, 0]],
];
const PRUNE: [Kernel; 2] = [
    [[-1, -1, -1], [-1, 1, -1], [0, 0, -1]],
    [[-1, -1, -1], [-1, 1, -1], [-1, 0, 0]],
];

/// Clears every pixel where `k` matches (`MORPH_HITMISS`; outside the image matches
/// anything, as OpenCV's erosions see it); whether any did.
fn remove_pattern(x: &mut Gray, k: &Kernel) -> bool {
    let (w, h) = (x.width as isize, x.height as isize);
    let mut hits = Vec::new();
    for py in 0..h {
        for px in 0..w {
            let matches = (0..3).all(|ky| {
                (0..3).all(|kx| {
                    let (sx, sy) = (px + kx as isize - 1, py + ky as isize - 1);
                    if sx < 0 || sy < 0 || sx >= w || sy >= h {
                        return true;
                    }
                    let set = x.pixels[(sy * w + sx) as usize] != 0;
                    match k[ky][kx] {
                        1 => set,
                        -1 => !set,
                        _ => true,
                    }
                })
            });
            if matches {
                hits.push((py * w + px) as usize);
            }
        }
    }
    for &i in &hits {
        x.pixels[i] = 0;
    }
    !hits.is_empty()
}

/// One pass of every kernel in turn; whether nothing changed.
fn thin_once(x: &mut Gray, kernels: &[Kernel]) -> bool {
    let mut done = true;
    for k in kernels {
        if remove_pattern(x, k) {
            done = false;
        }
    }
    done
}

/// `lvmin_thin`.
fn lvmin_thin(mut x: Gray, prune: bool) -> Gray {
    let thin = rotations(THIN);
    for _ in 0..32 {
        if thin_once(&mut x, &thin) {
            break;
        }
    }
    if prune {
        thin_once(&mut x, &rotations(PRUNE));
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rot90_turns_counter_clockwise_like_numpy() {
        // np.rot90([[1,2,3],[4,5,6],[7,8,9]]) == [[3,6,9],[2,5,8],[1,4,7]]
        let k = [[1, 2, 3], [4, 5, 6], [7, 8, 9]];
        assert_eq!(rot90(k, 1), [[3, 6, 9], [2, 5, 8], [1, 4, 7]]);
        assert_eq!(rot90(k, 4), k);
    }

    #[test]
    fn otsu_splits_two_clusters() {
        let x = Gray {
            width: 6,
            height: 1,
            pixels: vec![10, 12, 11, 200, 210, 205],
        };
        assert_eq!(otsu(&x).pixels, vec![0, 0, 0, 255, 255, 255]);
    }

    #[test]
    fn thinning_reduces_a_thick_line_to_one_pixel() {
        let (w, h) = (12, 9);
        let pixels = (0..w * h)
            .map(|i| {
                if (3..6).contains(&(i / w)) && (1..11).contains(&(i % w)) {
                    255
                } else {
                    0
                }
            })
            .collect();
        let thin = lvmin_thin(
            Gray {
                width: w,
                height: h,
                pixels,
            },
            false,
        );
        for x in 3..9 {
            let set = (0..h).filter(|&y| thin.pixels[y * w + x] != 0).count();
            assert_eq!(set, 1, "column {x}");
        }
    }
}
