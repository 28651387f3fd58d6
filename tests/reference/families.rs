//! SD 2.x, SDXL and the SDXL refiner against their goldens: every text-encoder hidden state,
//! the pooled embedding, and the UNet with its added conditioning, from the diffusers folder
//! and from the single-file checkpoint.

use burn::tensor::{Device, Int, Tensor, TensorData};
use ember_tests::{Fixtures, assert_close_scaled, reference};
use inference::device::{Precision, tensor_to_vec};
use inference::family::Family;
use inference::model::{Model, TextEncoder};
use inference::models::unet::AddedConditioning;
use inference::weights::{LoadOptions, load};

use crate::components::tensor;

/// The reference README's tolerance for single network calls: 1e-4 of max(1, max|ref|).
const TOL: f64 = 1e-4;

/// A family's model from its diffusers folder and from its single file (the folder's
/// configs describe the tiny sizes).
pub fn layouts(folder: &str, single_file: &str) -> Vec<(String, Model)> {
    let options = |config: Option<&str>| LoadOptions {
        config_dir: config.map(reference),
        ..LoadOptions::new(Device::flex(), Precision::F32)
    };
    vec![
        (
            format!("{folder} (diffusers folder)"),
            load(&reference(folder), &options(None)).unwrap(),
        ),
        (
            format!("{single_file} (single file)"),
            load(&reference(single_file), &options(Some(folder))).unwrap(),
        ),
    ]
}

/// The ids of a `[rows, 77]` id tensor as a batch.
fn ids(f: &ember_tests::Fixture) -> (Tensor<2, Int>, Vec<u32>) {
    let rows = f.shape[0];
    let v = f.i64();
    let t = Tensor::<2, Int>::from_data(
        TensorData::new(v.clone(), [rows, f.shape[1]]),
        &Device::flex(),
    );
    (t, v.into_iter().map(|i| i as u32).collect())
}

/// Compares every hidden state of `encoder` on `ids` with `hidden` (`[layers + 1, ...]`).
fn check_hidden_states(
    what: &str,
    encoder: &TextEncoder,
    ids: Tensor<2, Int>,
    hidden: &ember_tests::Fixture,
) {
    let out = encoder.network().forward(ids);
    assert_eq!(
        out.hidden_states.len(),
        hidden.shape[0],
        "{what}: hidden state count"
    );
    let all = hidden.f64();
    let per = all.len() / hidden.shape[0];
    for (k, h) in out.hidden_states.iter().enumerate() {
        assert_close_scaled(
            &format!("{what}: hidden_states[{k}]"),
            &tensor_to_vec(h.clone()),
            &all[k * per..(k + 1) * per],
            TOL,
        );
    }
}

#[test]
fn sd2_text_encoder_matches_every_hidden_state() {
    let golden = Fixtures::load("sd2v/golden/text_encoder.safetensors");
    for (layout, model) in layouts("sd2v/pipeline", "sd2v/checkpoint.safetensors") {
        assert_eq!(model.family(), Family::Sd2, "{layout}");
        let encoder = &model.encoders[0];
        let (t, _) = ids(golden.get("input_ids"));
        check_hidden_states(&layout, encoder, t.clone(), golden.get("hidden_states"));
        let out = encoder.network().forward(t);
        let n = out.hidden_states.len();
        assert_close_scaled(
            &format!("{layout}: last_hidden_state"),
            &tensor_to_vec(out.last_hidden_state.clone()),
            &golden.get("last_hidden_state").f64(),
            TOL,
        );
        let penultimate = out.hidden_states[n - 2].clone();
        assert_close_scaled(
            &format!("{layout}: penultimate"),
            &tensor_to_vec(penultimate.clone()),
            &golden.get("penultimate").f64(),
            TOL,
        );
        assert_close_scaled(
            &format!("{layout}: penultimate_final_ln"),
            &tensor_to_vec(encoder.network().final_layer_norm(penultimate)),
            &golden.get("penultimate_final_ln").f64(),
            TOL,
        );
    }
}

/// Runs the UNet on a golden's inputs and compares the output and every recorded
/// top-level activation.
pub fn check_unet(
    layout: &str,
    model: &Model,
    golden: &Fixtures,
    added: Option<AddedConditioning>,
) {
    let mut trace = Vec::new();
    let out = model.unet.forward_traced(
        tensor(golden.get("sample")),
        &golden.get("timestep").f32(),
        &tensor(golden.get("encoder_hidden_states")),
        added.as_ref(),
        Some(&mut trace),
    );
    assert_close_scaled(
        &format!("{layout}: UNet out"),
        &tensor_to_vec(out),
        &golden.get("out").f64(),
        TOL,
    );
    let mut compared = 0;
    for (name, activation) in trace {
        let key = format!("act.{name}");
        if golden.has(&key) {
            assert_close_scaled(
                &format!("{layout}: UNet {key}"),
                &tensor_to_vec(activation),
                &golden.get(&key).f64(),
                TOL,
            );
            compared += 1;
        }
    }
    let expected = golden
        .tensors
        .keys()
        .filter(|k| k.starts_with("act."))
        .count();
    assert!(expected > 0, "{layout}: the golden records activations");
    assert_eq!(
        compared, expected,
        "{layout}: every recorded activation is compared"
    );
}

/// The golden's pooled text and time ids as the UNet takes them.
fn added(golden: &Fixtures) -> AddedConditioning {
    AddedConditioning {
        text_embeds: tensor(golden.get("text_embeds")),
        time_ids: golden.get("time_ids").f32(),
    }
}

#[test]
fn sd2_unet_matches_every_block_activation() {
    let golden = Fixtures::load("sd2v/golden/unet.safetensors");
    for (layout, model) in layouts("sd2v/pipeline", "sd2v/checkpoint.safetensors") {
        check_unet(&layout, &model, &golden, None);
    }
}

#[test]
fn sdxl_text_encoders_match_every_hidden_state_and_the_pooled_embedding() {
    let golden = Fixtures::load("sdxl/golden/text_encoders.safetensors");
    for (layout, model) in layouts("sdxl/pipeline", "sdxl/checkpoint.safetensors") {
        assert_eq!(model.family(), Family::Sdxl, "{layout}");
        assert_eq!(model.encoders.len(), 2, "{layout}: two text encoders");
        let (te1, te2) = (&model.encoders[0], &model.encoders[1]);
        let (ids1, _) = ids(golden.get("te1_input_ids"));
        check_hidden_states(
            &format!("{layout} te1"),
            te1,
            ids1.clone(),
            golden.get("te1_hidden_states"),
        );
        let out1 = te1.network().forward(ids1);
        assert_close_scaled(
            &format!("{layout}: te1_penultimate"),
            &tensor_to_vec(out1.hidden_states[out1.hidden_states.len() - 2].clone()),
            &golden.get("te1_penultimate").f64(),
            TOL,
        );
        let (ids2, ids2_v) = ids(golden.get("te2_input_ids"));
        check_hidden_states(
            &format!("{layout} te2"),
            te2,
            ids2.clone(),
            golden.get("te2_hidden_states"),
        );
        let out2 = te2.network().forward(ids2);
        assert_close_scaled(
            &format!("{layout}: te2_last_hidden_state"),
            &tensor_to_vec(out2.last_hidden_state.clone()),
            &golden.get("te2_last_hidden_state").f64(),
            TOL,
        );
        assert_close_scaled(
            &format!("{layout}: te2_penultimate"),
            &tensor_to_vec(out2.hidden_states[out2.hidden_states.len() - 2].clone()),
            &golden.get("te2_penultimate").f64(),
            TOL,
        );
        let pooled = te2
            .network()
            .pooled(&out2.last_hidden_state, &ids2_v)
            .expect("bigG has a text projection");
        assert_close_scaled(
            &format!("{layout}: te2_text_embeds"),
            &tensor_to_vec(pooled),
            &golden.get("te2_text_embeds").f64(),
            TOL,
        );
    }
}

#[test]
fn sdxl_unet_matches_every_block_activation_with_size_conditioning() {
    let golden = Fixtures::load("sdxl/golden/unet.safetensors");
    for (layout, model) in layouts("sdxl/pipeline", "sdxl/checkpoint.safetensors") {
        assert!(model.unet.takes_added_conditioning(), "{layout}");
        check_unet(&layout, &model, &golden, Some(added(&golden)));
    }
}

#[test]
fn refiner_encodes_with_bigg_alone_and_its_unet_takes_aesthetic_scores() {
    let golden = Fixtures::load("sdxl/refiner/golden_unet.safetensors");
    for (layout, model) in layouts("sdxl/refiner", "sdxl/refiner_checkpoint.safetensors") {
        assert_eq!(model.family(), Family::SdxlRefiner, "{layout}");
        assert_eq!(model.encoders.len(), 1, "{layout}: bigG only");
        let encoder = &model.encoders[0];
        for (which, ids_key) in [
            ("prompt", "te2_input_ids"),
            ("negative_prompt", "negative_te2_input_ids"),
        ] {
            let (t, v) = ids(golden.get(ids_key));
            let out = encoder.network().forward(t);
            let n = out.hidden_states.len();
            assert_close_scaled(
                &format!("{layout}: {which}_embeds"),
                &tensor_to_vec(out.hidden_states[n - 2].clone()),
                &golden.get(&format!("{which}_embeds")).f64(),
                TOL,
            );
            let pooled = encoder
                .network()
                .pooled(&out.last_hidden_state, &v)
                .unwrap();
            let key = if which == "prompt" {
                "pooled_prompt_embeds".to_string()
            } else {
                "negative_pooled_prompt_embeds".to_string()
            };
            assert_close_scaled(
                &format!("{layout}: {key}"),
                &tensor_to_vec(pooled),
                &golden.get(&key).f64(),
                TOL,
            );
        }
        check_unet(&layout, &model, &golden, Some(added(&golden)));
    }
}

/// An empty float tensor, as ComfyUI writes its `v_pred` / `ztsnr` markers.
fn marker() -> ember_tests::Fixture {
    ember_tests::Fixture::from_f32(vec![0], &[])
}

#[test]
fn sdxl_files_marked_v_pred_and_ztsnr_run_as_such() {
    use inference::schedule::diffusers::Prediction;
    let dir = tempfile::tempdir().unwrap();
    let options = LoadOptions {
        config_dir: Some(reference("sdxl/pipeline")),
        ..LoadOptions::new(Device::flex(), Precision::F32)
    };
    let write = |name: &str, keys: &[&str]| {
        let path = dir.path().join(name);
        let extra = keys.iter().map(|k| (k.to_string(), marker())).collect();
        ember_tests::write_edited("sdxl/checkpoint.safetensors", &path, |_, _| true, extra);
        load(&path, &options).unwrap()
    };
    let both = write("vpred-ztsnr.safetensors", &["v_pred", "ztsnr"]);
    let caps = both.capabilities();
    assert_eq!(
        (caps.prediction, caps.zero_terminal_snr),
        (Prediction::V, true)
    );
    assert_eq!(caps.label(), "SDXL v-prediction (zero terminal SNR)");
    assert!(
        both.info.report.ignored.iter().any(|k| k == "v_pred"),
        "the markers are known, not unknown: {:?}",
        both.info.report
    );
    let v_only = write("vpred.safetensors", &["v_pred"]).capabilities();
    assert_eq!(
        (v_only.prediction, v_only.zero_terminal_snr),
        (Prediction::V, false)
    );
    // As ComfyUI reads them, `ztsnr` alone marks nothing.
    let ztsnr_only = write("ztsnr.safetensors", &["ztsnr"]).capabilities();
    assert_eq!(
        (ztsnr_only.prediction, ztsnr_only.zero_terminal_snr),
        (Prediction::Epsilon, false)
    );
}

#[test]
fn an_a1111_yaml_beside_an_sd2_file_decides_its_prediction() {
    use inference::schedule::diffusers::Prediction;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("model.safetensors");
    std::fs::copy(reference("sd2v/checkpoint.safetensors"), &file).unwrap();
    let options = LoadOptions {
        config_dir: Some(reference("sd2v/pipeline")),
        ..LoadOptions::new(Device::flex(), Precision::F32)
    };
    let yaml = dir.path().join("model.yaml");
    for (text, expected) in [
        (
            "model:\n  params:\n    parameterization: \"v\"\n",
            Prediction::V,
        ),
        (
            "model:\n  params:\n    linear_start: 0.00085\n",
            Prediction::Epsilon,
        ),
    ] {
        std::fs::write(&yaml, text).unwrap();
        assert_eq!(
            load(&file, &options).unwrap().prediction,
            expected,
            "{text}"
        );
    }
    // An explicit override wins, and the disagreement is noted.
    let forced = LoadOptions {
        prediction: Some(Prediction::V),
        ..options
    };
    let model = load(&file, &forced).unwrap();
    assert_eq!(model.prediction, Prediction::V);
    assert!(
        model
            .info
            .report
            .notes()
            .iter()
            .any(|n| n.contains("say epsilon")),
        "{:?}",
        model.info.report.notes()
    );
}
