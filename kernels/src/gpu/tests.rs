//! The GroupNorm (+ SiLU) cubecl kernel against the plain-Burn reference, on whatever wgpu
//! adapter the machine has (Mesa's lavapipe in CI), in f32 and in f16.

use burn::module::{Module, Param};
use burn::nn::{GroupNorm, GroupNormConfig};
use burn::tensor::{DType, Device, Tensor, TensorData};

use crate::reference;

/// The process's one wgpu device (wgpu's runtime opens once per process).
fn wgpu() -> Device {
    static DEVICE: std::sync::OnceLock<Device> = std::sync::OnceLock::new();
    DEVICE
        .get_or_init(|| {
            Device::wgpu_options()
                .init_with_setup()
                .map(|(device, _)| device)
                .expect("a wgpu adapter (install mesa-vulkan-drivers for lavapipe; test.sh does)")
        })
        .clone()
}

/// A fixed xorshift stream: values in `offset ± spread / 2`.
fn values(n: usize, seed: u64, offset: f32, spread: f32) -> Vec<f32> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ seed;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            offset + ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * spread
        })
        .collect()
}

fn norm(groups: usize, channels: usize, seed: u64, device: &Device) -> GroupNorm {
    let mut norm = GroupNormConfig::new(groups, channels)
        .with_epsilon(1e-5)
        .init(device);
    let param = |seed, offset| {
        let data = TensorData::new(values(channels, seed, offset, 1.0), [channels]);
        Param::from_tensor(Tensor::<1>::from_data(data, device))
    };
    norm.gamma = Some(param(seed, 1.0));
    norm.beta = Some(param(seed + 1, 0.0));
    norm
}

fn cast_norm(norm: &GroupNorm, dtype: DType) -> GroupNorm {
    let mut norm = norm.clone();
    let cast =
        |p: &Option<Param<Tensor<1>>>| p.as_ref().map(|p| Param::from_tensor(p.val().cast(dtype)));
    norm.gamma = cast(&norm.gamma);
    norm.beta = cast(&norm.beta);
    norm
}

/// The largest difference over the reference's largest magnitude (at least 1).
fn relative_error(ours: Tensor<4>, reference: Tensor<4>) -> f32 {
    let (ours, reference) = (ours.cast(DType::F32), reference.cast(DType::F32));
    let scale = reference.clone().abs().max().into_scalar::<f32>().max(1.0);
    (ours - reference).abs().max().into_scalar::<f32>() / scale
}

/// `[batch, channels, h, w]` and groups: SD's 32 groups of 2 and 10 channels, odd and
/// single-pixel images, one group holding every channel.
const CASES: [([usize; 4], usize); 5] = [
    ([2, 64, 9, 7], 32),
    ([1, 320, 16, 16], 32),
    ([1, 96, 3, 5], 3),
    ([3, 32, 1, 1], 32),
    ([1, 8, 40, 33], 1),
];

#[test]
fn group_norm_silu_matches_the_reference_in_f32_and_f16() {
    let gpu = wgpu();
    for (i, ([b, c, h, w], groups)) in CASES.into_iter().enumerate() {
        let seed = i as u64 * 10;
        // A mean of 3 tests that the variance is taken around the mean.
        let data = TensorData::new(values(b * c * h * w, seed, 3.0, 4.0), [b, c, h, w]);
        let x = Tensor::<4>::from_data(data, &gpu);
        let module = norm(groups, c, seed + 2, &gpu);
        for silu in [false, true] {
            let reference = reference::group_norm_silu(x.clone(), &module, silu);
            let ours = super::group_norm_silu(
                &x,
                &module.gamma.as_ref().unwrap().val(),
                &module.beta.as_ref().unwrap().val(),
                groups,
                1e-5,
                silu,
            )
            .expect("the kernel takes a contiguous f32 tensor on wgpu");
            let error = relative_error(ours, reference);
            assert!(error <= 1e-5, "case {i} silu {silu}: f32 error {error}");

            // f16 in and out, statistics in f32: within f16's rounding of the f32 result
            // (computed on the CPU from the same f16 values).
            let x16 = x.clone().cast(DType::F16);
            let module16 = cast_norm(&module, DType::F16);
            let cpu = Device::flex();
            let exact = reference::group_norm_silu(
                x16.clone().cast(DType::F32).to_device(&cpu),
                &cast_norm(&module16, DType::F32).to_device(&cpu),
                silu,
            );
            // Through the public entry points, as the models call them.
            let ours = if silu {
                crate::group_norm_silu(x16, &module16)
            } else {
                crate::group_norm(x16, &module16)
            };
            assert_eq!(ours.dtype(), DType::F16);
            let error = relative_error(ours.to_device(&cpu), exact);
            assert!(error <= 2e-3, "case {i} silu {silu}: f16 error {error}");
        }
    }
}

#[test]
fn tensors_it_does_not_take_are_left_to_the_reference() {
    let gpu = wgpu();
    let module = norm(4, 8, 1, &gpu);
    let (gamma, beta) = (module.gamma.unwrap().val(), module.beta.unwrap().val());
    let x = Tensor::<4>::from_data(
        TensorData::new(values(8 * 6, 1, 0.0, 1.0), [1, 8, 2, 3]),
        &gpu,
    );
    // A strided view, the CPU device, and channels that do not split into the groups.
    let strided = x.clone().swap_dims(2, 3);
    assert!(super::group_norm_silu(&strided, &gamma, &beta, 4, 1e-5, true).is_none());
    let cpu = x.clone().to_device(&Device::flex());
    let (g, b) = (
        gamma.clone().to_device(&Device::flex()),
        beta.clone().to_device(&Device::flex()),
    );
    assert!(super::group_norm_silu(&cpu, &g, &b, 4, 1e-5, true).is_none());
    assert!(super::group_norm_silu(&x, &gamma, &beta, 3, 1e-5, true).is_none());
}
