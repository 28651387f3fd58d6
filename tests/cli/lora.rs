//! `ember generate` with LoRAs: `--lora FILE:W` and a prompt's `<lora:name:w>` tag (found
//! by name in `--loras DIR`) both reproduce the reference LoRA run and write A1111's
//! `Lora hashes`; a missing tag is a warning, a LoRA for another family an error.

use ember_tests::{json, reference};

use crate::reproduce::reproduce;
use crate::{arg, ember};

#[test]
fn cli_reproduces_the_lora_run_from_a_flag_and_from_a_prompt_tag() {
    let dir = tempfile::tempdir().unwrap();
    let loras = dir.path().join("loras");
    std::fs::create_dir(&loras).unwrap();
    let file = loras.join("inkstyle.safetensors");
    std::fs::copy(reference("sd15/lora/lora_kohya.safetensors"), &file).unwrap();
    let mut run = json("sd15/lora/txt2img_euler_lora.json");
    let scale = run["lora_scale"].as_f64().unwrap();
    let model = ["--model".to_string(), arg(&reference("sd15/pipeline"))];

    let flag = [
        &model[..],
        &["--lora".into(), format!("{}:{scale}", arg(&file))],
    ]
    .concat();
    let params = reproduce(
        "sd15/lora",
        "txt2img_euler_lora",
        "flag",
        &run,
        &flag,
        dir.path(),
    );
    let hash = inference::lora::file::short_hash(&file).unwrap();
    let expected = format!("inkstyle: {hash}");
    assert_eq!(params.get("Lora hashes"), Some(expected.as_str()));

    // The same LoRA named in the prompt: the tag is removed before encoding.
    let prompt = format!(
        "{} <lora:inkstyle:{scale}>",
        run["prompt"].as_str().unwrap()
    );
    run["prompt"] = prompt.clone().into();
    let tagged = [&model[..], &["--loras".into(), arg(&loras)]].concat();
    let params = reproduce(
        "sd15/lora",
        "txt2img_euler_lora",
        "tag",
        &run,
        &tagged,
        dir.path(),
    );
    assert_eq!(params.get("Lora hashes"), Some(expected.as_str()));
    assert_eq!(params.prompt, prompt, "the prompt is kept as typed");
}

#[test]
fn cli_warns_about_missing_lora_tags_and_refuses_other_families() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.png");
    let base = |extra: &[&str], prompt: &str| {
        let model = arg(&reference("sd15/pipeline"));
        let out = arg(&out);
        let mut args = vec![
            "generate", "--model", &model, "--prompt", prompt, "--width", "24", "--height", "40",
            "--steps", "1", "--out", &out,
        ];
        args.extend_from_slice(extra);
        ember(dir.path(), &args)
    };
    let missing = base(&[], "a cat <lora:nowhere:0.7>");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(missing.status.success(), "{stderr}");
    assert!(stderr.contains("no LoRA named \"nowhere\""), "{stderr}");

    let sdxl = arg(&reference("sdxl/lora/lora_kohya.safetensors"));
    let refused = base(&["--lora", &sdxl], "a cat");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("lora_kohya.safetensors") && stderr.contains("SDXL"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
}

/// `ember bench lora --model` merges the benchmark LoRA into a checkpoint loaded as
/// `ember generate` loads it: every linear layer matches, and the figures come out.
#[test]
fn bench_lora_runs_on_a_loaded_checkpoint_and_unet_refuses_one() {
    let dir = tempfile::tempdir().unwrap();
    let model = arg(&reference("sd15/checkpoint.safetensors"));
    let out = ember(
        dir.path(),
        &["bench", "lora", "--model", &model, "--rank", "4", "--json"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["modules"].as_u64().unwrap() > 0, "{report}");
    assert!(report["merged_bytes"].as_u64().unwrap() > 0, "{report}");
    for key in [
        "first_merge_s",
        "change_strength_s",
        "remove_s",
        "merge_again_s",
    ] {
        assert!(report[key].as_f64().unwrap() >= 0.0, "{key}: {report}");
    }
    let missing = ember(
        dir.path(),
        &["bench", "lora", "--model", "nowhere.safetensors"],
    );
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success());
    assert!(stderr.contains("nowhere.safetensors"), "{stderr}");
    // The benchmarks of random weights say that they take none.
    let unet = ember(
        dir.path(),
        &["bench", "unet", "--model", &model, "--size", "64"],
    );
    let stderr = String::from_utf8_lossy(&unet.stderr);
    assert!(!unet.status.success());
    assert!(stderr.contains("--model is read by"), "{stderr}");
}
