//! ComfyUI's `beta` schedule (`comfy/samplers.py` `beta_scheduler`, Lee et al. 2024, "Beta
//! Sampling is All You Need"): training timesteps at the quantiles of a Beta(0.6, 0.6)
//! distribution, which crowds the steps at both ends of the noise range.
//!
//! The quantile function is scipy's `beta.ppf`; only `rint(ppf * 999)` is used, so a
//! double-precision bisection on the regularized incomplete beta function is exact here.

use super::DiscreteSchedule;

/// ComfyUI's defaults.
const ALPHA: f64 = 0.6;
const BETA: f64 = 0.6;

/// `steps` table entries at Beta(0.6, 0.6) quantiles (consecutive duplicates dropped, so a
/// high step count can give fewer steps), in decreasing noise, then 0.
pub fn beta_sigmas(table: &DiscreteSchedule, steps: usize) -> Vec<f32> {
    let last = (table.len() - 1) as f64;
    let mut sigmas = Vec::with_capacity(steps + 1);
    let mut previous = None;
    for k in 0..steps {
        // numpy: 1 - linspace(0, 1, steps, endpoint=False)
        let q = 1.0 - k as f64 / steps as f64;
        let t = (quantile(q) * last).round_ties_even();
        if previous != Some(t) {
            sigmas.push(table.sigmas[t as usize]);
        }
        previous = Some(t);
    }
    sigmas.push(0.0);
    sigmas
}

/// The Beta(ALPHA, BETA) quantile of `q` in [0, 1].
fn quantile(q: f64) -> f64 {
    if q <= 0.0 {
        return 0.0;
    }
    if q >= 1.0 {
        return 1.0;
    }
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if regularized_incomplete_beta(mid, ALPHA, BETA) < q {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// `I_x(a, b)` by its continued fraction (Numerical Recipes `betai`), using the symmetry
/// `I_x(a, b) = 1 - I_{1-x}(b, a)` where the fraction converges slowly.
fn regularized_incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * continued_fraction(x, a, b) / a
    } else {
        1.0 - ln_front.exp() * continued_fraction(1.0 - x, b, a) / b
    }
}

/// Lentz's evaluation of the incomplete beta continued fraction.
fn continued_fraction(x: f64, a: f64, b: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..500 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        for aa in [
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ] {
            d = 1.0 + aa * d;
            if d.abs() < TINY {
                d = TINY;
            }
            c = 1.0 + aa / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-16 {
            break;
        }
    }
    h
}

/// `ln Γ(x)` for x > 0 (Lanczos, g = 7, n = 9; ~1e-15 relative).
fn ln_gamma(x: f64) -> f64 {
    const COEFFICIENTS: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 - x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = COEFFICIENTS[0];
    for (i, &c) in COEFFICIENTS.iter().enumerate().skip(1) {
        sum += c / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incomplete_beta_has_its_known_values() {
        // Symmetric a = b: I_{1/2} = 1/2. a = b = 1 is the uniform distribution.
        assert!((regularized_incomplete_beta(0.5, 0.6, 0.6) - 0.5).abs() < 1e-14);
        assert!((regularized_incomplete_beta(0.3, 1.0, 1.0) - 0.3).abs() < 1e-14);
        // Beta(0.5, 0.5) is the arcsine law: I_x = 2/π asin(√x).
        let x: f64 = 0.2;
        let arcsine = 2.0 / std::f64::consts::PI * x.sqrt().asin();
        assert!((regularized_incomplete_beta(x, 0.5, 0.5) - arcsine).abs() < 1e-13);
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-13);
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-13);
    }

    #[test]
    fn quantile_inverts_the_distribution() {
        for q in [0.01, 0.1, 0.37, 0.5, 0.9, 0.999] {
            let x = quantile(q);
            assert!(
                (regularized_incomplete_beta(x, ALPHA, BETA) - q).abs() < 1e-12,
                "{q}"
            );
        }
    }
}
