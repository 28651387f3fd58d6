//! LyCORIS adapters against A1111's merges (`sd15/lycoris`): LoHa, LoKr (factored and
//! full), LoCon and DoRA give A1111's merged weights, and a LoHa's networks and run reproduce
//! diffusers'.

use ember_tests::{Fixtures, json};
use inference::lora::set;
use inference::model::Model;
use inference::schedule::diffusers::SchedulerConfig;

use crate::lora::{check_networks, check_weight, model, scale_of, spec};
use crate::pipelines::{check_run_request, request_for};

/// `merged_<kind>.safetensors`: `<unet|text_encoder>.<path>.weight` -> the merged weight.
fn check_merged_file(what: &str, model: &Model, merged: &Fixtures) {
    assert!(!merged.tensors.is_empty(), "{what}: empty merged file");
    for (name, fixture) in &merged.tensors {
        check_weight(what, model, name, &fixture.f64());
    }
}

#[test]
fn lycoris_adapters_merge_as_a1111_merges_them() {
    let lycoris = json("sd15/lycoris/lycoris.json");
    let scale = scale_of(&lycoris);
    // A1111's DoRA (it differs from ComfyUI's on the output-axis magnitude).
    for (adapter, merged) in [
        ("loha", "merged_loha"),
        ("lokr", "merged_lokr"),
        ("lokr_full", "merged_lokr_full"),
        ("locon", "merged_locon"),
        ("dora", "merged_dora_a1111"),
        ("dora_out", "merged_dora_out_a1111"),
    ] {
        let mut model = model("sd15/pipeline");
        let file = format!("sd15/lycoris/{adapter}.safetensors");
        let report = set(&mut model, &[spec(&file, scale)]).unwrap();
        assert!(report.is_empty(), "{adapter}: {report:?}");
        let merged = Fixtures::load(&format!("sd15/lycoris/{merged}.safetensors"));
        check_merged_file(adapter, &model, &merged);
    }
}

#[test]
fn the_loha_golden_and_run_reproduce() {
    let golden = Fixtures::load("sd15/lycoris/golden_loha.safetensors");
    let run = json("sd15/lycoris/txt2img_euler_loha.json");
    let scale = run["adapter_scale"].as_f64().unwrap() as f32;
    let mut model = model("sd15/pipeline");
    set(&mut model, &[spec("sd15/lycoris/loha.safetensors", scale)]).unwrap();
    check_networks("LoHa", &model, &golden);
    let config = SchedulerConfig::from_json(&run["scheduler_config"].to_string()).unwrap();
    let request = request_for(&model, "sd15/lycoris", &run, config);
    check_run_request(
        "sd15/lycoris",
        "txt2img_euler_loha",
        "sd15/pipeline",
        (&model, None),
        &request,
    );
}
