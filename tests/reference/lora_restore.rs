//! Taking LoRAs out without subtracting: a model loaded from `.safetensors` gets the LoRA
//! merged into its loaded weights' own buffers and reads them from the file again; a
//! pickle's weights are kept as loaded and put back. Either way, in every layout, the
//! loaded weights come back bit for bit, and a checkpoint changed on disk since loading is
//! refused, never read as the loaded one.

use burn::backend::Flex;
use burn::tensor::{Device, Tensor};
use ember_tests::reference;
use inference::device::Precision;
use inference::lora::{LoraSpec, Network, read_weight, set};
use inference::model::Model;
use inference::weights::{LoadOptions, load};

const KEY: &str = "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.weight";

fn spec(strength: f32) -> LoraSpec {
    LoraSpec {
        path: reference("sd15/lora/lora_kohya.safetensors"),
        text_encoder: strength,
        unet: strength,
    }
}

fn weight(model: &Model) -> Vec<f32> {
    read_weight(model, Network::Unet, KEY).unwrap()
}

/// Where the UNet's first `to_q` weight keeps its values.
fn buffer_address(model: &Model) -> usize {
    let w: Tensor<2> = model.unet.down_blocks[0].attentions[0].transformer_blocks[0]
        .attn1
        .to_q
        .weight
        .val();
    let flex = w.try_into_primitive::<Flex>().ok().unwrap();
    flex.bytes().as_ptr() as usize
}

#[test]
fn every_layout_gets_its_loaded_weights_back_and_safetensors_merge_in_place() {
    let mut merged_by_layout = Vec::new();
    for (layout, mut model) in crate::components::all_layouts() {
        let loaded = weight(&model);
        let address = buffer_address(&model);
        set(&mut model, &[spec(0.8)]).unwrap();
        let merged = weight(&model);
        assert_ne!(merged, loaded, "{layout}: the LoRA changed nothing");
        let in_place = buffer_address(&model) == address;
        let pickle = layout.contains("ckpt");
        assert_eq!(
            in_place, !pickle,
            "{layout}: merged in place {in_place} (only a .safetensors weight can be read again)"
        );
        set(&mut model, &[spec(0.3)]).unwrap();
        set(&mut model, &[spec(0.8)]).unwrap();
        assert_eq!(weight(&model), merged, "{layout}: merged again differently");
        set(&mut model, &[]).unwrap();
        assert_eq!(weight(&model), loaded, "{layout}: not the loaded weights");
        merged_by_layout.push((layout, merged));
    }
    let (first, merged) = &merged_by_layout[0];
    for (layout, other) in &merged_by_layout[1..] {
        assert_eq!(other, merged, "{layout} merges unlike {first}");
    }
}

#[test]
fn a_checkpoint_changed_on_disk_after_loading_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    std::fs::copy(reference("sd15/checkpoint.safetensors"), &path).unwrap();
    let options = LoadOptions {
        config_dir: Some(reference("sd15/pipeline")),
        ..LoadOptions::new(Device::flex(), Precision::F32)
    };
    let mut model = load(&path, &options).unwrap();
    set(&mut model, &[spec(1.0)]).unwrap();
    // Overwritten in place (the same size, another last byte, a later modification time),
    // as a tool saving over the file would.
    let mut bytes = std::fs::read(&path).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(later)
        .unwrap();
    for (what, specs) in [
        ("remove", vec![]),
        ("again", vec![]),
        ("other", vec![spec(0.5)]),
    ] {
        let message = set(&mut model, &specs).unwrap_err().to_string();
        assert!(
            message.contains("changed on disk") && message.contains("load the model again"),
            "{what}: {message}"
        );
        assert!(model.lora.applied().is_empty(), "{what}");
    }
}

/// Checkpoints saved in f16 and bf16 (as most are shared), loaded in f32: the weights read
/// again after a LoRA are the loaded ones bit for bit (a widening conversion and the Linear
/// transpose, done in place).
#[test]
fn half_precision_checkpoints_are_read_again_exactly() {
    let dir = tempfile::tempdir().unwrap();
    for (dtype, narrow) in [
        (
            safetensors::Dtype::F16,
            (|v: f32| half::f16::from_f32(v).to_le_bytes()) as fn(f32) -> [u8; 2],
        ),
        (safetensors::Dtype::BF16, |v: f32| {
            half::bf16::from_f32(v).to_le_bytes()
        }),
    ] {
        let path = dir.path().join(format!("{dtype:?}.safetensors"));
        ember_tests::write_edited(
            "sd15/checkpoint.safetensors",
            &path,
            |_, t| {
                if t.dtype == safetensors::Dtype::F32 {
                    t.bytes = t.f32().into_iter().flat_map(narrow).collect();
                    t.dtype = dtype;
                }
                true
            },
            Vec::new(),
        );
        let options = LoadOptions {
            config_dir: Some(reference("sd15/pipeline")),
            ..LoadOptions::new(Device::flex(), Precision::F32)
        };
        let mut model = load(&path, &options).unwrap();
        let loaded = weight(&model);
        let text_key = "text_model.encoder.layers.0.self_attn.q_proj.weight";
        let text = read_weight(&model, Network::TextEncoder(0), text_key).unwrap();
        set(&mut model, &[spec(0.7)]).unwrap();
        assert_ne!(
            weight(&model),
            loaded,
            "{dtype:?}: the LoRA changed nothing"
        );
        assert_ne!(
            read_weight(&model, Network::TextEncoder(0), text_key).unwrap(),
            text,
            "{dtype:?}: the LoRA left the text encoder"
        );
        set(&mut model, &[spec(0.2)]).unwrap();
        set(&mut model, &[]).unwrap();
        assert_eq!(weight(&model), loaded, "{dtype:?}: UNet");
        assert_eq!(
            read_weight(&model, Network::TextEncoder(0), text_key).unwrap(),
            text,
            "{dtype:?}: text encoder"
        );
    }
}

/// A LoRA file is opened and checked once while it stays merged (a change of strength does
/// not read it again), but one saved over between two merges is opened again: the next
/// merge uses the new factors, as a fresh model merging the new file does.
#[test]
fn a_lora_saved_over_between_merges_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lora.safetensors");
    let doubled = |_: &str, t: &mut ember_tests::Fixture| {
        if t.shape.len() >= 2 {
            t.bytes = t
                .f32()
                .iter()
                .flat_map(|v| (v * 2.0).to_le_bytes())
                .collect();
        }
        true
    };
    std::fs::copy(reference("sd15/lora/lora_kohya.safetensors"), &path).unwrap();
    let at = |strength| LoraSpec {
        path: path.clone(),
        ..spec(strength)
    };
    let options = || LoadOptions {
        config_dir: Some(reference("sd15/pipeline")),
        ..LoadOptions::new(Device::flex(), Precision::F32)
    };
    let checkpoint = reference("sd15/checkpoint.safetensors");
    let mut model = load(&checkpoint, &options()).unwrap();
    set(&mut model, &[at(0.8)]).unwrap();
    set(&mut model, &[at(0.6)]).unwrap();
    let before = weight(&model);

    ember_tests::write_edited(
        "sd15/lora/lora_kohya.safetensors",
        &path,
        doubled,
        Vec::new(),
    );
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(later).unwrap();
    set(&mut model, &[at(0.5)]).unwrap();

    let mut fresh = load(&checkpoint, &options()).unwrap();
    set(&mut fresh, &[at(0.5)]).unwrap();
    assert_eq!(
        weight(&model),
        weight(&fresh),
        "the old file's factors were merged"
    );
    assert_ne!(weight(&model), before);
}
