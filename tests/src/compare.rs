//! Comparing our numbers and images with the reference's under a stated tolerance.

/// How far apart two tensors are.
#[derive(Clone, Copy, Debug)]
pub struct Diff {
    pub max_abs: f64,
    pub max_abs_expected: f64,
    pub worst_index: usize,
}

/// Elementwise comparison statistics (also fails on NaN/inf in `actual`).
///
/// Panics when the lengths differ: a truncated or padded output must never pass.
pub fn diff(actual: &[f32], expected: &[f64]) -> Diff {
    assert_eq!(
        actual.len(),
        expected.len(),
        "element count differs: ours {}, reference {}",
        actual.len(),
        expected.len()
    );
    let mut d = Diff {
        max_abs: 0.0,
        max_abs_expected: 0.0,
        worst_index: 0,
    };
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        assert!(a.is_finite(), "non-finite value {a} at index {i}");
        let err = (f64::from(a) - e).abs();
        if err > d.max_abs {
            d.max_abs = err;
            d.worst_index = i;
        }
        d.max_abs_expected = d.max_abs_expected.max(e.abs());
    }
    d
}

/// The largest per-channel difference between two 8-bit images, in levels, and how many
/// values differ. Panics when the lengths differ (a cropped image must never pass).
pub fn pixel_diff<A: Copy + Into<i64>, B: Copy + Into<i64>>(
    ours: &[A],
    theirs: &[B],
) -> (i64, usize) {
    assert_eq!(
        ours.len(),
        theirs.len(),
        "image sizes differ: ours {} values, reference {}",
        ours.len(),
        theirs.len()
    );
    let mut worst = 0;
    let mut off = 0;
    for (&a, &b) in ours.iter().zip(theirs) {
        let d = (a.into() - b.into()).abs();
        worst = worst.max(d);
        off += usize::from(d != 0);
    }
    (worst, off)
}

/// Asserts `|actual - expected| <= atol + rel_to_max * max|expected|` everywhere and returns
/// the statistics. `what` names the quantity in the failure message.
pub fn assert_close(
    what: &str,
    actual: &[f32],
    expected: &[f64],
    atol: f64,
    rel_to_max: f64,
) -> Diff {
    let d = diff(actual, expected);
    let bound = atol + rel_to_max * d.max_abs_expected;
    assert!(
        d.max_abs <= bound,
        "{what}: max |diff| {:.3e} at index {} (ours {}, reference {}) exceeds {:.3e} \
         (atol {atol:e} + {rel_to_max:e} x max|ref| {:.3e})",
        d.max_abs,
        d.worst_index,
        actual[d.worst_index],
        expected[d.worst_index],
        bound,
        d.max_abs_expected
    );
    if std::env::var_os("EMBER_TEST_VERBOSE").is_some() {
        eprintln!(
            "{what}: max |diff| {:.2e} (max |ref| {:.2e}, bound {:.2e})",
            d.max_abs, d.max_abs_expected, bound
        );
    }
    d
}

/// Asserts `|actual - expected| <= tol * max(1, max|expected|)` everywhere: the reference
/// README's "abs 1e-4 (or 1e-4 of the tensor's max magnitude)" form.
pub fn assert_close_scaled(what: &str, actual: &[f32], expected: &[f64], tol: f64) -> Diff {
    assert_eq!(
        actual.len(),
        expected.len(),
        "{what}: element count differs"
    );
    let max = expected.iter().fold(0f64, |m, v| m.max(v.abs()));
    assert_close(what, actual, expected, tol * max.max(1.0), 0.0)
}
