//! `ember generate` with ControlNets: the reference ControlNet run from `--controlnet` and
//! `--control-image`, A1111's `ControlNet 0:` metadata, the Canny preprocessor from the
//! command line, and one-line errors for flags that do not pair up.

use ember_tests::{json, reference};

use crate::reproduce::reproduce;
use crate::{arg, ember};

#[test]
fn cli_reproduces_the_controlnet_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = json("sd15/controlnet/txt2img_controlnet.json");
    let image = reference(&format!(
        "sd15/controlnet/{}",
        run["control_image"].as_str().unwrap()
    ));
    let args = [
        "--model".to_string(),
        arg(&reference("sd15/pipeline")),
        "--controlnet".into(),
        arg(&reference("sd15/controlnet")),
        "--control-image".into(),
        arg(&image),
        "--control-scale".into(),
        run["controlnet_conditioning_scale"].to_string(),
    ];
    let params = reproduce(
        "sd15/controlnet",
        "txt2img_controlnet",
        "cli",
        &run,
        &args,
        dir.path(),
    );
    // A1111's old model hash (the extension's `[hash]`): SHA-256 of the 64 KiB at 1 MiB.
    let weights = std::fs::read(reference(
        "sd15/controlnet/diffusion_pytorch_model.safetensors",
    ))
    .unwrap();
    let slice = &weights[(1 << 20).min(weights.len())..((1 << 20) + (1 << 16)).min(weights.len())];
    let hash = &inference::hashing::sha256_bytes(slice)[..8];
    assert_eq!(
        params.get("ControlNet 0").map(str::to_string),
        Some(format!(
            "Module: none, Model: controlnet [{hash}], Weight: 1.0, Resize Mode: Crop and Resize, \
             Processor Res: 512, Threshold A: 0.5, Threshold B: 0.5, Guidance Start: 0.0, \
             Guidance End: 1.0, Pixel Perfect: False, Control Mode: Balanced"
        ))
    );
}

#[test]
fn cli_runs_a_canny_controlnet_and_refuses_unpaired_flags() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.png");
    let (model, controlnet) = (
        arg(&reference("sd15/pipeline")),
        arg(&reference("sd15/controlnet")),
    );
    let image = arg(&reference("sd15/controlnet/canny_input.png"));
    let out_arg = arg(&out);
    let base = [
        "generate",
        "--model",
        &model,
        "--prompt",
        "a house",
        "--width",
        "24",
        "--height",
        "40",
        "--steps",
        "2",
        "--out",
        &out_arg,
        "--controlnet",
        &controlnet,
    ];
    let canny = ember(
        dir.path(),
        &[
            &base[..],
            &[
                "--control-image",
                &image,
                "--control-preprocess",
                "canny",
                "--canny",
                "50,150",
                "--control-resize",
                "fill",
                "--control-res",
                "pixel-perfect",
            ],
        ]
        .concat(),
    );
    let stderr = String::from_utf8_lossy(&canny.stderr);
    assert!(canny.status.success(), "{stderr}");
    let text = inference::imaging::read_png_text(&out).unwrap();
    let parameters = &text.iter().find(|(k, _)| k == "parameters").unwrap().1;
    let params = inference::metadata::Parameters::parse(parameters);
    let unit = params.get("ControlNet 0").unwrap();
    assert!(
        unit.starts_with("Module: canny,")
            && unit.contains("Resize Mode: Resize and Fill")
            && unit.contains("Threshold A: 50.0, Threshold B: 150.0")
            && unit.contains("Pixel Perfect: True"),
        "{unit}"
    );

    // Out-of-range preprocessor settings: one error line, nothing written.
    std::fs::remove_file(&out).unwrap();
    for (flags, says) in [
        (
            &[
                "--control-preprocess",
                "threshold",
                "--control-threshold",
                "300",
            ][..],
            "Binarization threshold 300",
        ),
        (&["--control-res", "10"][..], "resolution of 10"),
        (&["--control-resize", "zoom"][..], "--control-resize"),
    ] {
        let image_flags = ["--control-image", image.as_str()];
        let bad = ember(dir.path(), &[&base[..], &image_flags[..], flags].concat());
        let stderr = String::from_utf8_lossy(&bad.stderr);
        assert!(!bad.status.success(), "{flags:?}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(!out.exists(), "nothing written");
    }

    let unpaired = ember(dir.path(), &base);
    let stderr = String::from_utf8_lossy(&unpaired.stderr);
    assert!(!unpaired.status.success());
    assert!(stderr.contains("--control-image"), "{stderr}");
    assert!(!out.exists(), "nothing written");
}
