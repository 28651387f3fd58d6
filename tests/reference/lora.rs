//! LoRA merging against the reference (`sd15/lora`, `sdxl/lora`): kohya and PEFT files give
//! diffusers' fused weights, UNet and text-encoder outputs and whole runs; a new strength
//! re-merges from the loaded weights and removing the LoRA restores them bit for bit; a LoRA
//! for another family is refused by name. LyCORIS kinds are in `lora_lycoris`.

use burn::tensor::{Device, Int, Tensor, TensorData};
use ember_tests::{Fixtures, Json, assert_close_scaled, json, reference};
use inference::device::{Precision, tensor_to_vec};
use inference::lora::{LoraSpec, Network, read_weight, set};
use inference::model::Model;
use inference::models::unet::AddedConditioning;
use inference::schedule::diffusers::SchedulerConfig;
use inference::weights::{LoadOptions, load};

use crate::components::tensor;
use crate::pipelines::{check_run_request, request_for};

const TOL: f64 = 1e-4;

pub(crate) fn model(folder: &str) -> Model {
    load(
        &reference(folder),
        &LoadOptions::new(Device::flex(), Precision::F32),
    )
    .unwrap()
}

pub(crate) fn spec(file: &str, scale: f32) -> LoraSpec {
    LoraSpec {
        path: reference(file),
        text_encoder: scale,
        unet: scale,
    }
}

/// A merged weight, named `<unet|text_encoder|text_encoder_2>.<key>`, against the model's:
/// within 1e-6 of the largest magnitude (at least 1).
pub(crate) fn check_weight(what: &str, model: &Model, name: &str, expected: &[f64]) {
    let (network, key) = if let Some(k) = name.strip_prefix("unet.") {
        (Network::Unet, k)
    } else if let Some(k) = name.strip_prefix("text_encoder_2.") {
        (Network::TextEncoder(1), k)
    } else {
        (
            Network::TextEncoder(0),
            name.strip_prefix("text_encoder.").unwrap(),
        )
    };
    let ours = read_weight(model, network, key).unwrap_or_else(|| panic!("{what}: {key}"));
    let max = expected.iter().fold(0f64, |m, v| m.max(v.abs()));
    assert_close_scaled(
        &format!("{what}: {name}"),
        &ours,
        expected,
        1e-6 * max.max(1.0),
    );
}

/// The golden `merged.<component>.<key>` weights against the model's.
fn check_merged_weights(what: &str, model: &Model, golden: &Fixtures, names: &[String]) {
    let mut checked = 0;
    for name in names.iter().filter(|n| n.starts_with("merged.")) {
        let rest = name.strip_prefix("merged.").unwrap();
        check_weight(what, model, rest, &golden.get(name).f64());
        checked += 1;
    }
    assert!(checked > 0, "{what}: no merged weights in the golden file");
}

fn ids(f: &ember_tests::Fixture) -> Tensor<2, Int> {
    Tensor::<2, Int>::from_data(
        TensorData::new(f.i64(), [f.shape[0], f.shape[1]]),
        &Device::flex(),
    )
}

/// The SD 1.x UNet on a golden file's `unet_*` inputs.
fn unet_out(model: &Model, golden: &Fixtures) -> Vec<f32> {
    tensor_to_vec(model.unet.forward(
        tensor(golden.get("unet_sample")),
        &golden.get("unet_timestep").f32(),
        &tensor(golden.get("unet_encoder_hidden_states")),
        None,
    ))
}

/// The merged UNet and text encoder against a golden file's `unet_out` and
/// `te_last_hidden_state`.
pub(crate) fn check_networks(what: &str, model: &Model, golden: &Fixtures) {
    assert_close_scaled(
        &format!("{what}: UNet"),
        &unet_out(model, golden),
        &golden.get("unet_out").f64(),
        TOL,
    );
    let te = model.encoders[0]
        .network()
        .forward(ids(golden.get("te_input_ids")));
    assert_close_scaled(
        &format!("{what}: text encoder"),
        &tensor_to_vec(te.last_hidden_state),
        &golden.get("te_last_hidden_state").f64(),
        TOL,
    );
}

pub(crate) fn scale_of(lora: &Json) -> f32 {
    lora["scale"].as_f64().unwrap() as f32
}

#[test]
fn sd15_kohya_and_peft_loras_merge_as_diffusers_fuses_them() {
    let golden = Fixtures::load("sd15/lora/golden.safetensors");
    let names: Vec<String> = golden.tensors.keys().cloned().collect();
    let scale = scale_of(&json("sd15/lora/lora.json"));
    for file in [
        "sd15/lora/lora_kohya.safetensors",
        "sd15/lora/lora_peft.safetensors",
    ] {
        let mut model = model("sd15/pipeline");
        let report = set(&mut model, &[spec(file, scale)]).unwrap();
        assert!(
            report.is_empty(),
            "{file}: every module matched: {report:?}"
        );
        check_merged_weights(file, &model, &golden, &names);
        check_networks(file, &model, &golden);
    }
}

/// A PEFT adapter folder: the reference PEFT file (alpha folded in, so alpha = rank) with
/// `lora_B` divided by 4 and an `adapter_config.json` whose `lora_alpha` is 4 × rank (or
/// 4 × √rank with rsLoRA) merges to the same golden weights.
#[test]
fn peft_adapter_configs_scale_by_lora_alpha() {
    let golden = Fixtures::load("sd15/lora/golden.safetensors");
    let names: Vec<String> = golden.tensors.keys().cloned().collect();
    let scale = scale_of(&json("sd15/lora/lora.json"));
    let source = "sd15/lora/lora_peft.safetensors";
    let ranks: std::collections::BTreeSet<usize> = Fixtures::load(source)
        .tensors
        .iter()
        .filter(|(name, _)| name.ends_with("lora_A.weight"))
        .map(|(_, t)| t.shape[0])
        .collect();
    assert_eq!(ranks.len(), 1, "one rank in the file: {ranks:?}");
    let rank = *ranks.first().unwrap() as f64;
    for (alpha, rslora) in [(4.0 * rank, false), (4.0 * rank.sqrt(), true)] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("adapter_model.safetensors");
        ember_tests::write_edited(
            source,
            &file,
            |name, t| {
                if name.ends_with("lora_B.weight") {
                    let quarter: Vec<f32> = t.f32().iter().map(|v| v / 4.0).collect();
                    *t = ember_tests::Fixture::from_f32(t.shape.clone(), &quarter);
                }
                true
            },
            Vec::new(),
        );
        let config = serde_json::json!({ "r": rank, "lora_alpha": alpha, "use_rslora": rslora });
        std::fs::write(dir.path().join("adapter_config.json"), config.to_string()).unwrap();
        let mut model = model("sd15/pipeline");
        let spec = LoraSpec {
            path: file.clone(),
            text_encoder: scale,
            unet: scale,
        };
        let report = set(&mut model, &[spec]).unwrap();
        assert!(report.is_empty(), "{report:?}");
        check_merged_weights(&format!("PEFT alpha {alpha}"), &model, &golden, &names);
    }
}

#[test]
fn removing_or_changing_a_lora_starts_from_the_loaded_weights_exactly() {
    let golden = Fixtures::load("sd15/lora/golden.safetensors");
    let file = "sd15/lora/lora_kohya.safetensors";
    let mut model = model("sd15/pipeline");
    let key = "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.weight";
    let loaded = read_weight(&model, Network::Unet, key).unwrap();
    let unet = |model: &Model| unet_out(model, &golden);
    let before = unet(&model);
    set(&mut model, &[spec(file, 0.8)]).unwrap();
    let strong = read_weight(&model, Network::Unet, key).unwrap();
    assert_ne!(strong, loaded);
    // Another strength: the same as merging it fresh.
    set(&mut model, &[spec(file, 0.3)]).unwrap();
    let mut fresh = self::model("sd15/pipeline");
    set(&mut fresh, &[spec(file, 0.3)]).unwrap();
    assert_eq!(
        read_weight(&model, Network::Unet, key),
        read_weight(&fresh, Network::Unet, key)
    );
    // Two LoRAs at once add up; then none: bit for bit the loaded model.
    set(
        &mut model,
        &[
            spec(file, 0.5),
            spec("sd15/lora/lora_peft.safetensors", 0.5),
        ],
    )
    .unwrap();
    set(&mut model, &[]).unwrap();
    assert_eq!(read_weight(&model, Network::Unet, key).unwrap(), loaded);
    assert_eq!(
        unet(&model),
        before,
        "the UNet output is the unmerged one exactly"
    );
    assert!(model.lora.applied().is_empty());
}

#[test]
fn sdxl_kohya_lora_with_ldm_names_merges_into_unet_and_both_encoders() {
    let golden = Fixtures::load("sdxl/lora/golden.safetensors");
    let names: Vec<String> = golden.tensors.keys().cloned().collect();
    let scale = scale_of(&json("sdxl/lora/lora.json"));
    for (layout, mut model) in
        crate::families::layouts("sdxl/pipeline", "sdxl/checkpoint.safetensors")
    {
        let report = set(
            &mut model,
            &[spec("sdxl/lora/lora_kohya.safetensors", scale)],
        )
        .unwrap();
        assert!(report.is_empty(), "{layout}: {report:?}");
        check_merged_weights(&layout, &model, &golden, &names);
        let added = AddedConditioning {
            text_embeds: tensor(golden.get("unet_text_embeds")),
            time_ids: golden.get("unet_time_ids").f32(),
        };
        let out = model.unet.forward(
            tensor(golden.get("unet_sample")),
            &golden.get("unet_timestep").f32(),
            &tensor(golden.get("unet_encoder_hidden_states")),
            Some(&added),
        );
        assert_close_scaled(
            &format!("{layout}: UNet"),
            &tensor_to_vec(out),
            &golden.get("unet_out").f64(),
            TOL,
        );
    }
}

#[test]
fn the_lora_runs_reproduce() {
    for (dir, name, folder, file) in [
        (
            "sd15/lora",
            "txt2img_euler_lora",
            "sd15/pipeline",
            "sd15/lora/lora_kohya.safetensors",
        ),
        (
            "sdxl/runs",
            "txt2img_euler_lora",
            "sdxl/pipeline",
            "sdxl/lora/lora_kohya.safetensors",
        ),
    ] {
        let run = json(&format!("{dir}/{name}.json"));
        let config = SchedulerConfig::from_json(&run["scheduler_config"].to_string()).unwrap();
        let mut model = model(folder);
        let scale = run["lora_scale"].as_f64().unwrap() as f32;
        set(&mut model, &[spec(file, scale)]).unwrap();
        let request = request_for(&model, dir, &run, config);
        check_run_request(dir, name, folder, (&model, None), &request);
    }
}

#[test]
fn a_lora_for_another_family_is_refused_by_name() {
    let mut sd15 = model("sd15/pipeline");
    let err = set(&mut sd15, &[spec("sdxl/lora/lora_kohya.safetensors", 1.0)])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("lora_kohya.safetensors") && err.contains("SDXL"),
        "{err}"
    );
    let mut sdxl = model("sdxl/pipeline");
    let err = set(&mut sdxl, &[spec("sd15/lora/lora_kohya.safetensors", 1.0)])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("lora_kohya.safetensors") && err.contains("another model family"),
        "{err}"
    );
    // A failed set leaves the model as it was.
    assert!(sdxl.lora.applied().is_empty());
    // Not a LoRA at all.
    let err = set(
        &mut sdxl,
        &[spec("sd15/textual_inversion/embedding.safetensors", 1.0)],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("no LoRA weights"), "{err}");
}

/// `ember bench lora`'s LoRA (every linear layer of the transformer blocks and the text
/// encoder, kohya names) matches every module of a model of the family, and merging,
/// changing and removing it leaves the loaded weights exactly.
#[test]
fn the_benchmark_lora_matches_every_module_and_is_removed_exactly() {
    let mut model = model("sd15/pipeline");
    let key = "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.weight";
    let before = read_weight(&model, Network::Unet, key).unwrap();
    let times = inference::bench::lora::run_on(&mut model, 4, 2).unwrap();
    assert!(times.modules > 0);
    assert_eq!(read_weight(&model, Network::Unet, key).unwrap(), before);
}

/// Damaged LoRAs are refused by name with what is wrong, and the model keeps its weights:
/// a NaN in a factor, an alpha of 0 (a scale of 0) and an absurd alpha.
#[test]
fn damaged_loras_are_refused_and_leave_the_model_as_it_was() {
    let source = "sd15/lora/lora_kohya.safetensors";
    let mut model = model("sd15/pipeline");
    let key = "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.weight";
    let before = read_weight(&model, Network::Unet, key).unwrap();
    let first_down = Fixtures::load(source)
        .tensors
        .keys()
        .find(|k| k.ends_with(".lora_down.weight"))
        .cloned()
        .unwrap();
    let first_alpha = first_down.replace(".lora_down.weight", ".alpha");
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, f32, &str); 3] = [
        ("nan", first_down.as_str(), f32::NAN, "holds NaN"),
        (
            "zero_alpha",
            first_alpha.as_str(),
            0.0,
            "would change nothing",
        ),
        ("huge_alpha", first_alpha.as_str(), 1e9, "far outside"),
    ];
    for (name, damaged, value, says) in cases {
        let file = dir.path().join(format!("{name}.safetensors"));
        ember_tests::write_edited(
            source,
            &file,
            |tensor_name, t| {
                if tensor_name == damaged {
                    let mut v = t.f32();
                    v[0] = value;
                    *t = ember_tests::Fixture::from_f32(t.shape.clone(), &v);
                }
                true
            },
            Vec::new(),
        );
        let spec = LoraSpec {
            path: file,
            text_encoder: 1.0,
            unet: 1.0,
        };
        let err = set(&mut model, &[spec]).unwrap_err().to_string();
        assert!(err.contains(says) && err.contains(name), "{name}: {err}");
        assert_eq!(
            read_weight(&model, Network::Unet, key).unwrap(),
            before,
            "{name}"
        );
    }
}
