//! Tests of the crate root's kernels against their plain-Burn references.

use super::*;
use crate::test_support::rel_diff;
use burn::nn::GroupNormConfig;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Deterministic test data (a fixed xorshift stream scaled to roughly N(0, 1.5)).
fn random<const D: usize>(dims: [usize; D]) -> Tensor<D> {
    let n: usize = dims.iter().product();
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ n as u64;
    let values: Vec<f32> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 5.2
        })
        .collect();
    Tensor::from_data(TensorData::new(values, dims), &Device::flex())
}

/// Attention in float64 on the host: the ground truth both float32 versions approach.
fn attention_f64(q: &Tensor<4>, k: &Tensor<4>, v: &Tensor<4>) -> Vec<f64> {
    let [b, h, n, d] = q.dims();
    let [_, _, m, dv] = v.dims();
    let values = |t: &Tensor<4>| -> Vec<f64> {
        t.clone().into_data().iter::<f32>().map(f64::from).collect()
    };
    let (q, k, v) = (values(q), values(k), values(v));
    let mut out = vec![0f64; b * h * n * dv];
    for bh in 0..b * h {
        for i in 0..n {
            let qi = &q[(bh * n + i) * d..(bh * n + i + 1) * d];
            let scores: Vec<f64> = (0..m)
                .map(|j| {
                    let kj = &k[(bh * m + j) * d..(bh * m + j + 1) * d];
                    qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f64>() / (d as f64).sqrt()
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            for (j, w) in weights.iter().enumerate() {
                for c in 0..dv {
                    out[(bh * n + i) * dv + c] += w / total * v[(bh * m + j) * dv + c];
                }
            }
        }
    }
    out
}

fn error_vs(exact: &[f64], t: Tensor<4>) -> f64 {
    let scale = exact.iter().fold(1f64, |m, v| m.max(v.abs()));
    t.into_data()
        .iter::<f32>()
        .zip(exact)
        .map(|(a, e)| (f64::from(a) - e).abs())
        .fold(0.0, f64::max)
        / scale
}

#[test]
fn attention_is_as_accurate_as_burns_on_odd_shapes() {
    for (b, h, n, m, d, dv) in [
        (1, 1, 1, 1, 8, 8),
        (2, 3, 77, 77, 40, 40),
        (1, 2, 130, 700, 24, 16),
        (2, 1, 64, 1025, 64, 64),
    ] {
        let (q, k, v) = (
            random([b, h, n, d]),
            random([b, h, m, d]),
            random([b, h, m, dv]),
        );
        let exact = attention_f64(&q, &k, &v);
        let ours = error_vs(&exact, attention(q.clone(), k.clone(), v.clone()));
        let burns = error_vs(&exact, reference::attention(q, k, v));
        if std::env::var_os("EMBER_TEST_VERBOSE").is_some() {
            eprintln!(
                "attention {b}x{h}x{n}x{m}x{d}x{dv}: ours {ours:.2e}, Burn {burns:.2e} (vs float64)"
            );
        }
        // Float32 rounding in a different summation order: no worse than Burn's own.
        assert!(
            ours <= (2.0 * burns).max(1e-6),
            "attention {b}x{h}x{n}x{m}x{d}x{dv}: ours {ours:e}, Burn {burns:e}"
        );
    }
}

#[test]
fn attention_takes_strided_views() {
    // The UNet hands over swapped-axis views; the kernel must see logical order.
    let q = random([2, 50, 4, 8]).swap_dims(1, 2);
    let k = random([2, 30, 4, 8]).swap_dims(1, 2);
    let v = random([2, 30, 4, 8]).swap_dims(1, 2);
    let diff = rel_diff(
        attention(q.clone(), k.clone(), v.clone()),
        reference::attention(q, k, v),
    );
    assert!(diff < 2e-6, "strided attention: {diff}");
}

/// A question for [`interrupt::interruptible`] that counts its asks and says stop from the
/// `stop_from`-th on (0-based).
fn counting_question(stop_from: usize) -> (interrupt::Question, Arc<AtomicUsize>) {
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let question = Arc::new(move || counter.fetch_add(1, Ordering::Relaxed) >= stop_from);
    (question, asked)
}

#[test]
fn attention_asks_a_cancel_in_scope_before_every_key_tile_and_is_unchanged_by_it() {
    // Query blocks of 256 rows by key tiles of 1024: 2 heads x 2 blocks x 3 tiles.
    let (q, k, v) = (
        random([1, 2, 300, 8]),
        random([1, 2, 2100, 8]),
        random([1, 2, 2100, 8]),
    );
    let (question, asked) = counting_question(usize::MAX);
    let plain = attention(q.clone(), k.clone(), v.clone());
    let asking = interrupt::interruptible(question, || attention(q, k, v))
        .expect("nothing asked it to stop");
    assert_eq!(asked.load(Ordering::Relaxed), 2 * 2 * 3);
    assert_eq!(asking.into_data(), plain.into_data());
}

#[test]
fn attention_stops_when_a_cancel_in_scope_says_so_and_its_result_is_dropped() {
    let shape = attention::AttentionShape {
        heads: 3,
        n: 600,
        m: 2100,
        d: 8,
        dv: 8,
    };
    let values = |rows: usize| f32s(&random([shape.heads, rows, 8]).into_data()).to_vec();
    let (q, k, v) = (values(shape.n), values(shape.m), values(shape.m));
    // The first ask says go on, every later one stop: one task computes one key tile.
    let (question, _) = counting_question(1);
    let mut unfinished = Vec::new();
    let result = interrupt::interruptible(question, || {
        unfinished = attention::flash_attention(&q, &k, &v, shape, 0.5);
    });
    assert_eq!(result, None, "the scope drops an unfinished result");
    // Query blocks are 256 rows within a head: 600 rows make 3, the last short.
    let blocks = shape.heads * shape.n.div_ceil(256);
    let untouched_blocks = unfinished
        .chunks(shape.n * shape.dv)
        .flat_map(|head| head.chunks(256 * shape.dv))
        .filter(|block| block.iter().all(|&x| x == 0.0))
        .count();
    assert_eq!(
        untouched_blocks,
        blocks - 1,
        "every query block but the first asked stops before its first key tile"
    );
}

#[test]
fn activations_match_burn() {
    let x = random([3, 5, 7, 11]);
    assert!(
        rel_diff(silu(x.clone()), reference::silu(x.clone())) < 2e-6,
        "silu"
    );
    assert!(rel_diff(gelu(x.clone()), reference::gelu(x)) < 2e-6, "gelu");
    let y = random([2, 9, 2 * 37]);
    assert!(
        rel_diff(geglu(y.clone()), reference::geglu(y)) < 2e-6,
        "geglu"
    );
}

#[test]
fn activations_leave_shared_inputs_untouched() {
    let x = random([2, 3, 4, 5]);
    let before = x.clone().into_data();
    let _ = silu(x.clone());
    assert_eq!(
        x.into_data(),
        before,
        "an in-place kernel must not write through a shared buffer"
    );
}

#[test]
fn group_norm_matches_burn() {
    let device = Device::flex();
    for (groups, channels, side) in [(32, 64, 5), (8, 16, 9), (1, 3, 4)] {
        let mut norm = GroupNormConfig::new(groups, channels)
            .with_epsilon(1e-6)
            .init(&device);
        norm.gamma = Some(burn::module::Param::from_tensor(random([channels])));
        norm.beta = Some(burn::module::Param::from_tensor(random([channels])));
        let x = random([2, channels, side, side + 1])
            .mul_scalar(3.0)
            .add_scalar(5.0);
        let diff = rel_diff(group_norm(x.clone(), &norm), norm.forward(x));
        assert!(diff < 2e-6, "group norm {groups}/{channels}: {diff}");
    }
}

#[test]
fn half_precision_tensors_run_in_float32_and_keep_their_type() {
    // Each kernel on f16/bf16 inputs equals the float32 kernel on the same (rounded)
    // values, rounded once to the half type (half an ulp: 2^-9 relative for bf16).
    let device = Device::flex();
    let mut norm = GroupNormConfig::new(8, 16).with_epsilon(1e-6).init(&device);
    norm.gamma = Some(burn::module::Param::from_tensor(random([16])));
    norm.beta = Some(burn::module::Param::from_tensor(random([16])));
    for (dtype, tolerance) in [(DType::BF16, 4e-3), (DType::F16, 5e-4)] {
        let half = |t: Tensor<4>| t.cast(dtype);
        let widened = |t: &Tensor<4>| t.clone().cast(DType::F32);
        let check = |name: &str, ours: Tensor<4>, exact: Tensor<4>| {
            assert_eq!(ours.dtype(), dtype, "{name}");
            let diff = rel_diff(ours.cast(DType::F32), exact);
            assert!(diff < tolerance, "{name} {dtype:?}: {diff}");
        };
        let x = half(random([2, 16, 5, 6]));
        check("silu", silu(x.clone()), silu(widened(&x)));
        let mut norm_half = norm.clone();
        norm_half.gamma = norm
            .gamma
            .as_ref()
            .map(|g| burn::module::Param::from_tensor(g.val().cast(dtype)));
        norm_half.beta = norm
            .beta
            .as_ref()
            .map(|b| burn::module::Param::from_tensor(b.val().cast(dtype)));
        let mut norm_rounded = norm_half.clone();
        norm_rounded.gamma = norm_half
            .gamma
            .as_ref()
            .map(|g| burn::module::Param::from_tensor(g.val().cast(DType::F32)));
        norm_rounded.beta = norm_half
            .beta
            .as_ref()
            .map(|b| burn::module::Param::from_tensor(b.val().cast(DType::F32)));
        check(
            "group_norm_silu",
            group_norm_silu(x.clone(), &norm_half),
            group_norm_silu(widened(&x), &norm_rounded),
        );
        let (q, k, v) = (
            half(random([1, 2, 9, 8])),
            half(random([1, 2, 7, 8])),
            half(random([1, 2, 7, 4])),
        );
        check(
            "attention",
            attention(q.clone(), k.clone(), v.clone()),
            attention(widened(&q), widened(&k), widened(&v)),
        );
    }
}
