//! The text encoder, UNet and VAE against `sd15/golden/*`, loaded from the diffusers folder
//! and from the single-file checkpoint (which hold the same weights).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use burn::tensor::{Device, Int, Tensor, TensorData};
use ember_tests::torch_file::{self, TorchTensor};
use ember_tests::{Fixtures, assert_close_scaled, reference};
use inference::device::{Precision, tensor_from_vec, tensor_to_vec};
use inference::model::Model;
use inference::weights::{LoadOptions, load};

/// The reference README's tolerance for single network calls: 1e-4 of max(1, max|ref|).
const TOL: f64 = 1e-4;

fn options(config_dir: Option<&str>) -> LoadOptions {
    LoadOptions {
        config_dir: config_dir.map(reference),
        ..LoadOptions::new(Device::flex(), Precision::F32)
    }
}

/// The sd15 model in every layout: the diffusers folder, the single-file safetensors and
/// the same weights as a PyTorch `.ckpt` (written here from the safetensors file).
pub fn all_layouts() -> Vec<(&'static str, Model)> {
    let ckpt_dir = tempfile::tempdir().unwrap();
    let ckpt = ckpt_dir.path().join("checkpoint.ckpt");
    let source = Fixtures::load("sd15/checkpoint.safetensors");
    let tensors: Vec<TorchTensor> = source
        .tensors
        .iter()
        .filter(|(_, t)| t.dtype == safetensors::Dtype::F32)
        .map(|(name, t)| TorchTensor {
            name: name.clone(),
            shape: t.shape.clone(),
            data: t.f32(),
        })
        .collect();
    torch_file::write_checkpoint(&ckpt, &tensors);
    vec![
        (
            "diffusers folder",
            load(&reference("sd15/pipeline"), &options(None)).unwrap(),
        ),
        (
            "single file",
            load(
                &reference("sd15/checkpoint.safetensors"),
                &options(Some("sd15/pipeline")),
            )
            .unwrap(),
        ),
        (
            ".ckpt pickle",
            load(&ckpt, &options(Some("sd15/pipeline"))).unwrap(),
        ),
    ]
}

pub fn tensor<const D: usize>(f: &ember_tests::Fixture) -> Tensor<D> {
    let dims: [usize; D] = f.shape.clone().try_into().expect("rank");
    tensor_from_vec(f.f32(), dims, &Device::flex())
}

#[test]
fn text_encoder_matches_every_hidden_state() {
    let golden = Fixtures::load("sd15/golden/text_encoder.safetensors");
    let ids = golden.get("input_ids");
    let [batch, tokens] = [ids.shape[0], ids.shape[1]];
    for (layout, model) in all_layouts() {
        let ids_t =
            Tensor::<2, Int>::from_data(TensorData::new(ids.i64(), [batch, tokens]), &model.device);
        let out = model.encoders[0].network().forward(ids_t.clone());
        let hidden = golden.get("hidden_states").f64();
        let per = hidden.len() / out.hidden_states.len();
        assert_eq!(
            out.hidden_states.len(),
            golden.get("hidden_states").shape[0],
            "{layout}: hidden state count"
        );
        for (k, h) in out.hidden_states.iter().enumerate() {
            let what = format!("{layout}: hidden_states[{k}]");
            assert_close_scaled(
                &what,
                &tensor_to_vec(h.clone()),
                &hidden[k * per..(k + 1) * per],
                TOL,
            );
        }
        let last = tensor_to_vec(out.last_hidden_state.clone());
        assert_close_scaled(
            &format!("{layout}: last_hidden_state"),
            &last,
            &golden.get("last_hidden_state").f64(),
            TOL,
        );
        let n = out.hidden_states.len();
        let penultimate = out.hidden_states[n - 2].clone();
        let pen = tensor_to_vec(penultimate.clone());
        assert_close_scaled(
            &format!("{layout}: penultimate"),
            &pen,
            &golden.get("penultimate").f64(),
            TOL,
        );
        let skip = tensor_to_vec(model.encoders[0].network().final_layer_norm(penultimate));
        assert_close_scaled(
            &format!("{layout}: penultimate_final_ln"),
            &skip,
            &golden.get("penultimate_final_ln").f64(),
            TOL,
        );
        // pooler_output: the last hidden state at the first end-of-text token.
        let hidden_size = last.len() / (batch * tokens);
        let ids_v = ids.i64();
        let mut pooled = Vec::new();
        for b in 0..batch {
            let eos = ids_v[b * tokens..(b + 1) * tokens]
                .iter()
                .position(|&t| t == 49407)
                .expect("EOS");
            let at = (b * tokens + eos) * hidden_size;
            pooled.extend_from_slice(&last[at..at + hidden_size]);
        }
        assert_close_scaled(
            &format!("{layout}: pooler_output"),
            &pooled,
            &golden.get("pooler_output").f64(),
            TOL,
        );
    }
}

#[test]
fn unet_matches_every_block_activation() {
    let golden = Fixtures::load("sd15/golden/unet.safetensors");
    for (layout, model) in all_layouts() {
        crate::families::check_unet(layout, &model, &golden, None);

        // A batch-1 call with an integer timestep.
        let t = golden.get("scalar_timestep").i64()[0] as f32;
        let out = model.unet.forward(
            tensor(golden.get("scalar_sample")),
            &[t],
            &tensor(golden.get("scalar_encoder_hidden_states")),
            None,
        );
        assert_close_scaled(
            &format!("{layout}: UNet scalar_out"),
            &tensor_to_vec(out),
            &golden.get("scalar_out").f64(),
            TOL,
        );
    }
}

#[test]
fn the_unets_attention_asks_the_cancel_in_scope() {
    // What the worker puts in scope for a job: a cancel that reaches inside one attention
    // call (minutes at 2048² on the CPU), not only between the UNet's blocks.
    let golden = Fixtures::load("sd15/golden/unet.safetensors");
    let model = load(&reference("sd15/pipeline"), &options(None)).unwrap();
    let call = || {
        model.unet.forward(
            tensor(golden.get("sample")),
            &golden.get("timestep").f32(),
            &tensor(golden.get("encoder_hidden_states")),
            None,
        )
    };
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let go_on = Arc::new(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        false
    });
    let whole = kernels::interrupt::interruptible(go_on, call).expect("nothing said stop");
    assert!(asked.load(Ordering::Relaxed) > 0, "no kernel asked");
    assert_eq!(tensor_to_vec(whole), tensor_to_vec(call()));
    let stopped = kernels::interrupt::interruptible(Arc::new(|| true), call);
    assert!(stopped.is_none(), "a stopped attention's result was kept");
}

#[test]
fn vae_encodes_and_decodes() {
    let golden = Fixtures::load("sd15/golden/vae.safetensors");
    for (layout, model) in all_layouts() {
        let decoded = model.vae.decode(tensor(golden.get("decode_in")));
        assert_close_scaled(
            &format!("{layout}: VAE decode_out"),
            &tensor_to_vec(decoded),
            &golden.get("decode_out").f64(),
            TOL,
        );
        let posterior = model.vae.encode(tensor(golden.get("encode_in")));
        let mean = tensor_to_vec(posterior.mean.clone());
        assert_close_scaled(
            &format!("{layout}: VAE encode_mean"),
            &mean,
            &golden.get("encode_mean").f64(),
            TOL,
        );
        let logvar = tensor_to_vec(posterior.logvar.clone());
        assert_close_scaled(
            &format!("{layout}: VAE encode_logvar"),
            &logvar,
            &golden.get("encode_logvar").f64(),
            TOL,
        );
        let std = tensor_to_vec(posterior.std());
        assert_close_scaled(
            &format!("{layout}: VAE encode_std"),
            &std,
            &golden.get("encode_std").f64(),
            TOL,
        );
    }
}

#[test]
fn every_layout_gives_identical_outputs() {
    let golden = Fixtures::load("sd15/golden/unet.safetensors");
    let outs: Vec<Vec<f32>> = all_layouts()
        .into_iter()
        .map(|(_, m)| {
            let o = m.unet.forward(
                tensor(golden.get("sample")),
                &golden.get("timestep").f32(),
                &tensor(golden.get("encoder_hidden_states")),
                None,
            );
            tensor_to_vec(o)
        })
        .collect();
    assert_eq!(outs.len(), 3);
    for out in &outs[1..] {
        assert_eq!(out, &outs[0], "every layout holds bit-identical weights");
    }
}

#[test]
fn half_precision_files_load_into_f32() {
    // The same checkpoint stored as F16 and BF16 must load to exactly the f32 values of its
    // rounded weights: compare against an F32 file holding those rounded values.
    use ember_tests::{Fixture, write_edited_checkpoint};
    let dir = tempfile::tempdir().unwrap();
    let golden = Fixtures::load("sd15/golden/unet.safetensors");
    let run = |path: &std::path::Path| {
        let m = load(path, &options(Some("sd15/pipeline"))).unwrap();
        let out = m.unet.forward(
            tensor(golden.get("sample")),
            &golden.get("timestep").f32(),
            &tensor(golden.get("encoder_hidden_states")),
            None,
        );
        (tensor_to_vec(out), m.info.report.notes())
    };
    for (dtype, to_bits, from_bits) in [
        (
            safetensors::Dtype::F16,
            (|v: f32| half::f16::from_f32(v).to_bits()) as fn(f32) -> u16,
            (|b: u16| half::f16::from_bits(b).to_f32()) as fn(u16) -> f32,
        ),
        (
            safetensors::Dtype::BF16,
            |v: f32| half::bf16::from_f32(v).to_bits(),
            |b: u16| half::bf16::from_bits(b).to_f32(),
        ),
    ] {
        let half_path = dir.path().join(format!("{dtype:?}.safetensors"));
        let rounded_path = dir.path().join(format!("{dtype:?}-rounded.safetensors"));
        let to_half = |_: &str, t: &mut Fixture| {
            if t.dtype == safetensors::Dtype::F32 {
                t.bytes = t
                    .f32()
                    .into_iter()
                    .flat_map(|v| to_bits(v).to_le_bytes())
                    .collect();
                t.dtype = dtype;
            }
            true
        };
        write_edited_checkpoint(&half_path, to_half, Vec::new());
        let round = |_: &str, t: &mut Fixture| {
            if t.dtype == safetensors::Dtype::F32 {
                *t = Fixture::from_f32(
                    t.shape.clone(),
                    &t.f32()
                        .into_iter()
                        .map(|v| from_bits(to_bits(v)))
                        .collect::<Vec<_>>(),
                );
            }
            true
        };
        write_edited_checkpoint(&rounded_path, round, Vec::new());
        let ((from_half, notes), (from_rounded, _)) = (run(&half_path), run(&rounded_path));
        assert_eq!(
            from_half, from_rounded,
            "{dtype:?} weights load to their exact f32 values"
        );
        assert!(
            notes.iter().any(|n| n.contains("converted on load")),
            "{dtype:?}: the report mentions the conversion"
        );
    }
}
