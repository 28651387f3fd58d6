//! GroupNorm on the CPU: per (image, group) mean and variance in float64 lanes, then one
//! fused scale-and-shift pass per channel, groups spread over the rayon pool.

use rayon::prelude::*;

use crate::simd_math::multiversion;

/// Per-channel affine parameters.
#[derive(Clone, Copy)]
pub struct Affine<'a> {
    pub gamma: &'a [f32],
    pub beta: &'a [f32],
}

/// Normalises `data` (`[batch, channels, pixels]`, contiguous) in place.
///
/// # Panics
/// If the sizes do not fit together.
pub fn group_norm_in_place(
    data: &mut [f32],
    [batch, channels, pixels]: [usize; 3],
    groups: usize,
    eps: f32,
    affine: Affine<'_>,
) {
    assert_eq!(
        data.len(),
        batch * channels * pixels,
        "group norm: data size"
    );
    assert!(
        groups > 0 && channels % groups == 0,
        "group norm: channels must divide into groups"
    );
    assert_eq!(affine.gamma.len(), channels, "group norm: gamma size");
    assert_eq!(affine.beta.len(), channels, "group norm: beta size");
    let per_group = channels / groups;
    if data.is_empty() {
        return;
    }
    data.par_chunks_mut(per_group * pixels)
        .enumerate()
        .for_each(|(i, chunk)| {
            let first_channel = (i % groups) * per_group;
            normalize_group(chunk, pixels, first_channel, eps, affine);
        });
}

multiversion! {
    /// Normalises one (image, group) slice: `channels_in_group x pixels` values.
    fn normalize_group(chunk: &mut [f32], pixels: usize, first_channel: usize, eps: f32, affine: Affine<'_>) {
        let n = chunk.len() as f64;
        let mean = lane_sum(chunk, f64::from) / n;
        let var = lane_sum(chunk, |v| {
            let d = f64::from(v) - mean;
            d * d
        }) / n;
        let rstd = 1.0 / (var + f64::from(eps)).sqrt();
        for (c, channel) in chunk.chunks_exact_mut(pixels).enumerate() {
            // (x - mean) * rstd * gamma + beta as one multiply-add per value.
            let gamma = f64::from(affine.gamma[first_channel + c]);
            let scale = (rstd * gamma) as f32;
            let shift = (f64::from(affine.beta[first_channel + c]) - mean * rstd * gamma) as f32;
            for v in channel.iter_mut() {
                *v = *v * scale + shift;
            }
        }
    }
}

/// `sum(f(v))` with 8 float64 running sums so the loop vectorises.
#[inline(always)]
fn lane_sum(data: &[f32], f: impl Fn(f32) -> f64) -> f64 {
    let mut lanes = [0f64; 8];
    let chunks = data.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (l, &v) in lanes.iter_mut().zip(chunk) {
            *l += f(v);
        }
    }
    lanes.iter().sum::<f64>() + rest.iter().map(|&v| f(v)).sum::<f64>()
}
