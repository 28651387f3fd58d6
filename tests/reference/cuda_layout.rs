//! On CUDA (the stand-in driver of `tests/cuda_dry_run`: its memory is counted as a
//! driver's, its kernels compute nothing) loaded weights take their own size: cubecl pads
//! each row of a tensor it makes there to 16 bytes or more, which a 3×3 convolution's 3-value
//! rows would more than double in f16 (`inference::weight_layout`).

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;
use ember_tests::cuda_stand_in::StandIn;
use ember_tests::reference;
use inference::device::{DeviceKind, GpuRuntime, Precision, configure_gpu_runtime};
use inference::model::Model;
use inference::weights::{LoadOptions, load};

/// The bytes of every network's weights in the precision each was loaded in.
fn weight_bytes(model: &Model) -> u64 {
    let at = |params: usize, precision: Precision| (params * precision.bytes()) as u64;
    let encoders: usize = model
        .encoders
        .iter()
        .map(|e| e.network().num_params())
        .sum();
    at(encoders, model.precision)
        + at(model.unet.num_params(), model.precision)
        + at(model.vae.num_params(), model.vae_precision)
}

/// How many weight tensors the model's networks hold.
fn weight_count(model: &Model) -> u64 {
    struct Count(u64);
    impl ModuleVisitor for Count {
        fn visit_float<const D: usize>(&mut self, _: &Param<Tensor<D>>) {
            self.0 += 1;
        }
    }
    let mut count = Count(0);
    for encoder in &model.encoders {
        encoder.network().visit(&mut count);
    }
    model.unet.visit(&mut count);
    model.vae.visit(&mut count);
    count.0
}

/// In use on the stand-in after loading, in f32 and f16, and again after the text encoders
/// were parked and brought back: the weights' own bytes, but for the pools rounding each
/// allocation up (at most 512 bytes a weight allowed).
#[test]
fn loaded_weights_take_their_own_size_on_cuda() {
    const CHILD: &str = "EMBER_TEST_CUDA_LAYOUT";
    if std::env::var_os(CHILD).is_none() {
        let stand_in = StandIn::build();
        let name = "cuda_layout::loaded_weights_take_their_own_size_on_cuda";
        ember_tests::run_test_in_child(name, CHILD, |command| {
            stand_in.apply(command);
        });
        return;
    }
    // The stand-in's answers must not reach the tests' shared kernel cache.
    let cache = tempfile::tempdir().unwrap();
    configure_gpu_runtime(&GpuRuntime {
        cache_dir: Some(cache.path().to_path_buf()),
        ..GpuRuntime::default()
    });
    let device = DeviceKind::Cuda(0)
        .device()
        .expect("the stand-in CUDA driver");
    let in_use = || device.memory_pool_usage().map_or(0, |u| u.bytes_in_use);
    for precision in [Precision::F32, Precision::F16] {
        let model = load(
            &reference("sd15/pipeline"),
            &LoadOptions::new(device.clone(), precision),
        )
        .unwrap();
        let (weights, count) = (weight_bytes(&model), weight_count(&model));
        // Padded, these weights took 15.5 MB in f32 and 11.5 MB in f16 (1.15× and 1.70×);
        // unpadded 13.6 and 6.9 MB, about 250 bytes a weight over their size.
        let most = weights + count * 512;
        let held = in_use();
        assert!(
            (weights..=most).contains(&held),
            "{precision}: {held} bytes in use after loading {weights} bytes of weights in {count} tensors"
        );
        for encoder in &model.encoders {
            encoder.park();
        }
        for encoder in &model.encoders {
            encoder.network_on(&device);
        }
        let held = in_use();
        assert!(
            (weights..=most).contains(&held),
            "{precision}: {held} bytes in use after the text encoders came back, for {weights} bytes of weights"
        );
    }
}
