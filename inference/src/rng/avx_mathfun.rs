//! One lane of Julien Pommier's `avx_mathfun.h` (`log256_ps`, `sincos256_ps`), the Cephes
//! single-precision log and sincos that torch's vectorised `randn` calls.
//!
//! The multiply-adds are fused exactly where the compiled torch kernel fuses them (see
//! `../shared/reference/README.md`, rng section): every Horner step `y = y*x + c`, the
//! log's `fma(y*x, z, e*q1)` and `fma(e, q2, x + y)`, the range reduction
//! `fma(y, -DP_k, x)`, `fma(ycos*z, z, -z/2)` and `fma(ysin*z, x, x)`. `f32::mul_add` is a
//! correctly rounded FMA on every target, so the results are bit-exact.
#![allow(clippy::excessive_precision)]

// The constants exactly as `avx_mathfun.h` spells them (rounded to f32 by the compiler).
// Cephes' SQRTHF, 0.707106781186547524, is 1/sqrt(2) (the same float32 value).
const SQRTHF: f32 = std::f32::consts::FRAC_1_SQRT_2;
const LOG_P: [f32; 9] = [
    7.0376836292E-2,
    -1.1514610310E-1,
    1.1676998740E-1,
    -1.2420140846E-1,
    1.4249322787E-1,
    -1.6668057665E-1,
    2.0000714765E-1,
    -2.4999993993E-1,
    3.3333331174E-1,
];
const LOG_Q1: f32 = -2.12194440e-4;
const LOG_Q2: f32 = 0.693359375;

const FOPI: f32 = 1.27323954473516;
const MINUS_DP1: f32 = -0.78515625;
const MINUS_DP2: f32 = -2.4187564849853515625e-4;
const MINUS_DP3: f32 = -3.77489497744594108e-8;
const SINCOF: [f32; 3] = [-1.9515295891E-4, 8.3321608736E-3, -1.6666654611E-1];
const COSCOF: [f32; 3] = [
    2.443315711809948E-005,
    -1.388731625493765E-003,
    4.166664568298827E-002,
];

/// `log256_ps` for one lane. Non-positive inputs give NaN, as in the original.
pub fn log(x: f32) -> f32 {
    if x <= 0.0 {
        return f32::NAN;
    }
    // Cut off denormals, split into exponent and a mantissa in [0.5, 1).
    let x = x.max(f32::MIN_POSITIVE);
    let bits = x.to_bits();
    let mut e = ((bits >> 23) as i32 - 0x7f) as f32 + 1.0;
    let mut x = f32::from_bits((bits & !0x7f80_0000) | 0.5f32.to_bits());
    if x < SQRTHF {
        e -= 1.0;
        x = (x - 1.0) + x;
    } else {
        x -= 1.0;
    }
    let z = x * x;
    let mut y = LOG_P[0];
    for &p in &LOG_P[1..] {
        y = y.mul_add(x, p);
    }
    y = (y * x).mul_add(z, e * LOG_Q1);
    y = (-z).mul_add(0.5, y);
    e.mul_add(LOG_Q2, x + y)
}

/// `sincos256_ps` for one lane: returns `(sin x, cos x)`.
pub fn sincos(x: f32) -> (f32, f32) {
    let mut sign_sin = x.is_sign_negative();
    let mut x = x.abs();
    // Octant: j = (int(x * 4/pi) + 1) & !1.
    let j = ((x * FOPI) as i32 + 1) & !1;
    let y = j as f32;
    let swap_sign_sin = j & 4 != 0;
    let use_sin_poly_for_sin = j & 2 == 0;
    let sign_cos = (!(j - 2)) & 4 != 0;
    x = y.mul_add(MINUS_DP1, x);
    x = y.mul_add(MINUS_DP2, x);
    x = y.mul_add(MINUS_DP3, x);
    sign_sin ^= swap_sign_sin;

    let z = x * x;
    let mut cos_poly = COSCOF[0];
    cos_poly = cos_poly.mul_add(z, COSCOF[1]);
    cos_poly = cos_poly.mul_add(z, COSCOF[2]);
    cos_poly = (cos_poly * z).mul_add(z, -(z * 0.5));
    cos_poly += 1.0;

    let mut sin_poly = SINCOF[0];
    sin_poly = sin_poly.mul_add(z, SINCOF[1]);
    sin_poly = sin_poly.mul_add(z, SINCOF[2]);
    sin_poly = (sin_poly * z).mul_add(x, x);

    // The original selects with masks and adds a zero; `0.0 + v` only matters for the
    // sign of a zero result, which the sign flips below decide anyway.
    let (sin, cos) = if use_sin_poly_for_sin {
        (0.0 + sin_poly, cos_poly + 0.0)
    } else {
        (cos_poly + 0.0, 0.0 + sin_poly)
    };
    let sin = if sign_sin { -sin } else { sin };
    let cos = if sign_cos { -cos } else { cos };
    (sin, cos)
}
