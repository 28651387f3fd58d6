//! `ember generate --hires-*` and `ember upscale`: the hires pass of image i is exactly
//! `ember generate --init-image` (seed + i, `--exact-steps`) on the enlarged first pass, for
//! Lanczos and for an ESRGAN model; latent hires fixes write A1111's fields; bad settings
//! and bad upscaler files fail with one line and no file.

use std::path::Path;

use ember_tests::{read_png_rgb, reference};
use inference::metadata::Parameters;

use crate::{arg, ember};

/// A small txt2img on the reference SD 1.5 folder; `extra` flags appended.
pub(crate) fn generate(dir: &Path, out: &str, steps: &str, extra: &[&str]) -> std::process::Output {
    let model = arg(&reference("sd15/pipeline"));
    let mut args = vec![
        "generate",
        "--model",
        &model,
        "--prompt",
        "a red fox in the snow",
        "--steps",
        steps,
        "--seed",
        "77",
        "--cfg",
        "5",
        "--sampler",
        "euler",
        "--schedule",
        "normal",
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--out", out]);
    ember(dir, &args)
}

pub(crate) fn ok(output: &std::process::Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

pub(crate) fn parameters(path: &Path) -> Parameters {
    let chunks = inference::imaging::read_png_text(path).unwrap();
    let text = &chunks.iter().find(|(k, _)| k == "parameters").unwrap().1;
    Parameters::parse(text)
}

#[test]
fn a_lanczos_hires_pass_is_img2img_on_the_enlarged_first_pass() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let size = ["--width", "32", "--height", "48"];
    let hires = [
        "--hires-scale",
        "2",
        "--hires-upscaler",
        "Lanczos",
        "--hires-steps",
        "3",
        "--hires-strength",
        "0.55",
    ];
    ok(
        &generate(d, "hires.png", "4", &[&size[..], &hires[..]].concat()),
        "hires",
    );
    ok(&generate(d, "first.png", "4", &size), "first pass");
    // The same first pass, enlarged by the init image's Lanczos resize, denoised again.
    let second = [
        "--init-image",
        "first.png",
        "--width",
        "64",
        "--height",
        "96",
        "--resize-mode",
        "resize",
        "--strength",
        "0.55",
        "--exact-steps",
    ];
    ok(&generate(d, "second.png", "3", &second), "img2img");
    let (w, h, hires_pixels) = read_png_rgb(&d.join("hires.png"));
    assert_eq!((w, h), (64, 96));
    assert_eq!(hires_pixels, read_png_rgb(&d.join("second.png")).2);

    let p = parameters(&d.join("hires.png"));
    assert_eq!(
        p.get("Size"),
        Some("32x48"),
        "A1111 writes the first pass's size"
    );
    assert_eq!(p.get("Hires upscale"), Some("2"));
    assert_eq!(p.get("Hires steps"), Some("3"));
    assert_eq!(p.get("Hires upscaler"), Some("Lanczos"));
    assert_eq!(p.get("Denoising strength"), Some("0.55"));
}

#[test]
fn an_esrgan_hires_pass_is_img2img_on_ember_upscale_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let esrgan = arg(&reference("upscale/esrgan_x4_tiny.pth"));
    let size = ["--width", "32", "--height", "32"];
    let hires = [
        "--hires-scale",
        "2",
        "--hires-upscaler",
        &esrgan,
        "--hires-strength",
        "0.5",
    ];
    ok(
        &generate(d, "hires.png", "4", &[&size[..], &hires[..]].concat()),
        "hires",
    );
    ok(&generate(d, "first.png", "4", &size), "first pass");
    // The x4 model, then Lanczos down to 2x: what `ember upscale --scale 2` makes.
    let up = ember(
        d,
        &[
            "upscale",
            "first.png",
            "--model",
            &esrgan,
            "--scale",
            "2",
            "--out",
            "up.png",
        ],
    );
    ok(&up, "upscale");
    let second = [
        "--init-image",
        "up.png",
        "--strength",
        "0.5",
        "--exact-steps",
    ];
    ok(&generate(d, "second.png", "4", &second), "img2img");
    let (w, h, hires_pixels) = read_png_rgb(&d.join("hires.png"));
    assert_eq!((w, h), (64, 64));
    assert_eq!(hires_pixels, read_png_rgb(&d.join("second.png")).2);
    let p = parameters(&d.join("hires.png"));
    assert_eq!(p.get("Hires upscaler"), Some("esrgan_x4_tiny"));
    assert_eq!(
        p.get("Hires steps"),
        None,
        "0 = the first pass's steps, not written"
    );

    // `ember upscale` keeps the source's parameters and adds A1111's `extras` line.
    let chunks = inference::imaging::read_png_text(&d.join("up.png")).unwrap();
    let extras = &chunks.iter().find(|(k, _)| k == "extras").unwrap().1;
    assert_eq!(
        extras,
        "Postprocess upscale by: 2, Postprocess upscaler: esrgan_x4_tiny"
    );
    assert!(chunks.iter().any(|(k, _)| k == "parameters"));
}

#[test]
fn a_latent_hires_fix_runs_every_image_of_a_batch_at_the_larger_size() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let flags = [
        "--width",
        "32",
        "--height",
        "32",
        "--batch",
        "2",
        "--hires-size",
        "48x40",
        "--hires-upscaler",
        "Latent (bicubic antialiased)",
    ];
    ok(&generate(d, "latent.png", "4", &flags), "latent hires");
    for (i, seed) in [(0, "77"), (1, "78")] {
        let path = d.join(format!("latent-{i}.png"));
        let (w, h, _) = read_png_rgb(&path);
        // 32x32 to cover 48x40: 48x48, the centre 48x40 kept.
        assert_eq!((w, h), (48, 40));
        let p = parameters(&path);
        assert_eq!(p.get("Seed"), Some(seed));
        assert_eq!(p.get("Hires resize"), Some("48x40"));
        assert_eq!(
            p.get("Hires upscaler"),
            Some("Latent (bicubic antialiased)")
        );
        assert_eq!(p.get("Denoising strength"), Some("0.7"));
    }
}

#[test]
fn bad_hires_and_upscale_settings_fail_with_one_line_and_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lora = arg(&reference("sd15/lora/lora_kohya.safetensors"));
    let cases: [(&[&str], &str); 6] = [
        (&["--hires-scale", "0"], "between 1 and 4"),
        (&["--hires-scale", "100"], "between 1 and 4"),
        (
            &["--hires-upscaler", "4x-Imaginary"],
            "unknown hires upscaler",
        ),
        (&["--hires-upscaler", &lora], "not an ESRGAN upscaler"),
        (&["--hires-strength", "0"], "strength"),
        (&["--hires-size", "big"], "WxH"),
    ];
    for (flags, expected) in cases {
        let output = generate(d, "bad.png", "4", flags);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{flags:?} succeeded");
        assert!(
            stderr.starts_with("error:") && stderr.contains(expected),
            "{flags:?}: {stderr}"
        );
        assert!(!d.join("bad.png").exists());
    }
    let image = arg(&reference("sd15/controlnet/canny_input.png"));
    let esrgan = arg(&reference("upscale/esrgan_x2_tiny.safetensors"));
    for (flags, expected) in [
        (vec!["--model", &lora], "not an ESRGAN upscaler"),
        (
            vec!["--model", &esrgan, "--scale", "0.5"],
            "between 1 and 8",
        ),
        (
            vec!["--model", &esrgan, "--scale", "2", "--tile", "8"],
            "at least 16",
        ),
    ] {
        let args = [&["upscale", &image][..], &flags[..], &["--out", "bad.png"]].concat();
        let output = ember(d, &args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains(expected),
            "{flags:?}: {stderr}"
        );
        assert!(!d.join("bad.png").exists());
    }
}

/// The second pass's own checks against the model (`hires_plan`, which runs before the first
/// pass) refuse a second pass the first pass's checks let through: here an exact schedule
/// (`steps / strength` steps) longer than the model's scheduler allows.
#[test]
fn a_second_pass_the_scheduler_refuses_fails_before_the_first_pass() {
    let dir = tempfile::tempdir().unwrap();
    let scheduler = reference("sd15/pipeline/scheduler/scheduler_config.json");
    let trained =
        ember_tests::json("sd15/pipeline/scheduler/scheduler_config.json")["num_train_timesteps"]
            .as_u64()
            .expect("the scheduler's training steps");
    // Four steps at a strength that asks for twice the training steps.
    let strength = format!("{}", 4.0 / (2.0 * trained as f64));
    let output = ember(
        dir.path(),
        &[
            "generate",
            "--model",
            &arg(&reference("sd15/pipeline")),
            "--prompt",
            "a fox",
            "--steps",
            "4",
            "--scheduler-config",
            &arg(&scheduler),
            "--hires-scale",
            "1.5",
            "--hires-strength",
            &strength,
            "--out",
            "bad.png",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("second pass") && stderr.contains("steps"),
        "{stderr}"
    );
    assert!(!dir.path().join("bad.png").exists());
}

#[test]
fn a_tiny_hires_strength_is_refused_before_the_first_pass() {
    let dir = tempfile::tempdir().unwrap();
    let output = generate(dir.path(), "bad.png", "4", &["--hires-strength", "0.0001"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("raise the strength"),
        "{stderr}"
    );
    assert!(!dir.path().join("bad.png").exists());
}

/// SDXL with its refiner and the refiner's aesthetic scores, then a hires pass: the scores
/// condition the refiner of the first pass, and the second pass (the base model alone)
/// runs without them instead of failing after the first pass.
#[test]
fn a_refined_sdxl_image_takes_a_hires_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (model, refiner) = (
        arg(&reference("sdxl/pipeline")),
        arg(&reference("sdxl/refiner")),
    );
    let output = ember(
        dir.path(),
        &[
            "generate",
            "--model",
            &model,
            "--refiner",
            &refiner,
            "--aesthetic-score",
            "7",
            "--prompt",
            "a lighthouse",
            "--steps",
            "2",
            "--width",
            "64",
            "--height",
            "64",
            "--hires-scale",
            "1.5",
            "--hires-upscaler",
            "latent",
            "--out",
            "hires.png",
        ],
    );
    ok(&output, "refiner, aesthetic score and hires fix");
    let (w, h, _) = read_png_rgb(&dir.path().join("hires.png"));
    assert_eq!((w, h), (96, 96), "the second pass's size");
}
