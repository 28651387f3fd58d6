//! Half precision on the CPU: close to the f32 image, and a UNet or VAE that overflows in
//! f16 runs again in f32, says so once, and gives the f32 image.

use burn::tensor::Device;
use ember_tests::{Fixture, pixel_diff, write_edited_checkpoint};
use inference::api::{GenerateRequest, SamplerChoice};
use inference::device::Precision;
use inference::model::Model;
use inference::pipeline::generate;
use inference::pipeline::unet_run::{self, UnetInputs};
use inference::schedule::named::{SamplerName, ScheduleName};
use inference::weights::{LoadOptions, load};

use crate::engine::{model, quiet, request, single_file_options};

#[test]
fn half_precision_stays_close_to_f32() {
    for precision in [Precision::F16, Precision::Bf16] {
        let (full, half) = (model(Precision::F32), model(precision));
        let mut r = request(&full, 3);
        r.sampler = SamplerChoice::Named {
            sampler: SamplerName::Euler,
            schedule: ScheduleName::Normal,
        };
        let a = generate(&full, &r, &mut quiet).unwrap();
        let b = generate(&half, &r, &mut quiet).unwrap();
        let (worst, _) = pixel_diff(&a.images[0].pixels, &b.images[0].pixels);
        let limit = if precision == Precision::F16 { 4 } else { 24 };
        assert!(
            worst <= limit,
            "{precision:?}: differs from f32 by {worst} levels"
        );
    }
}

/// The reference checkpoint with the tensors under `prefixes` scaled ×1e5 (so f16 overflows
/// after them), loaded in f32 and in f16, and an Euler request for it (the folder holding
/// the file lives as long as the returned `TempDir`).
fn hot_checkpoint(prefixes: &[&str]) -> (Model, Model, GenerateRequest, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hot.safetensors");
    let scale_up = |name: &str, t: &mut Fixture| {
        if prefixes.iter().any(|p| name.starts_with(p)) {
            *t = Fixture::from_f32(
                t.shape.clone(),
                &t.f32().iter().map(|v| v * 1e5).collect::<Vec<_>>(),
            );
        }
        true
    };
    write_edited_checkpoint(&path, scale_up, Vec::new());
    let at = |precision| LoadOptions {
        precision,
        ..single_file_options()
    };
    let full = load(&path, &at(Precision::F32)).unwrap();
    let half = load(&path, &at(Precision::F16)).unwrap();
    let mut r = request(&full, 9);
    r.sampler = SamplerChoice::Named {
        sampler: SamplerName::Euler,
        schedule: ScheduleName::Normal,
    };
    (full, half, r, dir)
}

/// A VAE whose first convolutions are scaled so far up that f16 overflows in them (the
/// GroupNorms after them keep the f32 image finite): a half-precision model decodes and
/// encodes again in f32, says so once, and gives the f32 image.
#[test]
fn a_half_precision_vae_that_overflows_runs_again_in_f32() {
    let (full, half, r, _dir) = hot_checkpoint(&[
        "first_stage_model.decoder.conv_in.",
        "first_stage_model.encoder.conv_in.",
    ]);
    // The f16 VAE alone does overflow.
    let z = burn::tensor::Tensor::<4>::ones([1, 4, 8, 8], &Device::flex());
    let raw = half.vae.decode(half.to_network(z));
    assert!(
        !raw.is_finite().all().into_scalar::<bool>(),
        "the edit must overflow f16"
    );

    // A decode stopped by a cancel is a cancel, overflowed or not (a kernel may have left
    // it unfinished), and keeps no f32 copy.
    let z = burn::tensor::Tensor::<4>::ones([1, 4, 8, 8], &Device::flex());
    let stopped = inference::pipeline::vae_run::decode(&half, z, None, &|| true);
    assert!(
        stopped.is_none(),
        "a stopped decode is a cancel, not a failure"
    );
    assert!(
        half.vae_f32.get().is_none(),
        "a stopped decode made an f32 VAE"
    );

    // img2img: the init image is encoded by the f32 copy, and the latents decoded by it.
    let reference_image = generate(&full, &r, &mut quiet).unwrap();
    let mut img2img = r.clone();
    img2img.init_image = Some(reference_image.images[0].clone());
    img2img.strength = 0.6;
    let a = generate(&full, &img2img, &mut quiet).unwrap();
    let b = generate(&half, &img2img, &mut quiet).unwrap();
    let said: Vec<&String> = b.warnings.iter().filter(|w| w.contains("f32")).collect();
    assert_eq!(said.len(), 1, "{:?}", b.warnings);
    let (worst, _) = pixel_diff(&a.images[0].pixels, &b.images[0].pixels);
    assert!(
        worst <= 4,
        "f16 with the f32 VAE differs from f32 by {worst} levels"
    );

    // Said once: the next image uses the f32 VAE straight away.
    let again = generate(&half, &r, &mut quiet).unwrap();
    assert!(
        again.warnings.iter().all(|w| !w.contains("f32")),
        "{:?}",
        again.warnings
    );
    let (worst, _) = pixel_diff(&reference_image.images[0].pixels, &again.images[0].pixels);
    assert!(worst <= 4, "txt2img differs from f32 by {worst} levels");
}

/// A UNet whose input convolution is scaled so far up that f16 overflows in it (the
/// GroupNorms after it keep the f32 UNet finite): a half-precision model runs the step again
/// on an f32 copy of the UNet, keeps it, says so once, and gives the f32 image.
#[test]
fn a_half_precision_unet_that_overflows_runs_again_in_f32() {
    let (full, half, r, _dir) = hot_checkpoint(&["model.diffusion_model.input_blocks.0.0."]);
    // The f16 UNet alone does overflow.
    let (side, channels) = (r.height as usize / 8, full.unet_config.in_channels);
    let x = burn::tensor::Tensor::<4>::ones([1, channels, side, side], &Device::flex());
    let context = half.to_network(burn::tensor::Tensor::<3>::ones(
        [1, 77, full.unet_config.cross_attention_dim],
        &Device::flex(),
    ));
    let checks = std::cell::Cell::new(0);
    let count = || {
        checks.set(checks.get() + 1);
        false
    };
    let raw = half
        .unet
        .forward_interruptible(half.to_network(x), &[500.0], (&context, None), &count)
        .unwrap();
    assert!(
        !raw.is_finite().all().into_scalar::<bool>(),
        "the edit must overflow f16"
    );

    // A call whose cancel came inside a kernel (its output unfinished; the UNet's own checks
    // between blocks all said go on) is a cancel and keeps no f32 copy, overflowed or not:
    // an unfinished output says nothing about overflow.
    let asked = std::cell::Cell::new(0);
    let stopped = UnetInputs {
        timesteps: &[500.0],
        context: &context,
        added: None,
        control: None,
        interrupted: &|| {
            asked.set(asked.get() + 1);
            asked.get() > checks.get()
        },
        wrap: Default::default(),
    };
    let x = burn::tensor::Tensor::<4>::ones([1, channels, side, side], &Device::flex());
    assert!(unet_run::run(&half, x, &stopped).is_none());
    assert_eq!(
        asked.get(),
        checks.get() + 1,
        "asked once after the whole call"
    );
    assert!(
        half.unet_f32.get().is_none(),
        "a stopped call made an f32 UNet"
    );

    let a = generate(&full, &r, &mut quiet).unwrap();
    let b = generate(&half, &r, &mut quiet).unwrap();
    let said: Vec<&String> = b.warnings.iter().filter(|w| w.contains("UNet")).collect();
    assert_eq!(said.len(), 1, "{:?}", b.warnings);
    assert!(half.unet_f32.get().is_some(), "the f32 UNet is kept");
    let (worst, _) = pixel_diff(&a.images[0].pixels, &b.images[0].pixels);
    assert!(
        worst <= 4,
        "f16 with the f32 UNet differs from f32 by {worst} levels"
    );

    // Said once: the next image uses the f32 UNet straight away, and the same seed gives the
    // same image.
    let again = generate(&half, &r, &mut quiet).unwrap();
    assert!(
        again.warnings.iter().all(|w| !w.contains("UNet")),
        "{:?}",
        again.warnings
    );
    assert_eq!(again.images[0].pixels, b.images[0].pixels);
}
