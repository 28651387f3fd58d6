//! The first noise of an image with A1111's seed extras (`modules/rng.py`,
//! `ImageRNG.first`): a variation seed's noise slerped in, and noise drawn at the "resize
//! seed from" size pasted into the middle of the generation's.

use super::ImageGenerator;
use crate::api::NoiseOptions;

/// The per-image shape `[channels, height, width]` of latent noise.
pub type NoiseShape = [usize; 3];

/// Image `index`'s first noise of `shape`, drawn from `generator` (seeded with `seed`) as
/// A1111 draws it with `options`; `factor` is the VAE's pixels per latent cell.
pub fn draw(
    generator: &mut ImageGenerator,
    (seed, index): (u64, usize),
    shape: NoiseShape,
    options: &NoiseOptions,
    factor: usize,
) -> Vec<f32> {
    let [c, h, w] = shape;
    let noise_shape = match options.resize_from {
        Some((rw, rh)) => [c, rh as usize / factor, rw as usize / factor],
        None => shape,
    };
    let numel = |s: NoiseShape| s.iter().product::<usize>();
    let resized = noise_shape != shape;
    // A1111 draws the resized noise and the variation's from fresh generators, and the
    // image's own generator only for noise of the generation's shape.
    let fresh = |seed| ImageGenerator::new(options.rng, seed);
    let mut noise = if resized {
        fresh(seed).randn(numel(noise_shape))
    } else {
        generator.randn(numel(shape))
    };
    if let Some(variation) = options.active_variation() {
        let sub_seed = variation.seed.wrapping_add(index as u64);
        let sub_noise = fresh(sub_seed).randn(numel(noise_shape));
        noise = slerp(variation.strength, &noise, &sub_noise, noise_shape);
    }
    if !resized {
        return noise;
    }
    let mut full = generator.randn(numel(shape));
    paste_centred(&noise, noise_shape, &mut full, [c, h, w]);
    full
}

/// A1111's `slerp(val, low, high)` on one image's `[c, h, w]` noise, as it computes it:
/// the norms and dot products run along the height axis (`dim=1`), one angle per channel
/// and column; nearly parallel noise (mean cosine above 0.9995) is mixed linearly, with the
/// weights the other way round, as A1111 has them.
pub fn slerp(val: f32, low: &[f32], high: &[f32], [c, h, w]: NoiseShape) -> Vec<f32> {
    let at = |ci: usize, hi: usize, wi: usize| (ci * h + hi) * w + wi;
    let column_norm = |x: &[f32], ci, wi| {
        let sum: f64 = (0..h).map(|hi| f64::from(x[at(ci, hi, wi)]).powi(2)).sum();
        sum.sqrt() as f32
    };
    let mut dots = vec![0f32; c * w];
    for ci in 0..c {
        for wi in 0..w {
            let (nl, nh) = (column_norm(low, ci, wi), column_norm(high, ci, wi));
            let dot: f64 = (0..h)
                .map(|hi| {
                    let i = at(ci, hi, wi);
                    f64::from((low[i] / nl) * (high[i] / nh))
                })
                .sum();
            dots[ci * w + wi] = dot as f32;
        }
    }
    let mean = dots.iter().map(|&d| f64::from(d)).sum::<f64>() / dots.len().max(1) as f64;
    if mean > 0.9995 {
        return low
            .iter()
            .zip(high)
            .map(|(l, h)| l * val + h * (1.0 - val))
            .collect();
    }
    let mut out = vec![0f32; low.len()];
    for ci in 0..c {
        for wi in 0..w {
            let omega = dots[ci * w + wi].clamp(-1.0, 1.0).acos();
            let so = omega.sin();
            // A column of (anti)parallel noise (a one-row latent has nothing else) has no
            // plane to turn in, and A1111's division gives NaN there: mix it linearly.
            let (a, b) = if so.abs() < 1e-6 {
                (1.0 - val, val)
            } else {
                (((1.0 - val) * omega).sin() / so, (val * omega).sin() / so)
            };
            for hi in 0..h {
                let i = at(ci, hi, wi);
                out[i] = a * low[i] + b * high[i];
            }
        }
    }
    out
}

/// Copies `small` into the middle of `full` (A1111's offsets: floor division, cropping
/// `small` where it is the larger one).
fn paste_centred(small: &[f32], [c, sh, sw]: NoiseShape, full: &mut [f32], [_, h, w]: NoiseShape) {
    let place = |full: usize, small: usize| {
        let d = (full as i64 - small as i64).div_euclid(2);
        let len = if d >= 0 {
            small as i64
        } else {
            small as i64 + 2 * d
        };
        (d.max(0) as usize, (-d).max(0) as usize, len.max(0) as usize)
    };
    let (tx, sx, cols) = place(w, sw);
    let (ty, sy, rows) = place(h, sh);
    for ci in 0..c {
        for r in 0..rows {
            let from = (ci * sh + sy + r) * sw + sx;
            let to = (ci * h + ty + r) * w + tx;
            full[to..to + cols].copy_from_slice(&small[from..from + cols]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_smaller_noise_lands_in_the_middle() {
        let small: Vec<f32> = (0..4).map(|v| v as f32 + 1.0).collect();
        let mut full = vec![0.0; 16];
        paste_centred(&small, [1, 2, 2], &mut full, [1, 4, 4]);
        assert_eq!(&full[4..8], &[0.0, 1.0, 2.0, 0.0]);
        assert_eq!(&full[8..12], &[0.0, 3.0, 4.0, 0.0]);
        assert_eq!(full.iter().filter(|&&v| v == 0.0).count(), 12);
    }

    #[test]
    fn a_larger_noise_is_cropped_to_its_middle() {
        // 5 columns into 2: A1111's dx = (2 - 5) // 2 = -2 keeps columns 2..3 of 0..5.
        let small: Vec<f32> = (0..5).map(|v| v as f32).collect();
        let mut full = vec![-1.0; 2];
        paste_centred(&small, [1, 1, 5], &mut full, [1, 1, 2]);
        assert_eq!(full, [2.0, -1.0]);
    }

    #[test]
    fn one_row_noise_slerps_to_finite_values() {
        let low = [0.5, -1.0, 2.0];
        let high = [0.25, 1.5, 3.0];
        let got = slerp(0.5, &low, &high, [1, 1, 3]);
        assert!(got.iter().all(|v| v.is_finite()), "{got:?}");
    }

    #[test]
    fn slerp_ends_are_its_inputs() {
        let low: Vec<f32> = (0..12).map(|v| (v as f32 * 0.7).sin()).collect();
        let high: Vec<f32> = (0..12).map(|v| (v as f32 * 1.3).cos()).collect();
        let shape = [1, 3, 4];
        for (val, want) in [(0.0, &low), (1.0, &high)] {
            let got = slerp(val, &low, &high, shape);
            for (g, e) in got.iter().zip(want.iter()) {
                assert!((g - e).abs() < 1e-5, "{got:?} vs {want:?}");
            }
        }
    }
}
