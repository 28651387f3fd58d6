//! Textual-inversion embeddings: the SD 1.x and SDXL reference embeddings
//! (`sd15/textual_inversion`, `sdxl/textual_inversion`) condition the encoders as diffusers
//! does, the SDXL run reproduces, the other file formats (`tests/extra/embeddings`, made by
//! `tests/extra/make_embeddings.py`) load the same vectors, and bad files are refused by name.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use ember_tests::{Fixtures, Json, assert_close_scaled, json, reference};
use inference::device::{Precision, tensor_to_vec};
use inference::model::Model;
use inference::pipeline::prompt;
use inference::schedule::diffusers::SchedulerConfig;
use inference::text::chunks::{EMBEDDING_PLACEHOLDER, chunk_with_embeddings};
use inference::text::embeddings::{Embedding, EmbeddingSet, list};
use inference::weights::{LoadOptions, load};

use crate::pipelines::{check_run_request, request_for};

fn model(folder: &str) -> Model {
    load(
        &reference(folder),
        &LoadOptions::new(Device::flex(), Precision::F32),
    )
    .unwrap()
}

/// A folder holding the reference embedding of `dir` under its trigger name, as A1111 finds
/// embeddings (by file stem).
fn embeddings_folder(dir: &str) -> (tempfile::TempDir, Json) {
    let ti = json(&format!("{dir}/ti.json"));
    let folder = tempfile::tempdir().unwrap();
    let name = ti["token"].as_str().unwrap();
    std::fs::copy(
        reference(&format!("{dir}/embedding.safetensors")),
        folder.path().join(format!("{name}.safetensors")),
    )
    .unwrap();
    (folder, ti)
}

fn extra(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("extra/embeddings")
        .join(name)
}

#[test]
fn an_sd15_embedding_conditions_the_text_encoder_as_diffusers_does() {
    let (folder, ti) = embeddings_folder("sd15/textual_inversion");
    let golden = Fixtures::load("sd15/textual_inversion/golden.safetensors");
    let model = model("sd15/pipeline");
    let mut request = model.request(ti["prompt"].as_str().unwrap(), 0);
    request.embedding_dirs = vec![folder.path().to_path_buf()];

    // The vectors land where diffusers put its added tokens, whole, at the prompt's weight.
    let encoder = &model.encoders[0];
    let set = EmbeddingSet::new(&request.embedding_dirs);
    let matcher = set.matcher(&encoder.tokenizer).unwrap();
    let segments = vec![(request.prompt.clone(), 1.0)];
    let chunked = chunk_with_embeddings(&encoder.tokenizer, &segments, &matcher, &set).unwrap();
    let ids = golden.get("input_ids").i64();
    let first_new = ids.iter().position(|&id| id >= 49408).unwrap();
    let vectors = ti["n_vectors"].as_u64().unwrap() as usize;
    let fixes = &chunked.chunks[0].fixes;
    assert_eq!(fixes.len(), 1);
    assert_eq!((fixes[0].position, fixes[0].vectors), (first_new, vectors));
    for (i, (&ours, &theirs)) in chunked.chunks[0].ids.iter().zip(&ids).enumerate() {
        let placeholder = (first_new..first_new + vectors).contains(&i);
        let expected = if placeholder {
            i64::from(EMBEDDING_PLACEHOLDER)
        } else {
            theirs
        };
        assert_eq!(i64::from(ours), expected, "token {i}");
    }
    // The file's rows are the golden token embeddings at those positions.
    let width = encoder.network().hidden_size();
    let embedding = set.get(fixes[0].embedding).unwrap();
    let rows = embedding.rows_for("", width).unwrap();
    let token_embeddings = golden.get("token_embeddings").f64();
    let expected_rows = &token_embeddings[first_new * width..(first_new + vectors) * width];
    assert_close_scaled("embedding rows", rows, expected_rows, 0.0);

    // (The golden `penultimate` is the raw layer output, which no CLIP skip gives.)
    let c = prompt::encode(&model, &request, false).unwrap();
    assert_close_scaled(
        "sd15 embedding: last hidden state",
        &tensor_to_vec(c.context),
        &golden.get("last_hidden_state").f64(),
        1e-4,
    );
    let name = ti["token"].as_str().unwrap().to_string();
    let hash = inference::hashing::sha256_file(&embedding.path).unwrap();
    assert_eq!(c.embeddings, vec![(name, hash[..12].to_string())]);
}

#[test]
fn an_sdxl_embedding_conditions_both_encoders_as_diffusers_does() {
    let (folder, ti) = embeddings_folder("sdxl/textual_inversion");
    let golden = Fixtures::load("sdxl/textual_inversion/golden.safetensors");
    let cat = |a: &str, b: &str| {
        let mut v = golden.get(a).f64();
        v.extend(golden.get(b).f64());
        v
    };
    for (layout, model) in crate::families::layouts("sdxl/pipeline", "sdxl/checkpoint.safetensors")
    {
        let mut request = model.request(ti["prompt"].as_str().unwrap(), 0);
        request.negative_prompt = ti["negative_prompt"].as_str().unwrap().to_string();
        request.embedding_dirs = vec![folder.path().to_path_buf()];
        let c = prompt::encode(&model, &request, true).unwrap();
        assert_close_scaled(
            &format!("{layout}: context"),
            &tensor_to_vec(c.context),
            &cat("negative_prompt_embeds", "prompt_embeds"),
            1e-4,
        );
        let added = c.added.unwrap();
        assert_close_scaled(
            &format!("{layout}: pooled"),
            &tensor_to_vec(added.text_embeds),
            &cat("negative_pooled_prompt_embeds", "pooled_prompt_embeds"),
            1e-4,
        );
    }
}

#[test]
fn the_sdxl_embedding_run_reproduces() {
    let dir = "sdxl/textual_inversion";
    let (folder, _) = embeddings_folder(dir);
    let run = json(&format!("{dir}/txt2img_euler_ti.json"));
    let config = SchedulerConfig::from_json(&run["scheduler_config"].to_string()).unwrap();
    let model = model("sdxl/pipeline");
    let mut request = request_for(&model, dir, &run, config);
    request.embedding_dirs = vec![folder.path().to_path_buf()];
    check_run_request(
        dir,
        "txt2img_euler_ti",
        "sdxl/pipeline",
        (&model, None),
        &request,
    );
}

#[test]
fn a1111_pickles_and_diffusers_concepts_load_the_same_vectors() {
    let expected = Fixtures::load_path(&extra("expected.safetensors"));
    for (file, tensor, rows) in [
        ("a1111-dict.pt", "vectors", 3),
        ("a1111-params.pt", "vectors", 3),
        ("diffusers-concept.bin", "concept", 1),
    ] {
        let e = Embedding::load("x", &extra(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(e.vectors, rows, "{file}");
        let values = e.rows_for("", 32).unwrap();
        assert_close_scaled(file, values, &expected.get(tensor).f64(), 0.0);
    }
}

#[test]
fn bad_embedding_files_are_refused_naming_them() {
    // A pickle that imports os.system: refused before anything is read, nothing runs.
    let err = Embedding::load("hostile", &extra("hostile.pt"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("hostile.pt") && err.contains("system"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, tensors: Vec<(&str, Vec<usize>, Vec<f32>)>| {
        let path = dir.path().join(name);
        std::fs::write(&path, ember_tests::safetensors_bytes(&tensors)).unwrap();
        path
    };
    let nan = write(
        "nan.safetensors",
        vec![("emb_params", vec![1, 4], vec![0.0, f32::NAN, 0.0, 1.0])],
    );
    let err = Embedding::load("nan", &nan).unwrap_err().to_string();
    assert!(
        err.contains("nan.safetensors") && err.contains("NaN"),
        "{err}"
    );
    let cube = write(
        "cube.safetensors",
        vec![("emb_params", vec![1, 2, 2], vec![0.0; 4])],
    );
    let err = Embedding::load("cube", &cube).unwrap_err().to_string();
    assert!(
        err.contains("cube.safetensors") && err.contains("[1, 2, 2]"),
        "{err}"
    );
    let long = write(
        "long.safetensors",
        vec![("emb_params", vec![76, 1], vec![0.0; 76])],
    );
    let err = Embedding::load("long", &long).unwrap_err().to_string();
    assert!(err.contains("76 vectors"), "{err}");
    let two = write(
        "two.safetensors",
        vec![("a", vec![1, 1], vec![0.0]), ("b", vec![1, 1], vec![0.0])],
    );
    let err = Embedding::load("two", &two).unwrap_err().to_string();
    assert!(err.contains("not a textual-inversion embedding"), "{err}");
}

#[test]
fn an_embedding_for_another_family_is_an_error_naming_its_file() {
    let (sd15_dir, sd15) = embeddings_folder("sd15/textual_inversion");
    let (sdxl_dir, sdxl) = embeddings_folder("sdxl/textual_inversion");
    let cases = [
        ("sdxl/pipeline", &sd15_dir, &sd15, "SD 1.x"),
        ("sd15/pipeline", &sdxl_dir, &sdxl, "SDXL"),
    ];
    for (folder, dir, ti, made_for) in cases {
        let model = model(folder);
        let mut request = model.request(ti["prompt"].as_str().unwrap(), 0);
        request.embedding_dirs = vec![dir.path().to_path_buf()];
        let err = prompt::encode(&model, &request, false)
            .err()
            .unwrap()
            .to_string();
        let file = format!("{}.safetensors", ti["token"].as_str().unwrap());
        assert!(
            err.contains(&file) && err.contains(made_for),
            "{folder}: {err}"
        );
    }
}

#[test]
fn an_embedding_is_never_split_across_chunks_and_keeps_its_weight() {
    let (folder, ti) = embeddings_folder("sd15/textual_inversion");
    let model = model("sd15/pipeline");
    let encoder = &model.encoders[0];
    let set = EmbeddingSet::new(&[folder.path().to_path_buf()]);
    let matcher = set.matcher(&encoder.tokenizer).unwrap();
    let name = ti["token"].as_str().unwrap();
    let vectors = ti["n_vectors"].as_u64().unwrap() as usize;
    // 74 one-token words, then the embedding: it does not fit in the first chunk's last
    // place, so the whole of it opens the second chunk.
    let filler = "cat ".repeat(74);
    let segments = vec![(filler, 1.0), (name.to_string(), 1.3)];
    let chunked = chunk_with_embeddings(&encoder.tokenizer, &segments, &matcher, &set).unwrap();
    assert_eq!(chunked.chunks.len(), 2);
    assert!(chunked.chunks[0].fixes.is_empty());
    let fix = chunked.chunks[1].fixes[0];
    assert_eq!((fix.position, fix.vectors), (1, vectors));
    assert!(
        chunked.chunks[1].multipliers[1..=vectors]
            .iter()
            .all(|&m| m == 1.3)
    );
    assert_eq!(chunked.token_count, 75 + vectors);
}

#[test]
fn words_that_look_like_missing_embeddings_are_reported_and_read_as_text() {
    let (folder, ti) = embeddings_folder("sd15/textual_inversion");
    let model = model("sd15/pipeline");
    let name = ti["token"].as_str().unwrap();
    let prompt = format!("{name}, (<no-such-style>:1.2), EasyNegative, a <lora:x:1> cat");
    let mut request = model.request(&prompt, 0);
    request.embedding_dirs = vec![folder.path().to_path_buf()];
    let c = prompt::encode(&model, &request, false).unwrap();
    let all = c.warnings.join("\n");
    assert!(all.contains("\"<no-such-style>\""), "{all}");
    assert!(all.contains("\"EasyNegative\""), "{all}");
    assert!(!all.contains(name) && !all.contains("lora"), "{all}");
    assert_eq!(c.warnings.len(), 2, "{all}");
    // Embedding folders list by stem, subfolders included, first folder first.
    let sub = folder.path().join("more");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("notes.txt"), "not an embedding").unwrap();
    std::fs::copy(extra("a1111-dict.pt"), sub.join("style.pt")).unwrap();
    let names: Vec<String> = list(&[folder.path().to_path_buf()])
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(names, vec![name.to_string(), "style".to_string()]);
}
