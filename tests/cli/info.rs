//! `ember info`: model families and layouts of every reference model, and image metadata.

use ember_tests::{inpainting_folder, reference};

use crate::{arg, ember};

fn info(path: &std::path::Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = ember(dir.path(), &["info", &arg(path)]);
    assert!(
        out.status.success(),
        "ember info {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn info_names_the_family_and_layout_of_every_model() {
    let inpaint = inpainting_folder();
    for (path, family, layout) in [
        (
            reference("sd15/checkpoint.safetensors"),
            "SD 1.x",
            "single file (safetensors)",
        ),
        (
            reference("sd15/pipeline"),
            "SD 1.x",
            "diffusers folder (StableDiffusionPipeline)",
        ),
        (
            inpaint.path().to_path_buf(),
            "SD 1.x inpainting",
            "diffusers folder",
        ),
        (
            reference("sd2v/pipeline"),
            "SD 2.x v-prediction",
            "diffusers folder",
        ),
        (
            reference("sd2v/checkpoint.safetensors"),
            "SD 2.x",
            "single file",
        ),
        (
            reference("sdxl/refiner"),
            "SDXL refiner",
            "diffusers folder (StableDiffusionXLImg2ImgPipeline)",
        ),
        (
            reference("sdxl/refiner_checkpoint.safetensors"),
            "SDXL refiner",
            "single file",
        ),
        (
            reference("sdxl/checkpoint.safetensors"),
            "SDXL",
            "single file",
        ),
        (
            reference("sdxl/pipeline"),
            "SDXL",
            "diffusers folder (StableDiffusionXLPipeline)",
        ),
        (
            reference("sd15/lora/lora_kohya.safetensors"),
            "not a full model: a LoRA",
            "single file",
        ),
    ] {
        let text = info(&path);
        let line = |key: &str| {
            text.lines()
                .find(|l| l.starts_with(key))
                .unwrap_or_default()
                .to_string()
        };
        assert!(
            line("family:").contains(family),
            "{}: {text}",
            path.display()
        );
        assert!(
            line("layout:").contains(layout),
            "{}: {text}",
            path.display()
        );
    }
}

#[test]
fn info_reads_generation_parameters_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.png");
    let model = arg(&reference("sd15/pipeline"));
    let made = ember(
        dir.path(),
        &[
            "generate",
            "--model",
            &model,
            "--prompt",
            "a test, with: punctuation",
            "--seed",
            "7",
            "--steps",
            "2",
            "--out",
            &arg(&out),
        ],
    );
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let text = info(&out);
    assert!(
        text.contains("prompt:   a test, with: punctuation"),
        "{text}"
    );
    assert!(text.contains("Seed: 7"), "{text}");
    assert!(text.contains("Steps: 2"), "{text}");
    // The folder's own scheduler: its own sigmas, which A1111 would not read from
    // "Automatic" (its sampler's default schedule).
    assert!(text.contains("Diffusers scheduler: "), "{text}");
    assert!(!text.contains("Schedule type: Automatic"), "{text}");
}

#[test]
fn info_reads_the_settings_of_jpeg_and_webp_images() {
    let exif = ember_tests::extra("exif");
    let text = info(&exif.join("a1111.jpg"));
    assert!(text.contains("format:   A1111 parameters"), "{text}");
    assert!(text.contains("Seed: 1234"), "{text}");
    let text = info(&exif.join("comfyui.webp"));
    assert!(text.contains("format: ComfyUI workflow"), "{text}");
    let text = info(&exif.join("plain.jpg"));
    assert!(text.contains("no generation parameters found"), "{text}");
}

#[test]
fn generate_writes_jpeg_and_webp_batches_with_their_settings() {
    let dir = tempfile::tempdir().unwrap();
    let model = arg(&reference("sd15/pipeline"));
    for (name, made) in [
        ("x.jpg", ["x-0.jpg", "x-1.jpg"]),
        ("y.webp", ["y-0.webp", "y-1.webp"]),
    ] {
        let out = dir.path().join(name);
        let run = ember(
            dir.path(),
            &[
                "generate",
                "--model",
                &model,
                "--prompt",
                "a kite",
                "--seed",
                "9",
                "--steps",
                "1",
                "--batch",
                "2",
                "--jpeg-quality",
                "95",
                "--out",
                &arg(&out),
            ],
        );
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        for (i, file) in made.iter().enumerate() {
            let text = info(&dir.path().join(file));
            assert!(text.contains("prompt:   a kite"), "{file}: {text}");
            assert!(text.contains(&format!("Seed: {}", 9 + i)), "{file}: {text}");
        }
    }
}
