//! The GroupNorm (+ SiLU) and GEGLU cubecl kernels, the folded upsampler, and the wide-head
//! and padded attention against the plain-Burn references, on whatever wgpu adapter the
//! machine has (Mesa's lavapipe in CI), in f32 and in f16.

use burn::module::{Module, Param};
use burn::nn::{GroupNorm, GroupNormConfig};
use burn::tensor::{DType, Device, Tensor, TensorData};

use crate::reference;

/// The process's one wgpu device (wgpu's runtime opens once per process).
pub(crate) fn wgpu() -> Device {
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
pub(crate) fn values(n: usize, seed: u64, offset: f32, spread: f32) -> Vec<f32> {
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
pub(crate) fn relative_error(ours: Tensor<4>, reference: Tensor<4>) -> f32 {
    let (ours, reference) = (ours.cast(DType::F32), reference.cast(DType::F32));
    let scale = reference.clone().abs().max().into_scalar::<f32>().max(1.0);
    (ours - reference).abs().max().into_scalar::<f32>() / scale
}

/// `[batch, channels, h, w]` and groups: SD's 32 groups of 2 and 10 channels, odd and
/// single-pixel images, one group holding every channel; and groups of more than 16384
/// values, whose statistics come from several cubes (3 slices a group, and 2 with two
/// images).
const CASES: [([usize; 4], usize); 7] = [
    ([2, 64, 9, 7], 32),
    ([1, 320, 16, 16], 32),
    ([1, 96, 3, 5], 3),
    ([3, 32, 1, 1], 32),
    ([1, 8, 40, 33], 1),
    ([1, 8, 100, 90], 2),
    ([2, 6, 77, 113], 3),
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

/// An NCHW view of NHWC memory, as Burn's convolutions return, is read in its logical
/// order; the CPU device and channels that do not split into the groups are left to the
/// reference.
#[test]
fn views_are_read_in_order_and_other_tensors_left_to_the_reference() {
    let gpu = wgpu();
    let module = norm(4, 8, 1, &gpu);
    let x = Tensor::<4>::from_data(
        TensorData::new(values(8 * 6, 1, 0.0, 1.0), [1, 8, 2, 3]),
        &gpu,
    );
    let nhwc = Tensor::<4>::from_data(
        TensorData::new(values(8 * 6, 2, 1.0, 2.0), [1, 2, 3, 8]),
        &gpu,
    );
    let view = nhwc.permute([0, 3, 1, 2]);
    let reference = reference::group_norm_silu(view.clone(), &module, true);
    let (gamma, beta) = (module.gamma.unwrap().val(), module.beta.unwrap().val());
    let ours = super::group_norm_silu(&view, &gamma, &beta, 4, 1e-5, true)
        .expect("the kernel takes a view on wgpu");
    let error = relative_error(ours, reference);
    assert!(error <= 1e-5, "a view: error {error}");
    let cpu = x.clone().to_device(&Device::flex());
    let (g, b) = (
        gamma.clone().to_device(&Device::flex()),
        beta.clone().to_device(&Device::flex()),
    );
    assert!(super::group_norm_silu(&cpu, &g, &b, 4, 1e-5, true).is_none());
    assert!(super::group_norm_silu(&x, &gamma, &beta, 3, 1e-5, true).is_none());
}

/// GEGLU against the plain-Burn reference: SD 1.5's first feed-forward width, an odd one, a
/// single token; f32 within 1e-5, f16 in and out (GELU in f32) within 2e-3 of the f32
/// result on the same f16 values, relative to the largest value.
#[test]
fn geglu_matches_the_reference_in_f32_and_f16() {
    let gpu = wgpu();
    let cpu = Device::flex();
    let as4 = |t: Tensor<3>| t.unsqueeze_dim::<4>(0);
    for (i, [b, n, inner]) in [[2, 64, 1280], [1, 7, 33], [3, 1, 8]]
        .into_iter()
        .enumerate()
    {
        let data = TensorData::new(
            values(b * n * 2 * inner, i as u64, 0.0, 8.0),
            [b, n, 2 * inner],
        );
        let x = Tensor::<3>::from_data(data, &gpu);
        let ours = super::geglu(&x).expect("the kernel takes a contiguous f32 tensor on wgpu");
        assert_eq!(ours.dims(), [b, n, inner]);
        let error = relative_error(as4(ours), as4(reference::geglu(x.clone())));
        assert!(error <= 1e-5, "case {i}: f32 error {error}");

        let x16 = x.cast(DType::F16);
        let exact = reference::geglu(x16.clone().cast(DType::F32).to_device(&cpu));
        // Through the public entry point, as the models call it.
        let ours = crate::geglu(x16);
        assert_eq!(ours.dtype(), DType::F16);
        let error = relative_error(as4(ours.to_device(&cpu)), as4(exact));
        assert!(error <= 2e-3, "case {i}: f16 error {error}");
    }
    // A view is read in its logical order; the CPU device is left to the reference.
    let x = Tensor::<3>::from_data(TensorData::new(values(24, 9, 0.0, 1.0), [1, 6, 4]), &gpu);
    let view = x.clone().swap_dims(1, 2);
    let ours = super::geglu(&view).expect("the kernel takes a view on wgpu");
    let error = relative_error(as4(ours), as4(reference::geglu(view)));
    assert!(error <= 1e-5, "a view: error {error}");
    assert!(super::geglu(&x.to_device(&cpu)).is_none());
}

/// The upsampler (nearest 2× + 3×3 convolution, folded into 2×2 kernels on a GPU) against
/// the plain-Burn upscale-then-convolve, on wgpu: f32 within 1e-5; in f16 no further from
/// the f32 result on the same f16 values than Burn's own f16 upscale-then-convolve.
#[test]
fn upsample_conv_matches_the_reference_in_f32_and_f16() {
    use burn::nn::PaddingConfig2d;
    use burn::nn::conv::Conv2dConfig;
    let gpu = wgpu();
    let cpu = Device::flex();
    for (i, [b, c_in, c_out, h, w]) in [[2, 32, 32, 9, 7], [1, 4, 6, 1, 3]].into_iter().enumerate()
    {
        let conv = Conv2dConfig::new([c_in, c_out], [3, 3])
            .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
            .init(&gpu);
        let data = TensorData::new(
            values(b * c_in * h * w, i as u64, 0.0, 4.0),
            [b, c_in, h, w],
        );
        let x = Tensor::<4>::from_data(data, &gpu);
        let size = [2 * h, 2 * w];
        let ours = crate::upsample_conv(x.clone(), &conv, size);
        let error = relative_error(ours, reference::upsample_conv(x.clone(), &conv, size));
        assert!(error <= 1e-5, "case {i}: f32 error {error}");

        let conv16 = conv.clone().map(&mut CastTo(DType::F16));
        let x16 = x.cast(DType::F16);
        let exact = reference::upsample_conv(
            x16.clone().cast(DType::F32).to_device(&cpu),
            &conv16.clone().map(&mut CastTo(DType::F32)).to_device(&cpu),
            size,
        );
        let burn = reference::upsample_conv(x16.clone(), &conv16, size);
        let burn_error = relative_error(burn.to_device(&cpu), exact.clone());
        let ours = crate::upsample_conv(x16, &conv16, size);
        assert_eq!(ours.dtype(), DType::F16);
        let error = relative_error(ours.to_device(&cpu), exact);
        // f16 convolutions round as they sum (lavapipe: 0.0033 here against Burn's 0.0042):
        // no further from the f32 result than Burn's own f16 path, with a quarter to spare.
        assert!(
            error <= 1.25 * burn_error.max(1e-3),
            "case {i}: f16 error {error}, Burn's upscale-then-convolve {burn_error}"
        );
    }
}

/// Attention whose scores are larger than lavapipe's 128 MiB storage-buffer limit (an SD 1.5
/// self-attention over 40×40 latents with the reference tree's 8 heads of 40: 1600 tokens,
/// and 1600² f32 scores × 8 heads × the CFG batch of 2 are 164 MB) runs only where Burn's
/// flash attention (autotune) runs, and gives the CPU's values: f32 within 1e-5.
#[test]
fn attention_too_large_to_materialise_runs_on_wgpu() {
    let (gpu, cpu) = (wgpu(), Device::flex());
    let [b, h, n, d] = [2, 8, 1600, 40];
    assert!(b * h * n * n * 4 > 128 << 20, "the scores exceed 128 MiB");
    let tensor = |seed: u64| {
        let data = TensorData::new(values(b * h * n * d, seed, 0.0, 2.0), [b, h, n, d]);
        Tensor::<4>::from_data(data, &gpu)
    };
    let (q, k, v) = (tensor(4), tensor(5), tensor(6));
    let on_cpu = |t: &Tensor<4>| t.clone().to_device(&cpu);
    let exact = crate::attention(on_cpu(&q), on_cpu(&k), on_cpu(&v));
    let ours = crate::attention(q, k, v);
    let error = relative_error(ours.to_device(&cpu), exact);
    assert!(error <= 1e-5, "f32 error {error}");
}

/// Attention with the VAE's one 512-wide head (sliced, softmax in f32) on wgpu against Burn's
/// on the CPU: f32 within 1e-5; f16 inputs within 2e-3 of the f32 result on the same values.
#[test]
fn wide_attention_matches_the_reference_in_f32_and_f16() {
    let gpu = wgpu();
    let cpu = Device::flex();
    let tensor = |seed: u64, n: usize| {
        let data = TensorData::new(values(2 * n * 512, seed, 0.0, 2.0), [2, 1, n, 512]);
        Tensor::<4>::from_data(data, &gpu)
    };
    let (q, k, v) = (tensor(1, 70), tensor(2, 70), tensor(3, 70));
    let on_cpu = |t: &Tensor<4>| t.clone().cast(DType::F32).to_device(&cpu);
    let exact = reference::attention(on_cpu(&q), on_cpu(&k), on_cpu(&v));
    let ours = crate::attention(q.clone(), k.clone(), v.clone());
    let error = relative_error(ours.to_device(&cpu), exact);
    assert!(error <= 1e-5, "f32 error {error}");

    let half = |t: Tensor<4>| t.cast(DType::F16);
    let (q, k, v) = (half(q), half(k), half(v));
    let exact = reference::attention(on_cpu(&q), on_cpu(&k), on_cpu(&v));
    let ours = crate::attention(q, k, v);
    assert_eq!(ours.dtype(), DType::F16);
    let error = relative_error(ours.to_device(&cpu), exact);
    assert!(error <= 2e-3, "f16 error {error}");

    assert!(crate::attention_path(&gpu, 512).contains("wide_attention"));
    assert!(crate::attention_path(&gpu, 64).contains("Burn's"));
    assert!(crate::attention_path(&cpu, 512).contains("CPU"));
}

/// Attention padded to NVIDIA-like tiles (SD 1.5's 40-wide heads to 48, 70 queries to 96)
/// gives the unpadded result on wgpu, in f32 and f16. Lavapipe has no matrix units, so the
/// padding is forced here; on such a device `attention` pads by itself (`matrix_tiles`).
#[test]
fn padded_attention_matches_the_reference_in_f32_and_f16() {
    use crate::padded_attention::{MatrixTiles, padded_attention};
    let gpu = wgpu();
    let cpu = Device::flex();
    let tensor = |seed: u64, n: usize| {
        let data = TensorData::new(values(2 * 3 * n * 40, seed, 0.0, 2.0), [2, 3, n, 40]);
        Tensor::<4>::from_data(data, &gpu)
    };
    let (q, k, v) = (tensor(4, 70), tensor(5, 77), tensor(6, 77));
    let tiles = MatrixTiles::for_instructions([(16, 16, 16), (16, 8, 16)]).expect("tiles");
    assert_eq!(tiles.padded(70, 40, 40), [96, 48, 48]);
    let on_cpu = |t: &Tensor<4>| t.clone().cast(DType::F32).to_device(&cpu);
    let exact = reference::attention(on_cpu(&q), on_cpu(&k), on_cpu(&v));
    let ours = padded_attention(q.clone(), k.clone(), v.clone(), &tiles);
    assert_eq!(ours.dims(), [2, 3, 70, 40]);
    let error = relative_error(ours.to_device(&cpu), exact);
    assert!(error <= 1e-5, "f32 error {error}");

    let half = |t: Tensor<4>| t.cast(DType::F16);
    let (q, k, v) = (half(q), half(k), half(v));
    let exact = reference::attention(on_cpu(&q), on_cpu(&k), on_cpu(&v));
    let ours = padded_attention(q, k, v, &tiles);
    assert_eq!(ours.dtype(), DType::F16);
    let error = relative_error(ours.to_device(&cpu), exact);
    assert!(error <= 2e-3, "f16 error {error}");
    // Lavapipe offers no matrix units: nothing is padded there unasked.
    if crate::gpu::matrix_tiles(&Tensor::<1>::zeros([1], &gpu)).is_none() {
        assert!(!crate::attention_path(&gpu, 40).contains("padded"));
    }
}

/// With `spirv`, every kernel here, Burn's included, is compiled to SPIR-V on a Vulkan
/// adapter: cubecl 0.11.3 emitted invalid SPIR-V for shared memory on drivers without explicit
/// workgroup layouts (lavapipe crashed in Burn's first matrix product; `vendor/cubecl-spirv`).
#[test]
fn kernels_are_compiled_to_spirv_on_vulkan() {
    let gpu = wgpu();
    let language = crate::gpu::shader_language(&gpu);
    // On Linux wgpu computes through Vulkan (test.sh installs lavapipe where there is none).
    let vulkan = cfg!(target_os = "linux");
    let expected = if vulkan && cfg!(feature = "spirv") {
        "spirv"
    } else {
        "wgsl"
    };
    assert_eq!(language, Some(expected));
    assert_eq!(crate::gpu::shader_language(&Device::flex()), None);
    // A matrix product with shared memory: the kernel the unpatched compiler broke.
    let a = Tensor::<2>::from_data(
        TensorData::new(values(64 * 96, 1, 0.0, 2.0), [64, 96]),
        &gpu,
    );
    let b = Tensor::<2>::from_data(
        TensorData::new(values(96 * 80, 2, 0.0, 2.0), [96, 80]),
        &gpu,
    );
    let ours = a.clone().matmul(b.clone()).to_device(&Device::flex());
    let exact = a
        .to_device(&Device::flex())
        .matmul(b.to_device(&Device::flex()));
    let error = relative_error(ours.reshape([1, 1, 64, 80]), exact.reshape([1, 1, 64, 80]));
    assert!(error <= 1e-5, "error {error}");
}

/// Casts every float parameter of a module.
pub(crate) struct CastTo(pub(crate) DType);

impl burn::module::ModuleMapper for CastTo {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let dtype = self.0;
        param.map(|t| t.cast(dtype))
    }
}

/// No Vulkan driver offers matrix units for f32 (so f32 convolutions never wait for Burn's
/// implicit GEMM); `tests/gpu/matrix_units.sh` sets `EMBER_EXPECT_MATRIX_UNITS`, and there the
/// driver must offer them for f16, or that pass would run nothing the first one did not.
#[test]
fn matrix_units_are_found_for_half_precision_only() {
    let gpu = wgpu();
    let probe = Tensor::<1>::zeros([1], &gpu);
    assert!(!crate::gpu::has_matrix_units_for(&probe));
    assert!(!crate::gpu::has_matrix_units_for(
        &probe.clone().to_device(&Device::flex())
    ));
    let f16 = probe.cast(DType::F16);
    let expected = std::env::var_os("EMBER_EXPECT_MATRIX_UNITS").is_some();
    if expected {
        assert!(
            crate::gpu::has_matrix_units_for(&f16),
            "no matrix units for f16"
        );
        assert!(crate::gpu::matrix_tiles(&f16).is_some());
    }
}
