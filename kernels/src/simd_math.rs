//! Elementwise maths in plain, branch-free loops that the compiler vectorises. Each hot loop
//! is compiled for AVX-512, for AVX2+FMA and for plain x86-64 by [`multiversion!`], and the
//! variant the running CPU supports is picked at run time.
//!
//! burn-flex evaluates `exp` with one libm call per element; a softmax over a 4096x4096
//! attention map is 16.8 M of them per head. These approximations are accurate to a few
//! float32 ulps, far inside the reference tolerances.

#![allow(clippy::excessive_precision)]

/// Defines a function whose body is compiled three times (AVX-512, AVX2+FMA, baseline) and
/// dispatched on the running CPU. The body must be safe code; only the dispatch is unsafe.
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
                fn avx512($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                #[target_feature(enable = "avx2,fma")]
                fn avx2($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                if std::is_x86_feature_detected!("avx512f")
                    && std::is_x86_feature_detected!("avx512vl")
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512dq")
                {
                    // SAFETY: the CPU supports every feature `avx512` is compiled with.
                    #[allow(unsafe_code)]
                    return unsafe { avx512($($arg),*) };
                }
                if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU supports every feature `avx2` is compiled with.
                    #[allow(unsafe_code)]
                    return unsafe { avx2($($arg),*) };
                }
            }
            body($($arg),*)
        }
    };
}
pub(crate) use multiversion;

const LOG2E: f32 = std::f32::consts::LOG2_E;
// ln 2 split in two so that n * LN2_HI is exact (Cephes).
const LN2_HI: f32 = 0.693359375;
const LN2_LO: f32 = -2.12194440e-4;
const EXP_P: [f32; 6] = [
    1.9875691500e-4,
    1.3981999507e-3,
    8.3334519073e-3,
    4.1665795894e-2,
    1.6666665459e-1,
    5.0000001201e-1,
];

/// 1.5 * 2^23: adding it rounds a float of magnitude below 2^22 to an integer, which then
/// sits in the low mantissa bits.
const ROUND: f32 = 12_582_912.0;

/// Cephes' single-precision `exp`, without branches, floor or float-to-int conversions (so
/// it vectorises on any x86-64): `exp(x)` for x in [-87, 88], about 1e-38 below.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.3, 88.3);
    // n = round(x / ln 2), as a float and as the integer in the bits of `t`.
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = EXP_P[0];
    for c in &EXP_P[1..] {
        p = p * r + c;
    }
    let y = p * r * r + r + 1.0;
    // Scale by 2^n through the exponent bits (n is in [-126, 127] after the clamp).
    let n_bits = t.to_bits().wrapping_sub(ROUND.to_bits());
    y * f32::from_bits(n_bits.wrapping_add(127) << 23)
}

/// `erf(x)` (Abramowitz & Stegun 7.1.26: absolute error below 1.5e-7, plus float32 rounding).
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_72 + t * (1.421_413_8 + t * (-1.453_152_1 + t * 1.061_405_4))));
    let y = 1.0 - poly * exp(-a * a);
    y.copysign(x)
}

multiversion! {
    /// SiLU in place: `x * sigmoid(x)`.
    pub fn silu_in_place(data: &mut [f32]) {
        for v in data.iter_mut() {
            *v /= 1.0 + exp(-*v);
        }
    }
}

multiversion! {
    /// Exact (erf) GELU in place: `x * (1 + erf(x / sqrt 2)) / 2`.
    pub fn gelu_in_place(data: &mut [f32]) {
        for v in data.iter_mut() {
            *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
        }
    }
}

multiversion! {
    /// GEGLU's gating: `hidden * gelu(gate)` where each row of `data` is `[hidden | gate]`
    /// (`2 * inner` values). Writes `rows x inner` values to `out`.
    pub fn geglu(data: &[f32], inner: usize, out: &mut [f32]) {
        for (row, o) in data.chunks_exact(2 * inner).zip(out.chunks_exact_mut(inner)) {
            let (hidden, gate) = row.split_at(inner);
            for ((o, &h), &g) in o.iter_mut().zip(hidden).zip(gate) {
                *o = h * 0.5 * g * (1.0 + erf(g * std::f32::consts::FRAC_1_SQRT_2));
            }
        }
    }
}

/// Largest value of a slice (16 running maxima so the loop vectorises).
#[inline(always)]
pub fn max(data: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 16];
    let chunks = data.chunks_exact(16);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (l, &v) in lanes.iter_mut().zip(chunk) {
            *l = l.max(v);
        }
    }
    let mut m = lanes.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    for &v in rest {
        m = m.max(v);
    }
    m
}

/// `data[i] = exp(data[i] - shift)` in place; returns the sum of the results.
#[inline(always)]
pub fn exp_shifted_sum(data: &mut [f32], shift: f32) -> f32 {
    let mut lanes = [0f32; 16];
    let mut chunks = data.chunks_exact_mut(16);
    for chunk in &mut chunks {
        for (l, v) in lanes.iter_mut().zip(chunk.iter_mut()) {
            *v = exp(*v - shift);
            *l += *v;
        }
    }
    let mut sum: f32 = lanes.iter().sum();
    for v in chunks.into_remainder() {
        *v = exp(*v - shift);
        sum += *v;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_accurate_over_its_range() {
        let mut worst = 0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let (ours, exact) = (f64::from(exp(x)), f64::from(x).exp());
            worst = worst.max(((ours - exact) / exact).abs());
            x += 0.0137;
        }
        assert!(worst < 4e-7, "exp relative error {worst}");
        assert_eq!(exp(-200.0), exp(-87.3), "very negative inputs clamp to ~0");
        assert!(exp(-87.3) < 1e-37);
    }

    #[test]
    fn erf_is_accurate() {
        let mut worst = 0f64;
        for i in -4000..4000 {
            let x = i as f32 * 0.001;
            let exact = erf_reference(f64::from(x));
            worst = worst.max((f64::from(erf(x)) - exact).abs());
        }
        // A&S 7.1.26 is within 1.5e-7; float32 evaluation adds a few ulps (measured 4.1e-7).
        assert!(worst < 5e-7, "erf absolute error {worst}");
    }

    /// erf by its Taylor series (converges for |x| <= 4 in double precision).
    fn erf_reference(x: f64) -> f64 {
        let mut term = x;
        let mut sum = x;
        for n in 1..200 {
            term *= -x * x / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn silu_and_gelu_match_their_definitions() {
        // |x| <= 5.5 keeps x / sqrt(2) inside the range where the Taylor reference converges.
        let xs: Vec<f32> = (-275..275).map(|i| i as f32 * 0.02).collect();
        let mut s = xs.clone();
        silu_in_place(&mut s);
        let mut g = xs.clone();
        gelu_in_place(&mut g);
        for ((x, s), g) in xs.iter().zip(&s).zip(&g) {
            let x64 = f64::from(*x);
            let silu = x64 / (1.0 + (-x64).exp());
            let gelu = 0.5 * x64 * (1.0 + erf_reference(x64 / std::f64::consts::SQRT_2));
            assert!(
                (f64::from(*s) - silu).abs() < 2e-6 * (1.0 + silu.abs()),
                "silu({x})"
            );
            assert!(
                (f64::from(*g) - gelu).abs() < 2e-6 * (1.0 + gelu.abs()),
                "gelu({x})"
            );
        }
    }
}
