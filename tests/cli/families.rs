//! `ember generate` on SD 2.x and SDXL: every `sd2v/runs` and `sdxl/runs` run reproduced
//! from both layouts (the refiner ensemble with `--refiner`), and the family-specific bad
//! input as one-line errors.

use std::path::{Path, PathBuf};

use ember_tests::{Json, reference, run_models, runs_in, single_file_of};

use crate::bad_input::{Case, assert_one_line_errors};
use crate::reproduce::reproduce;
use crate::{arg, ember};

/// `--model` (and `--refiner`, or `--lora` for a LoRA run) arguments for a run in one
/// layout.
fn model_args(run: &Json, single_file: bool) -> Vec<String> {
    let (base, mut refiner) = run_models(run);
    let mut args = Vec::new();
    if let Some(scale) = run["lora_scale"].as_f64() {
        let lora = refiner.take().expect("a LoRA run names its LoRA");
        args.extend([
            "--lora".to_string(),
            format!("{}:{scale}", arg(&reference(&lora))),
        ]);
    }
    let mut add = |model_flag: &str, config_flag: &str, folder: &str| {
        if single_file {
            args.extend([
                model_flag.to_string(),
                arg(&reference(single_file_of(folder))),
                config_flag.to_string(),
                arg(&reference(folder)),
            ]);
        } else {
            args.extend([model_flag.to_string(), arg(&reference(folder))]);
        }
    };
    add("--model", "--config", &base);
    if let Some(refiner) = &refiner {
        add("--refiner", "--refiner-config", refiner);
    }
    args
}

#[test]
fn cli_reproduces_every_sd2_and_sdxl_run_from_both_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let mut reproduced = Vec::new();
    for runs_dir in ["sd2v/runs", "sdxl/runs"] {
        for (name, run) in runs_in(runs_dir) {
            for (layout, single) in [("folder", false), ("single-file", true)] {
                let params = reproduce(
                    runs_dir,
                    &name,
                    layout,
                    &run,
                    &model_args(&run, single),
                    dir.path(),
                );
                if let Some(switch) = run["denoising_end"].as_f64() {
                    assert!(
                        params.get("Refiner").is_some(),
                        "{name}: the refiner is named"
                    );
                    assert_eq!(
                        params.get("Refiner switch at"),
                        Some(switch.to_string().as_str())
                    );
                }
                if single {
                    assert!(
                        params.get("Model hash").is_some(),
                        "{name}: a single file's hash is written"
                    );
                }
            }
            reproduced.push(format!("{runs_dir}/{name}"));
        }
    }
    assert!(
        reproduced.iter().any(|n| n.contains("refiner"))
            && reproduced.iter().any(|n| n.starts_with("sd2v")),
        "the refiner and SD 2.x runs were reproduced: {reproduced:?}"
    );
}

/// A copy of `sdxl/pipeline` whose text encoder is SD 1.x's: pieces of two models.
fn mixed_folder(dir: &Path) -> PathBuf {
    let mixed = dir.join("mixed");
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            if entry.path().is_file() {
                std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
            }
        }
    };
    let xl = reference("sdxl/pipeline");
    copy(&xl, &mixed);
    for part in [
        "text_encoder_2",
        "tokenizer",
        "tokenizer_2",
        "unet",
        "vae",
        "scheduler",
    ] {
        copy(&xl.join(part), &mixed.join(part));
    }
    copy(
        &reference("sd15/pipeline/text_encoder"),
        &mixed.join("text_encoder"),
    );
    mixed
}

#[test]
fn family_mistakes_are_one_line_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let sd15 = arg(&reference("sd15/pipeline"));
    let xl = arg(&reference("sdxl/pipeline"));
    let refiner = arg(&reference("sdxl/refiner"));
    let mixed = arg(&mixed_folder(dir));
    let case = |what, args: &[&str], expect| Case {
        what,
        args: ["generate", "--prompt", "a test"]
            .iter()
            .chain(args)
            .map(|s| s.to_string())
            .collect(),
        expect,
    };
    let cases = vec![
        case(
            "the refiner as the model for txt2img",
            &["--model", &refiner],
            "--refiner",
        ),
        case(
            "an SD 1.x model as the refiner",
            &["--model", &xl, "--refiner", &sd15],
            "cannot refine",
        ),
        case(
            "a second prompt for SD 1.x",
            &["--model", &sd15, "--prompt-2", "x"],
            "second prompt",
        ),
        case(
            "aesthetic scores without a refiner",
            &["--model", &xl, "--aesthetic-score", "6"],
            "aesthetic",
        ),
        case(
            "an SDXL UNet with an SD 1.x text encoder",
            &["--model", &mixed],
            "different models",
        ),
        case(
            "a refiner switch without a refiner",
            &["--model", &xl, "--refiner-switch", "0.7"],
            "needs --refiner",
        ),
        case(
            "a refiner switch past the end",
            &[
                "--model",
                &xl,
                "--refiner",
                &refiner,
                "--refiner-switch",
                "1.5",
            ],
            "between 0 and 1",
        ),
        case(
            "a size that is no size",
            &["--model", &xl, "--original-size", "big"],
            "widthxheight",
        ),
        case(
            "an unknown prediction",
            &["--model", &xl, "--prediction", "x0"],
            "unknown prediction",
        ),
        case(
            "an absurd CFG rescale",
            &["--model", &xl, "--cfg-rescale", "3"],
            "cfg rescale",
        ),
        case(
            "size conditioning for SD 1.x",
            &["--model", &sd15, "--target-size", "512x512"],
            "sdxl",
        ),
    ];
    assert_one_line_errors(dir, cases);
}

#[test]
fn a_prediction_override_against_the_model_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v.png");
    let output = ember(
        dir.path(),
        &[
            "generate",
            "--model",
            &arg(&reference("sdxl/pipeline")),
            "--prompt",
            "a test",
            "--steps",
            "2",
            "--prediction",
            "v",
            "--out",
            &arg(&out),
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("note:") && stderr.contains("say epsilon prediction"),
        "the override is noted: {stderr}"
    );
    assert!(out.is_file());
}

#[test]
fn a_request_that_cannot_fit_in_memory_is_refused_before_loading() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("big.png");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
        .env("EMBER_DEVICE", "cpu")
        .args([
            "generate",
            "--model",
            &arg(&reference("sdxl/pipeline")),
            "--prompt",
            "a test",
            "--width",
            "1024",
            "--height",
            "1024",
            "--out",
            &arg(&out),
        ])
        .current_dir(dir.path())
        .env("EMBER_MEMORY_LIMIT", "64M")
        .env("EMBER_CACHE_DIR", dir.path().join("cache"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("error: this generation needs about") && lines[0].contains("free"),
        "{stderr}"
    );
    assert!(!out.exists());
}
