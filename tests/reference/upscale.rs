//! ESRGAN / Real-ESRGAN upscalers against `upscale/` (RRDBNet in the old and new key layouts,
//! `.pth` and `.safetensors`, x4 and x2 with pixel unshuffle), their tiled runner, and the
//! latent resampling modes against torch's `interpolate` (`tests/extra/upscale`).

use std::ops::ControlFlow;
use std::path::Path;

use ember_tests::{Fixtures, assert_close, json, reference};
use inference::device::{tensor_from_vec, tensor_to_vec};
use inference::upscale::resample::{InterpolateMode, interpolate};
use inference::upscale::rrdbnet::pixel_unshuffle;
use inference::upscale::tiles::{Planar, run_tiled};
use inference::upscale::{ChannelOrder, UpscaleOptions, load, upscale};

/// The reference README's tolerance for upscaler outputs and activations (abs).
const TOL: f64 = 1e-5;

fn cpu() -> burn::tensor::Device {
    inference::device::DeviceKind::Cpu.device().unwrap()
}

fn reversed_channels(planar: &[f32]) -> Vec<f32> {
    let n = planar.len() / 3;
    planar.chunks_exact(n).rev().flatten().copied().collect()
}

#[test]
fn every_file_of_every_model_reproduces_the_goldens() {
    let meta = json("upscale/upscale.json");
    let golden = Fixtures::load("upscale/golden.safetensors");
    let device = cpu();
    for (tag, model) in meta["models"].as_object().unwrap() {
        let shape: Vec<usize> = model["input_shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let (h, w) = (shape[2], shape[3]);
        let input = golden.get(&format!("{tag}_input")).f32();
        let scale = model["scale"].as_u64().unwrap() as usize;
        for file in model["files"].as_array().unwrap() {
            let path = reference(&format!("upscale/{}", file.as_str().unwrap()));
            let net = load(&path, &device).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let what = |s: &str| format!("{tag} {}: {s}", path.display());
            assert_eq!(net.scale(), scale, "{}", what("scale"));
            assert_eq!(
                net.config.features as u64,
                model["num_feat"].as_u64().unwrap()
            );
            assert_eq!(
                net.config.blocks as u64,
                model["num_block"].as_u64().unwrap()
            );
            assert_eq!(
                net.config.growth as u64,
                model["num_grow_ch"].as_u64().unwrap()
            );
            assert_eq!(
                net.config.in_channels as u64,
                model["conv_first_in_channels"].as_u64().unwrap()
            );

            let f = net.config.unshuffle;
            let run = |planar: Vec<f32>| {
                let x = if f > 1 {
                    pixel_unshuffle(&planar, 3, (w, h), f)
                } else {
                    planar
                };
                let dims = [1, 3 * f * f, h / f, w / f];
                net.network
                    .forward_recorded(tensor_from_vec(x, dims, &device))
            };
            if f > 1 {
                let unshuffled = pixel_unshuffle(&input, 3, (w, h), f);
                let expected = golden.get(&format!("{tag}_input_unshuffled")).f64();
                assert_close(&what("pixel unshuffle"), &unshuffled, &expected, 0.0, 0.0);
            }
            let acts = run(input.clone());
            for (name, t) in [
                ("act_conv_first", acts.conv_first),
                ("act_body", acts.body),
                ("act_conv_body", acts.conv_body),
                ("output", acts.output),
            ] {
                let expected = golden.get(&format!("{tag}_{name}"));
                assert_eq!(t.dims().to_vec(), expected.shape, "{}", what(name));
                assert_close(&what(name), &tensor_to_vec(t), &expected.f64(), TOL, 0.0);
            }
            // A1111 feeds BGR and flips the result back.
            let bgr = reversed_channels(&tensor_to_vec(run(reversed_channels(&input)).output));
            let expected = golden.get(&format!("{tag}_output_bgr_roundtrip")).f64();
            assert_close(&what("BGR round trip"), &bgr, &expected, TOL, 0.0);

            // The tiled runner with one tile covering the image is the plain forward.
            let planar = Planar {
                width: w,
                height: h,
                data: input.clone(),
            };
            let whole = run_tiled(&net, &planar, (256, 32), &mut |_, _| {
                ControlFlow::Continue(())
            })
            .unwrap();
            let expected = golden.get(&format!("{tag}_output")).f64();
            assert_close(&what("one tile"), &whole.data, &expected, TOL, 0.0);
        }
    }
}

#[test]
fn tiles_blend_without_seams() {
    let golden = Fixtures::load("upscale/golden.safetensors");
    let net = load(&reference("upscale/esrgan_x4_tiny.safetensors"), &cpu()).unwrap();
    let shape = &golden.get("x4_input").shape;
    let planar = Planar {
        width: shape[3],
        height: shape[2],
        data: golden.get("x4_input").f32(),
    };
    let expected = golden.get("x4_output").f64();
    let mut tiles_seen = 0;
    // 16-pixel tiles overlapping by 6 over the 32 x 24 input: columns at 0, 10, 16, rows at
    // 0, 8 (A1111's starts: every stride of 10, then flush with the far edge).
    let tiled = run_tiled(&net, &planar, (16, 6), &mut |done, total| {
        tiles_seen = total;
        assert!(done <= total);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(tiles_seen, 6);
    assert_eq!((tiled.width, tiled.height), (128, 96));
    // Each tile sees less context than the whole image, so values near tile borders differ
    // (this random network's receptive field spans most of a tile). Blending across the
    // overlap must keep that small, and smaller than butting tiles together.
    let (max, mean) = distance(&tiled.data, &expected);
    let butted = run_tiled(
        &net,
        &planar,
        (16, 0),
        &mut |_, _| ControlFlow::Continue(()),
    )
    .unwrap();
    let (butted_max, butted_mean) = distance(&butted.data, &expected);
    eprintln!(
        "tiled vs whole: max {max}, mean {mean}; without overlap {butted_max}, {butted_mean}"
    );
    assert!(
        mean < 0.01 && max < 0.1,
        "tiled vs whole: max {max}, mean {mean}"
    );
    assert!(mean < butted_mean && max < butted_max, "the overlap helps");
}

/// Largest and mean absolute difference.
fn distance(ours: &[f32], expected: &[f64]) -> (f64, f64) {
    let diffs: Vec<f64> = ours
        .iter()
        .zip(expected)
        .map(|(a, b)| (f64::from(*a) - b).abs())
        .collect();
    let max = diffs.iter().copied().fold(0.0, f64::max);
    (max, diffs.iter().sum::<f64>() / diffs.len() as f64)
}

#[test]
fn an_image_is_upscaled_to_the_requested_factor() {
    let net = load(&reference("upscale/esrgan_x2_tiny.pth"), &cpu()).unwrap();
    // Odd sizes: the x2 model unshuffles by 2, so the image is padded and the result cropped.
    let image = inference::imaging::ImageRgb8 {
        width: 23,
        height: 17,
        pixels: (0..23 * 17 * 3).map(|i| (i * 37 % 256) as u8).collect(),
    };
    let native = upscale(&net, &image, &UpscaleOptions::default(), &mut |_, _| {
        ControlFlow::Continue(())
    })
    .unwrap();
    // A1111's sizes are whole multiples of 8: 46 x 34 becomes 40 x 32.
    assert_eq!((native.width, native.height), (40, 32));
    // 3x with a 2x model: two passes (92 x 68), then Lanczos down to 69 // 8 * 8 x 51 // 8 * 8.
    let options = UpscaleOptions {
        scale: Some(3.0),
        channel_order: ChannelOrder::Bgr,
        ..UpscaleOptions::default()
    };
    let mut tiles = 0;
    let three = upscale(&net, &image, &options, &mut |_, _| {
        tiles += 1;
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!((three.width, three.height), (64, 48));
    assert_eq!(tiles, 2, "one tile per pass");
    // A factor of 1 still runs the model once (a 1x restoration model must), as A1111 does.
    let once = UpscaleOptions {
        scale: Some(1.0),
        ..UpscaleOptions::default()
    };
    let mut passes = 0;
    let same = upscale(&net, &image, &once, &mut |_, _| {
        passes += 1;
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!((same.width, same.height, passes), (16, 16, 1));
    // Cancelling stops at the next tile.
    let err = upscale(&net, &image, &options, &mut |_, _| ControlFlow::Break(())).unwrap_err();
    assert!(matches!(err, inference::Error::Cancelled), "{err}");
}

#[test]
fn bad_upscaler_files_and_settings_are_refused_clearly() {
    let device = cpu();
    let message = |path: &Path| load(path, &device).err().unwrap().to_string();
    let sd = message(&reference("sd15/checkpoint.safetensors"));
    assert!(
        sd.contains("not an ESRGAN upscaler") && sd.contains("Stable Diffusion"),
        "{sd}"
    );
    let lora = message(&reference("sd15/lora/lora_kohya.safetensors"));
    assert!(lora.contains("not an ESRGAN upscaler"), "{lora}");
    let dir = tempfile::tempdir().unwrap();
    let truncated = dir.path().join("4x-broken.safetensors");
    let bytes = std::fs::read(reference("upscale/esrgan_x4_tiny.safetensors")).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    assert!(
        message(&truncated).contains("truncated"),
        "{}",
        message(&truncated)
    );

    let net = load(&reference("upscale/esrgan_x4_tiny.safetensors"), &device).unwrap();
    let image = inference::imaging::ImageRgb8 {
        width: 3000,
        height: 2000,
        pixels: vec![0; 3000 * 2000 * 3],
    };
    let never = &mut |_: usize, _: usize| -> ControlFlow<()> { panic!("no tile may run") };
    // 12000 x 8000 = 96 megapixels: over the limit before any work.
    let big = upscale(&net, &image, &UpscaleOptions::default(), never).unwrap_err();
    assert!(big.to_string().contains("at most"), "{big}");
    for scale in [0.0, 0.5, 100.0, f32::NAN] {
        let options = UpscaleOptions {
            scale: Some(scale),
            ..UpscaleOptions::default()
        };
        let e = upscale(&net, &image, &options, never).unwrap_err();
        assert!(e.to_string().contains("between 1 and 8"), "{scale}: {e}");
    }
}

#[test]
fn latent_resampling_matches_torch_interpolate() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("extra/upscale");
    let cases: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("latent_interpolate.json")).unwrap())
            .unwrap();
    let tensors = Fixtures::load_path(&dir.join("latent_interpolate.safetensors"));
    let mut seen = 0;
    for case in cases["cases"].as_array().unwrap() {
        let mode = match (
            case["mode"].as_str().unwrap(),
            case["antialias"].as_bool().unwrap(),
        ) {
            ("nearest", false) => InterpolateMode::Nearest,
            ("nearest-exact", false) => InterpolateMode::NearestExact,
            ("bilinear", false) => InterpolateMode::Bilinear,
            ("bilinear", true) => InterpolateMode::BilinearAntialias,
            ("bicubic", false) => InterpolateMode::Bicubic,
            ("bicubic", true) => InterpolateMode::BicubicAntialias,
            other => panic!("unexpected case {other:?}"),
        };
        let size = &case["size"];
        let (h2, w2) = (
            size[0].as_u64().unwrap() as usize,
            size[1].as_u64().unwrap() as usize,
        );
        let input = tensors.get(case["input"].as_str().unwrap());
        let [_, c, h, w] = input.shape[..] else {
            panic!("input is 4-D")
        };
        let ours = interpolate(&input.f32(), (c, h, w), (h2, w2), mode).unwrap();
        let name = case["tensor"].as_str().unwrap();
        // float32 arithmetic in a different association order: a few ulps.
        assert_close(name, &ours, &tensors.get(name).f64(), 1e-5, 1e-6);
        seen += 1;
    }
    assert_eq!(seen, 36);
}
