//! TAESD preview decoders against diffusers' `AutoencoderTiny` (`tests/extra/taesd`, made by
//! `tests/extra/make_taesd.py`): every file layout, the family's file found in a models
//! folder, bad files refused with a message, and the engine's previews drawn with it.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use burn::tensor::Device;
use ember_tests::{Fixtures, assert_close, extra, reference, write_edited_file};
use inference::device::{tensor_from_vec, tensor_to_vec};
use inference::family::Family;
use inference::preview::taesd_load::{check_latents, find, load};
use inference::preview::{PreviewMethod, taesd_preview};
use inference::worker::{BurnEngine, Engine, ModelRole};

/// diffusers' decode against ours, in image units ([-1, 1]); both are float32 on the CPU.
const TOL: f64 = 1e-5;

fn golden() -> Fixtures {
    Fixtures::load_path(&extra("taesd/golden.safetensors"))
}

/// Our decode of the golden latents on `device`, as diffusers returns it (`2x - 1`).
fn decode_on(path: &Path, device: &Device) -> (Vec<f32>, Vec<usize>) {
    let g = golden();
    let latents = g.get("latents");
    let taesd = load(path, device).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dims: [usize; 4] = latents.shape.clone().try_into().unwrap();
    let out = taesd
        .decoder
        .forward(tensor_from_vec(latents.f32(), dims, device));
    let shape = out.dims().to_vec();
    let values = tensor_to_vec(out).iter().map(|v| v * 2.0 - 1.0).collect();
    (values, shape)
}

#[test]
fn every_layout_decodes_as_diffusers_does() {
    let g = golden();
    for (file, tag) in [
        ("taesd/taesd", "taesd"),
        ("taesd/taesd_decoder.pth", "taesd"),
        ("taesd/taesdxl_decoder.safetensors", "taesdxl"),
    ] {
        let path = extra(file);
        let taesd = load(&path, &Device::flex()).unwrap();
        assert_eq!(taesd.config.latent_channels, 4, "{file}");
        assert_eq!(
            taesd.config.blocks,
            [3, 3, 3, 1],
            "{file}: diffusers' num_decoder_blocks"
        );
        assert_eq!(taesd.config.scale(), 8, "{file}");
        let (ours, shape) = decode_on(&path, &Device::flex());
        let expected = g.get(tag);
        assert_eq!(shape, expected.shape, "{file}");
        assert_close(file, &ours, &expected.f64(), TOL, TOL);
    }
}

/// On the wgpu backend (lavapipe in CI), as the app runs it beside a GPU model: the same
/// decode within float32 rounding of another order of sums.
#[test]
fn the_decoder_runs_on_wgpu_as_diffusers_does() {
    let path = extra("taesd/taesd_decoder.pth");
    let (ours, shape) = decode_on(&path, &crate::gpu::wgpu());
    let expected = golden().get("taesd").clone();
    assert_eq!(shape, expected.shape);
    assert_close("TAESD on wgpu", &ours, &expected.f64(), 1e-4, 1e-4);
}

#[test]
fn the_preview_is_the_first_image_in_eight_bit_levels() {
    let g = golden();
    let latents = g.get("latents");
    let path = extra("taesd/taesd_decoder.pth");
    let taesd = load(&path, &Device::flex()).unwrap();
    let dims: [usize; 4] = latents.shape.clone().try_into().unwrap();
    let image = taesd_preview(
        &taesd.decoder,
        &tensor_from_vec(latents.f32(), dims, &Device::flex()),
    );
    let expected = g.get("taesd");
    let (h, w) = (expected.shape[2], expected.shape[3]);
    assert_eq!((image.width as usize, image.height as usize), (w, h));
    // diffusers' first image, [-1, 1] planar, as interleaved levels.
    let planar = expected.f64();
    let mut worst = 0.0f64;
    for y in 0..h {
        for x in 0..w {
            for c in 0..3 {
                let v = ((planar[c * h * w + y * w + x] + 1.0) / 2.0).clamp(0.0, 1.0) * 255.0;
                let ours = f64::from(image.pixels[(y * w + x) * 3 + c]);
                worst = worst.max((ours - v).abs());
            }
        }
    }
    // Rounding to a level, and the decode's own float error at a rounding edge.
    assert!(worst <= 0.51, "preview off by {worst} levels");
}

/// A models folder with A1111's `VAE-taesd` holding `files` copied from `tests/extra/taesd`.
fn models_folder(files: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let taesd = dir.path().join("VAE-taesd");
    std::fs::create_dir(&taesd).unwrap();
    for file in files {
        let src = extra(&format!("taesd/{file}"));
        if src.is_dir() {
            std::fs::create_dir(taesd.join(file)).unwrap();
            for entry in std::fs::read_dir(&src).unwrap() {
                let entry = entry.unwrap();
                std::fs::copy(entry.path(), taesd.join(file).join(entry.file_name())).unwrap();
            }
        } else {
            std::fs::copy(src, taesd.join(file)).unwrap();
        }
    }
    (dir, taesd)
}

#[test]
fn each_family_finds_its_own_decoder() {
    let (_dir, folder) = models_folder(&["taesd_decoder.pth", "taesdxl_decoder.safetensors"]);
    let dirs = vec![folder.clone()];
    for family in [Family::Sd1, Family::Sd2] {
        assert_eq!(find(&dirs, family), Some(folder.join("taesd_decoder.pth")));
    }
    for family in [Family::Sdxl, Family::SdxlRefiner] {
        assert_eq!(
            find(&dirs, family),
            Some(folder.join("taesdxl_decoder.safetensors"))
        );
    }
    // A diffusers folder counts too; an empty folder finds nothing.
    let (_dir, folder) = models_folder(&["taesd"]);
    assert_eq!(
        find(std::slice::from_ref(&folder), Family::Sd1),
        Some(folder.join("taesd"))
    );
    assert_eq!(find(&[folder], Family::Sdxl), None);
}

#[test]
fn bad_decoder_files_are_refused_with_a_reason() {
    let device = Device::flex();
    let message = |path: &Path| match load(path, &device) {
        Ok(_) => panic!("{} loaded as a TAESD decoder", path.display()),
        Err(e) => e.to_string(),
    };
    // Another network altogether: an ESRGAN upscaler, a Stable Diffusion checkpoint.
    let esrgan = reference("upscale").read_dir().unwrap().find_map(|e| {
        let p = e.unwrap().path();
        (p.extension().is_some_and(|x| x == "pth")).then_some(p)
    });
    for path in esrgan
        .into_iter()
        .chain([reference("sd15/checkpoint.safetensors")])
    {
        let m = message(&path);
        assert!(m.contains("not a TAESD decoder"), "{}: {m}", path.display());
    }
    let dir = tempfile::tempdir().unwrap();
    // Cut short.
    let bytes = std::fs::read(extra("taesd/taesd_decoder.pth")).unwrap();
    let cut = dir.path().join("taesd_decoder.pth");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    message(&cut);
    // A block's convolution missing: named.
    let src = extra("taesd/taesdxl_decoder.safetensors");
    let holed = dir.path().join("holed.safetensors");
    write_edited_file(
        &src,
        &holed,
        |name, _| name != "8.conv.2.weight",
        Vec::new(),
    );
    let m = message(&holed);
    assert!(m.contains("conv2"), "{m}");
    // A whole block missing: the layers' order gives it away.
    let short = dir.path().join("short.safetensors");
    write_edited_file(&src, &short, |name, _| !name.starts_with("8."), Vec::new());
    let m = message(&short);
    assert!(m.contains("not in TAESD's order"), "{m}");
    // NaN weights.
    let nan = dir.path().join("nan.safetensors");
    write_edited_file(
        &src,
        &nan,
        |name, t| {
            if name == "1.weight" {
                t.bytes[..4].copy_from_slice(&f32::NAN.to_le_bytes());
            }
            true
        },
        Vec::new(),
    );
    let m = message(&nan);
    assert!(m.contains("1.weight"), "{m}");
    // A decoder for SD3's 16 latent channels loads, but not for these models' latents.
    let sd3 = load(&extra("taesd/taesd3_decoder.safetensors"), &device).unwrap();
    assert_eq!(sd3.config.latent_channels, 16);
    let m = check_latents(&sd3, Family::Sdxl).unwrap_err().to_string();
    assert!(
        m.contains("16-channel") && m.contains("taesdxl_decoder"),
        "{m}"
    );
}

/// The engine's previews of a generation of the sd15 model, and its warnings.
fn previews(method: PreviewMethod, dirs: Vec<PathBuf>) -> (Vec<(u32, u32)>, Vec<String>) {
    let mut engine = BurnEngine::new(Device::flex(), inference::device::Precision::F32);
    let mut go_on = |_, _| ControlFlow::Continue(());
    engine
        .load(
            &reference("sd15/pipeline"),
            None,
            ModelRole::Main,
            &mut go_on,
        )
        .unwrap();
    let model = inference::weights::load(
        &reference("sd15/pipeline"),
        &inference::weights::LoadOptions::new(Device::flex(), inference::device::Precision::F32),
    )
    .unwrap();
    let mut request = model.request("a red ball", 3);
    request.steps = 3;
    request.preview.method = method;
    request.preview.taesd_dirs = dirs;
    let mut sizes = Vec::new();
    let generation = engine
        .generate(
            &request,
            &mut |p| {
                if let Some(image) = p.preview {
                    sizes.push((image.width, image.height));
                }
                ControlFlow::Continue(())
            },
            &|| false,
        )
        .unwrap();
    (sizes, generation.warnings)
}

#[test]
fn the_engine_draws_previews_with_taesd_when_it_finds_one() {
    let (latent, warnings) = previews(PreviewMethod::LatentColours, Vec::new());
    assert!(warnings.is_empty(), "{warnings:?}");
    let &(w, h) = latent.first().expect("a preview per step");
    let (_dir, folder) = models_folder(&["taesd_decoder.pth"]);
    for method in [PreviewMethod::Auto, PreviewMethod::Taesd] {
        let (sizes, warnings) = previews(method, vec![folder.clone()]);
        assert!(warnings.is_empty(), "{method:?}: {warnings:?}");
        // The first two steps are always drawn (the first decode is no measure of the
        // next's time), later ones as the time share allows.
        assert!(sizes.len() >= 2, "{method:?}: {sizes:?}");
        assert_eq!(sizes.first(), Some(&(8 * w, 8 * h)), "{method:?}");
        assert!(sizes.iter().all(|&s| s == (8 * w, 8 * h)), "{sizes:?}");
    }
    // None found: Auto quietly draws the latent colours, TAESD says why.
    let (sizes, warnings) = previews(PreviewMethod::Auto, Vec::new());
    assert_eq!(sizes, latent);
    assert!(warnings.is_empty(), "{warnings:?}");
    let (sizes, warnings) = previews(PreviewMethod::Taesd, Vec::new());
    assert_eq!(sizes, latent);
    assert!(
        warnings.len() == 1 && warnings[0].contains("taesd_decoder.pth"),
        "{warnings:?}"
    );
    // A broken decoder costs the previews, never the image.
    let broken = tempfile::tempdir().unwrap();
    std::fs::write(
        broken.path().join("taesd_decoder.pth"),
        b"PK\x03\x04 not a zip",
    )
    .unwrap();
    let (sizes, warnings) = previews(PreviewMethod::Auto, vec![broken.path().to_path_buf()]);
    assert_eq!(sizes, latent);
    assert!(
        warnings.len() == 1 && warnings[0].contains("latent colours"),
        "{warnings:?}"
    );
}
