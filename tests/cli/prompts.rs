//! `ember generate` with A1111 prompt features: a textual-inversion embedding from
//! `--embeddings` reproduces the SDXL reference run and is named in `TI hashes`; the
//! emphasis setting and padded conditionings are written to the metadata; words that look
//! like missing embeddings are reported.

use ember_tests::{json, reference};

use crate::reproduce::reproduce;
use crate::{arg, ember};

#[test]
fn cli_reproduces_the_sdxl_embedding_run_and_names_the_embedding() {
    let dir = tempfile::tempdir().unwrap();
    let ti = json("sdxl/textual_inversion/ti.json");
    let token = ti["token"].as_str().unwrap();
    let embeddings = dir.path().join("embeddings");
    std::fs::create_dir(&embeddings).unwrap();
    let file = embeddings.join(format!("{token}.safetensors"));
    std::fs::copy(
        reference("sdxl/textual_inversion/embedding.safetensors"),
        &file,
    )
    .unwrap();
    let run = json("sdxl/textual_inversion/txt2img_euler_ti.json");
    let model_args = [
        "--model".to_string(),
        arg(&reference("sdxl/pipeline")),
        "--embeddings".to_string(),
        arg(&embeddings),
    ];
    let params = reproduce(
        "sdxl/textual_inversion",
        "txt2img_euler_ti",
        "folder",
        &run,
        &model_args,
        dir.path(),
    );
    let hash = inference::hashing::sha256_file(&file).unwrap();
    assert_eq!(
        params.get("TI hashes"),
        Some(format!("{token}: {}", &hash[..12]).as_str())
    );
    assert_eq!(
        params.prompt,
        run["prompt"].as_str().unwrap(),
        "the prompt as typed"
    );
}

#[test]
fn cli_reports_missing_embeddings_and_writes_the_emphasis() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.png");
    let output = ember(
        dir.path(),
        &[
            "generate",
            "--model",
            &arg(&reference("sd15/pipeline")),
            "--prompt",
            "a (red:1.3) house, EasyNegative BREAK at night",
            "--width",
            "24",
            "--height",
            "40",
            "--steps",
            "2",
            "--emphasis",
            "none",
            "--out",
            &arg(&out),
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("\"EasyNegative\" looks like an embedding"),
        "{stderr}"
    );
    let text = inference::imaging::read_png_text(&out).unwrap();
    let parameters = &text.iter().find(|(k, _)| k == "parameters").unwrap().1;
    let params = inference::metadata::Parameters::parse(parameters);
    assert_eq!(params.get("Emphasis"), Some("No norm"));
    assert_eq!(
        params.prompt,
        "a (red:1.3) house, EasyNegative BREAK at night"
    );
    // Two chunks beside the one of the empty negative: padded, as A1111's option does.
    assert_eq!(params.get("Pad conds"), Some("True"));

    let missing = ember(
        dir.path(),
        &[
            "generate",
            "--model",
            &arg(&reference("sd15/pipeline")),
            "--prompt",
            "x",
            "--embeddings",
            &arg(&dir.path().join("nowhere")),
            "--out",
            &arg(&out),
        ],
    );
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success());
    assert!(
        stderr.contains("--embeddings") && stderr.contains("nowhere"),
        "{stderr}"
    );
}
