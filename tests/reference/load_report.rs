//! The load report: tensors a checkpoint holds that no network takes (unknown, ignored
//! training buffers) and a weight stored twice, named so the user can see what was left.

use ember_tests::{Fixture, Fixtures, write_edited_checkpoint};
use inference::weights::load;

use crate::engine::single_file_options;

#[test]
fn load_report_names_unused_and_ignored_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("extra.safetensors");
    let extra = vec![(
        "some_extension.weight".to_string(),
        Fixture::from_f32(vec![2], &[1.0, 2.0]),
    )];
    write_edited_checkpoint(&path, |_, _| true, extra);
    let options = single_file_options();
    let m = load(&path, &options).unwrap();
    let report = &m.info.report;
    assert_eq!(report.unknown, vec!["some_extension.weight".to_string()]);
    assert!(
        report.ignored.iter().any(|k| k == "alphas_cumprod"),
        "the DDPM buffers are recognised"
    );
    assert!(
        report
            .notes()
            .iter()
            .any(|n| n.contains("some_extension.weight"))
    );
    assert_eq!(
        report.components.iter().map(|c| c.applied).sum::<usize>(),
        m.info.tensor_count - report.ignored.len() - 1
    );
}

/// Two file keys that name one weight (CLIP's with and without `text_model.`, as older
/// checkpoints and merges may hold both): the first by name loads, the other is reported.
#[test]
fn a_weight_stored_twice_loads_once_and_the_copy_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("twice.safetensors");
    let key = "cond_stage_model.transformer.text_model.encoder.layers.0.self_attn.q_proj.weight";
    let copy = key.replace("text_model.", "");
    let original = Fixtures::load("sd15/checkpoint.safetensors").tensors[key].clone();
    let changed: Vec<f32> = original.f32().iter().map(|v| v + 1.0).collect();
    let extra = vec![(
        copy.clone(),
        Fixture::from_f32(original.shape.clone(), &changed),
    )];
    write_edited_checkpoint(&path, |_, _| true, extra);
    let options = single_file_options();
    let model = load(&path, &options).unwrap();
    let copies: Vec<&String> = model
        .info
        .report
        .components
        .iter()
        .flat_map(|c| &c.unused)
        .filter(|k| k.contains("a second copy"))
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert!(
        copies[0].contains(key) && copies[0].contains(&copy),
        "{}",
        copies[0]
    );
    let loaded = "text_model.encoder.layers.0.self_attn.q_proj.weight";
    let weight =
        inference::lora::read_weight(&model, inference::lora::Network::TextEncoder(0), loaded)
            .unwrap();
    // The first by name: `…transformer.encoder…` before `…transformer.text_model…`.
    let first = if copy.as_str() < key {
        &changed
    } else {
        &original.f32()
    };
    assert_eq!(&weight, first, "the first copy by name");
}
