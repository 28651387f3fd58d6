//! Every kind of bad input the engine issue lists: a one-line `error:` on stderr that names
//! the problem, a non-zero exit status, no panic and no output file.

use std::path::{Path, PathBuf};

use ember_tests::{reference, torch_file, write_edited_checkpoint};

use crate::{arg, ember};

/// CRC-32 as PNG chunks use it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The first UNet convolution weight (a tensor every SD checkpoint has).
const CONV_IN: &str = "model.diffusion_model.input_blocks.0.0.weight";

pub struct Case {
    pub what: &'static str,
    pub args: Vec<String>,
    /// Words the message must contain (case-insensitive).
    pub expect: &'static str,
}

fn model_args(model: &Path, with_config: bool) -> Vec<String> {
    let mut a = vec![
        "generate".into(),
        "--model".into(),
        arg(model),
        "--prompt".into(),
        "a test".into(),
    ];
    if with_config {
        a.extend(["--config".into(), arg(&reference("sd15/pipeline"))]);
    }
    a
}

fn settings(extra: &[&str]) -> Vec<String> {
    let mut a = model_args(&reference("sd15/pipeline"), false);
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn every_bad_input_is_a_one_line_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let checkpoint = std::fs::read(reference("sd15/checkpoint.safetensors")).unwrap();
    let mut cases: Vec<Case> = Vec::new();
    let mut model_case = |what, path: PathBuf, expect| {
        cases.push(Case {
            what,
            args: model_args(&path, true),
            expect,
        })
    };

    model_case("missing file", dir.join("nope.safetensors"), "no such file");
    model_case("empty file", file(dir, "empty.safetensors", b""), "empty");
    model_case(
        "truncated file",
        file(dir, "half.safetensors", &checkpoint[..checkpoint.len() / 2]),
        "truncated",
    );
    let mut huge_header = u64::MAX.to_le_bytes().to_vec();
    huge_header.extend_from_slice(b"{}");
    model_case(
        "header too large",
        file(dir, "huge.safetensors", &huge_header),
        "header",
    );
    let mut not_json = 16u64.to_le_bytes().to_vec();
    not_json.extend_from_slice(b"this is not json");
    model_case(
        "header not JSON",
        file(dir, "notjson.safetensors", &not_json),
        "not valid json",
    );
    let header = br#"{"x":{"dtype":"F32","shape":[1000],"data_offsets":[0,4000]}}"#;
    let mut past_end = (header.len() as u64).to_le_bytes().to_vec();
    past_end.extend_from_slice(header);
    past_end.extend_from_slice(&[0u8; 16]);
    model_case(
        "offsets past the end",
        file(dir, "short.safetensors", &past_end),
        "truncated",
    );
    model_case(
        "a LoRA",
        reference("sd15/lora/lora_kohya.safetensors"),
        "lora",
    );
    model_case(
        "an embedding",
        reference("sd15/textual_inversion/embedding.safetensors"),
        "embedding",
    );
    model_case(
        "an SDXL checkpoint described by an SD 1.x config folder",
        reference("sdxl/checkpoint.safetensors"),
        "different models",
    );
    model_case(
        "random tensors",
        reference("sd15/golden/unet.safetensors"),
        "not a stable diffusion checkpoint",
    );
    // A missing tensor is named as the file names its kind elsewhere.
    for (i, key) in [
        "model.diffusion_model.middle_block.0.in_layers.2.weight",
        "first_stage_model.decoder.mid.block_1.norm1.bias",
        "cond_stage_model.transformer.text_model.encoder.layers.0.mlp.fc1.bias",
    ]
    .into_iter()
    .enumerate()
    {
        let missing = dir.join(format!("missing{i}.safetensors"));
        write_edited_checkpoint(&missing, |name: &str, _: &mut _| name != key, Vec::new());
        model_case("a missing tensor", missing, key);
    }
    let misshaped = dir.join("misshaped.safetensors");
    let flatten = |name: &str, t: &mut ember_tests::Fixture| {
        if name == CONV_IN {
            t.shape = vec![t.shape.iter().product()];
        }
        true
    };
    write_edited_checkpoint(&misshaped, flatten, Vec::new());
    model_case("a misshaped tensor", misshaped, "has shape");
    let nan = dir.join("nan.safetensors");
    let poison = |name: &str, t: &mut ember_tests::Fixture| {
        if name == CONV_IN {
            t.bytes[..4].copy_from_slice(&f32::NAN.to_le_bytes());
        }
        true
    };
    write_edited_checkpoint(&nan, poison, Vec::new());
    model_case("NaN weights", nan, "nan");
    let evil = dir.join("evil.ckpt");
    torch_file::write_malicious_checkpoint(&evil);
    model_case("a pickle that runs code", evil, "refusing");
    let empty_dir = dir.join("empty-dir");
    std::fs::create_dir(&empty_dir).unwrap();
    model_case("an empty folder", empty_dir, "empty");
    let other_dir = dir.join("photos");
    std::fs::create_dir(&other_dir).unwrap();
    std::fs::write(other_dir.join("notes.txt"), "hello").unwrap();
    model_case(
        "a folder that is not a model",
        other_dir,
        "not a diffusers model folder",
    );
    // SD 2's depth model: a UNet taking a depth map besides the latents (5 channels in).
    let depth = dir.join("depth.safetensors");
    let widen = |name: &str, t: &mut ember_tests::Fixture| {
        if name == CONV_IN {
            let element = t.bytes.len() / t.shape.iter().product::<usize>();
            t.shape[1] = 5;
            t.bytes = vec![0; t.shape.iter().product::<usize>() * element];
        }
        true
    };
    write_edited_checkpoint(&depth, widen, Vec::new());
    cases.push(Case {
        what: "a UNet of 5 input channels (a depth model)",
        args: model_args(&depth, false),
        expect: "5 channels in",
    });

    let garbage = file(dir, "garbage.png", b"definitely not an image");
    let png = std::fs::read(reference("sd15/runs/input_init_image.png")).unwrap();
    let truncated_png = file(dir, "cut.png", &png[..png.len() / 2]);
    let mut giant = png[..33].to_vec(); // signature + IHDR
    giant[16..20].copy_from_slice(&100_000u32.to_be_bytes());
    giant[20..24].copy_from_slice(&100_000u32.to_be_bytes());
    let crc = crc32(&giant[12..29]); // chunk type + data
    giant[29..33].copy_from_slice(&crc.to_be_bytes());
    giant.extend_from_slice(&png[33..]); // the small image's data after a huge header
    let giant = file(dir, "giant.png", &giant);
    let scheduler = file(
        dir,
        "sched.json",
        br#"{"_class_name": "FlowMatchEulerDiscreteScheduler"}"#,
    );
    for (what, extra, expect) in [
        (
            "a corrupt image",
            vec!["--init-image", &arg(&garbage)],
            "not a readable image",
        ),
        (
            "a truncated image",
            vec!["--init-image", &arg(&truncated_png)],
            "corrupt",
        ),
        (
            "an enormous image",
            vec!["--init-image", &arg(&giant)],
            "100000x100000",
        ),
        ("steps 0", vec!["--steps", "0"], "steps"),
        ("NaN CFG", vec!["--cfg", "NaN"], "cfg"),
        ("infinite CFG", vec!["--cfg", "inf"], "cfg"),
        ("negative CFG", vec!["--cfg", "-3"], "cfg"),
        ("zero width", vec!["--width", "0"], "width"),
        ("absurd height", vec!["--height", "100000"], "height"),
        (
            "size not a multiple of 8",
            vec!["--width", "513"],
            "multiple of 8",
        ),
        (
            "strength below 0",
            vec![
                "--init-image",
                &arg(&reference("sd15/runs/input_init_image.png")),
                "--strength",
                "-0.5",
            ],
            "strength",
        ),
        (
            "strength above 1",
            vec![
                "--init-image",
                &arg(&reference("sd15/runs/input_init_image.png")),
                "--strength",
                "1.5",
            ],
            "strength",
        ),
        (
            "strength without an image",
            vec!["--strength", "0.5"],
            "init-image",
        ),
        (
            "unknown sampler",
            vec!["--sampler", "warp_drive"],
            "unknown sampler",
        ),
        (
            "unknown schedule",
            vec!["--schedule", "lunar"],
            "unknown schedule",
        ),
        (
            "unsupported scheduler class",
            vec!["--scheduler-config", &arg(&scheduler)],
            "not supported",
        ),
        ("batch 0", vec!["--batch", "0"], "batch"),
        // Refused before a name is made for each image (4 billion paths would not fit).
        (
            "a huge batch",
            vec!["--batch", "4000000000"],
            "batch must be between",
        ),
        (
            "unknown device",
            vec!["--device", "abacus"],
            // Compared lowercased.
            "valid devices: auto, cpu, wgpu, wgpu:n, cuda, cuda:n",
        ),
        (
            "unknown precision",
            vec!["--precision", "f8"],
            "valid: auto, f32, f16, bf16",
        ),
        (
            "unknown SDE noise",
            vec!["--sde-noise", "pink"],
            "valid: brownian, generator",
        ),
        (
            "unknown noise source",
            vec!["--rng", "quantum"],
            "valid: cpu, nv",
        ),
        (
            "a variation seed without a strength",
            vec!["--variation-seed", "5"],
            "--variation-strength",
        ),
        (
            "a variation strength past 1",
            vec!["--variation-strength", "1.5"],
            "between 0 and 1",
        ),
        (
            "a seed resize of no size",
            vec!["--seed-resize-from", "0x512"],
            "resize seed from",
        ),
        (
            "output not an image format",
            vec!["--out", "image.gif"],
            ".png, .jpg or .webp",
        ),
        (
            "JPEG quality 0",
            vec!["--out", "image.jpg", "--jpeg-quality", "0"],
            "1 to 100",
        ),
        (
            "output folder missing",
            vec!["--out", "no/such/dir/x.png"],
            "does not exist",
        ),
    ] {
        cases.push(Case {
            what,
            args: settings(&extra),
            expect,
        });
    }

    assert_one_line_errors(dir, cases);
    assert!(
        !Path::new("/tmp/ember-pwned").exists(),
        "the malicious pickle ran"
    );
}

/// Runs every case in `dir`: each must fail with one `error:` line holding its words, no
/// panic and no output file.
pub fn assert_one_line_errors(dir: &Path, cases: Vec<Case>) {
    for case in cases {
        let mut args = case.args.clone();
        if !args.iter().any(|a| a == "--out") {
            args.extend(["--out".to_string(), "out.png".to_string()]);
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = ember(dir, &argv);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let what = case.what;
        assert!(!output.status.success(), "{what}: ember succeeded");
        assert!(
            !stderr.contains("panicked"),
            "{what}: ember panicked: {stderr}"
        );
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(
            lines.len(),
            1,
            "{what}: expected one line on stderr, got: {stderr}"
        );
        assert!(lines[0].starts_with("error: "), "{what}: {stderr}");
        assert!(
            lines[0].to_lowercase().contains(case.expect),
            "{what}: message lacks {:?}: {stderr}",
            case.expect
        );
        assert!(
            !dir.join("out.png").exists(),
            "{what}: an output file was written"
        );
        if std::env::var_os("EMBER_TEST_VERBOSE").is_some() {
            eprintln!("{what}: {}", lines[0]);
        }
    }
}
