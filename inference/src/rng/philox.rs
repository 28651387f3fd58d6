//! A1111's "NV" noise source: torch's CUDA `randn` imitated on the host, so an image A1111
//! made on an NVIDIA card (its default "GPU" source there) comes out the same here.
//!
//! The algorithm is A1111's `modules/rng_philox.py`: Philox 4x32 with 10 rounds over the
//! counter `[offset, 0, index, 0]` and the seed as key, then the first value of a Box–Muller
//! transform of the first two outputs, computed in double precision and rounded to float32.
//! Each `randn` call moves the offset on by one, as torch's CUDA generator does for tensors
//! of this size.

const PHILOX_M: [u64; 2] = [0xD251_1F53, 0xCD9E_8D57];
const PHILOX_W: [u32; 2] = [0x9E37_79B9, 0xBB67_AE85];

/// A1111's `Generator(seed)` of `rng_philox.py`.
#[derive(Clone, Debug)]
pub struct PhiloxRng {
    key: [u32; 2],
    offset: u32,
}

impl PhiloxRng {
    /// A generator at offset 0. The whole 64-bit seed is the key (A1111's seeds fit 32).
    pub fn new(seed: u64) -> Self {
        Self {
            key: [seed as u32, (seed >> 32) as u32],
            offset: 0,
        }
    }

    /// `randn(shape)` of `numel` standard normal values; the next call draws other ones.
    pub fn randn(&mut self, numel: usize) -> Vec<f32> {
        let offset = self.offset;
        self.offset = self.offset.wrapping_add(1);
        // The numbers as numpy holds them: float32 constants, widened where they meet the
        // 32-bit integers (numpy promotes uint32 × float32 to float64).
        let two_pow32_inv = 2.328_306_4e-10_f64 as f32;
        let two_pow32_inv_2pi = (2.328_306_4e-10_f64 * 6.283_185_5_f64) as f32;
        let (scale_u, shift_u) = (f64::from(two_pow32_inv), f64::from(two_pow32_inv / 2.0));
        let (scale_v, shift_v) = (
            f64::from(two_pow32_inv_2pi),
            f64::from(two_pow32_inv_2pi / 2.0),
        );
        (0..numel)
            .map(|index| {
                // A1111 counts in 32 bits: past 2^32 values the index wraps, as numpy's does.
                let [x, y, ..] = philox4x32_10([offset, 0, index as u32, 0], self.key);
                let u = f64::from(x) * scale_u + shift_u;
                let v = f64::from(y) * scale_v + shift_v;
                ((-2.0 * u.ln()).sqrt() * v.sin()) as f32
            })
            .collect()
    }
}

/// One Philox round: two 32×32→64-bit products mixed into the other half of the counter.
fn round(c: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let v1 = u64::from(c[0]) * PHILOX_M[0];
    let v2 = u64::from(c[2]) * PHILOX_M[1];
    [
        (v2 >> 32) as u32 ^ c[1] ^ key[0],
        v2 as u32,
        (v1 >> 32) as u32 ^ c[3] ^ key[1],
        v1 as u32,
    ]
}

/// Philox 4x32-10: ten rounds, the key bumped by the Weyl constants between them.
fn philox4x32_10(mut counter: [u32; 4], mut key: [u32; 2]) -> [u32; 4] {
    for _ in 0..9 {
        counter = round(counter, key);
        key = [
            key[0].wrapping_add(PHILOX_W[0]),
            key[1].wrapping_add(PHILOX_W[1]),
        ];
    }
    round(counter, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values `rng_philox.py`'s docstring gives for `Generator(seed=0).randn((3, 4))`:
    /// the first twelve of `torch.manual_seed(0); torch.randn(..., device='cuda')`.
    #[test]
    fn seed_zero_gives_torch_cudas_first_values() {
        let expected: [f64; 12] = [
            -0.924_662_59,
            -0.425_344_15,
            -2.643_845_7,
            0.145_183_88,
            -0.120_866_47,
            -0.579_725_64,
            -0.622_851_22,
            -0.328_387_09,
            -1.074_542_31,
            -0.363_144_07,
            -1.671_050_67,
            2.265_504_97,
        ];
        let got = PhiloxRng::new(0).randn(12);
        for (g, e) in got.iter().zip(expected) {
            assert!((f64::from(*g) - e).abs() < 1e-6, "{got:?}");
        }
    }

    #[test]
    fn each_call_moves_the_offset_on() {
        let mut rng = PhiloxRng::new(7);
        let first = rng.randn(8);
        let second = rng.randn(8);
        assert_ne!(first, second);
        assert_eq!(PhiloxRng::new(7).randn(8), first);
        // A value depends only on its index, not on how many are drawn.
        assert_eq!(PhiloxRng::new(7).randn(3), first[..3]);
    }
}
