//! A VAE of its own chosen for a request (A1111's SD VAE, `--vae`): files in the LDM and
//! diffusers key layouts and a diffusers folder read into the model's architecture, put in
//! place of the model's own and taken out again; another family's VAE decoding a run's
//! latents as it does on its own model; the refiner decoding with it; bad files refused.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use ember_tests::{Fixture, Fixtures, Json, assert_close, pixel_diff, reference};
use inference::api::{GenerateRequest, VaeChoice};
use inference::device::{Precision, tensor_from_vec, tensor_to_vec};
use inference::external_vae::{LoadedVae, VaeUse, set_for_request};
use inference::imaging;
use inference::model::Model;
use inference::pipeline::{generate, generate_refined};
use inference::schedule::diffusers::SchedulerConfig;
use inference::weights::{LoadOptions, load};

/// Reference README: latents of a whole run within 1e-4 of the largest final latent.
const LATENT_TOL: f64 = 1e-4;
/// Most pixel levels a channel may be off (the issue allows 2).
const PIXEL_TOL: i64 = 2;

fn f32_model(rel: &str) -> Model {
    load(
        &reference(rel),
        &LoadOptions::new(Device::flex(), Precision::F32),
    )
    .unwrap()
}

/// Writes a file's `first_stage_model.*` tensors as a VAE file of their own: with the
/// prefix dropped (as `vae-ft-mse-840000-ema-pruned` has it) unless `keep_prefix`, each
/// passed through `edit`, with `extra` tensors added.
fn vae_of_checkpoint(
    checkpoint: &str,
    dst: &Path,
    keep_prefix: bool,
    mut edit: impl FnMut(&str, &mut Fixture),
    extra: Vec<(String, Fixture)>,
) -> PathBuf {
    let src = Fixtures::load(checkpoint);
    let mut kept = Vec::new();
    for (name, mut tensor) in src.tensors {
        let Some(bare) = name.strip_prefix("first_stage_model.") else {
            continue;
        };
        edit(bare, &mut tensor);
        let name = if keep_prefix {
            name.clone()
        } else {
            bare.to_string()
        };
        kept.push((name, tensor));
    }
    kept.extend(extra);
    write_tensors(dst, &kept);
    dst.to_path_buf()
}

fn write_tensors(dst: &Path, tensors: &[(String, Fixture)]) {
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(n, t)| {
            let view = safetensors::tensor::TensorView::new(t.dtype, t.shape.clone(), &t.bytes);
            (n.clone(), view.unwrap())
        })
        .collect();
    std::fs::write(dst, safetensors::serialize(views, None).unwrap()).unwrap();
}

/// The diffusers VAE file of `folder` with diffusers' pre-0.14 attention names
/// (`query`, `key`, `value`, `proj_attn`), as sd-vae-ft-mse's folder has them.
fn with_deprecated_names(folder: &str, dst: &Path) -> PathBuf {
    let src = Fixtures::load(&format!("{folder}/vae/diffusion_pytorch_model.safetensors"));
    let renamed: Vec<(String, Fixture)> = (src.tensors.into_iter())
        .map(|(name, t)| {
            let name = name
                .replace(".to_q.", ".query.")
                .replace(".to_k.", ".key.")
                .replace(".to_v.", ".value.")
                .replace(".to_out.0.", ".proj_attn.");
            (name, t)
        })
        .collect();
    assert!(renamed.iter().any(|(n, _)| n.contains(".query.")));
    write_tensors(dst, &renamed);
    dst.to_path_buf()
}

fn copy_folder(src: &Path, dst: &Path) -> PathBuf {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap().flatten() {
        std::fs::copy(entry.path(), dst.join(entry.file_name())).unwrap();
    }
    dst.to_path_buf()
}

fn choose(
    models: &mut [&mut Model],
    request: &GenerateRequest,
    cache: &mut Option<LoadedVae>,
) -> VaeUse {
    set_for_request(models, request, cache, false).unwrap()
}

fn pixels(model: &Model, request: &GenerateRequest) -> Vec<u8> {
    let mut quiet = |_| std::ops::ControlFlow::Continue(());
    generate(model, request, &mut quiet).unwrap().images[0]
        .pixels
        .clone()
}

#[test]
fn the_models_own_vae_read_from_files_of_each_layout_makes_its_image() {
    let mut model = f32_model("sd15/pipeline");
    let request = crate::engine::request(&model, 11);
    let own = pixels(&model, &request);
    let dir = tempfile::tempdir().unwrap();
    let scalar = |v: f32| Fixture::from_f32(vec![], &[v]);
    let files = [
        vae_of_checkpoint(
            "sd15/checkpoint.safetensors",
            &dir.path().join("ldm.safetensors"),
            false,
            |_, _| {},
            vec![],
        ),
        // A VAE saved by its trainer: the prefix kept, a loss network and EMA counters
        // beside it (A1111 drops those).
        vae_of_checkpoint(
            "sd15/checkpoint.safetensors",
            &dir.path().join("trained.safetensors"),
            true,
            |_, _| {},
            vec![
                ("loss.logvar".into(), scalar(0.0)),
                ("model_ema.decay".into(), scalar(0.999)),
            ],
        ),
        with_deprecated_names(
            "sd15/pipeline",
            &dir.path().join("old-diffusers.safetensors"),
        ),
        copy_folder(
            &reference("sd15/pipeline/vae"),
            &dir.path().join("vae-folder"),
        ),
    ];
    let mut cache = None;
    for path in &files {
        let mut r = request.clone();
        r.vae = VaeChoice::File(path.clone());
        let used = choose(&mut [&mut model], &r, &mut cache);
        let (name, hash) = used.used.expect("a VAE was put in");
        assert_eq!(name, path.file_name().unwrap().to_string_lossy());
        assert_eq!(
            hash.is_some(),
            path.is_file(),
            "{name}: A1111 hashes files only"
        );
        assert!(used.warnings.is_empty(), "{name}: {:?}", used.warnings);
        assert_eq!(
            pixels(&model, &r),
            own,
            "{name}: the same weights, the same image"
        );
    }
}

#[test]
fn another_vae_changes_the_picture_and_the_models_own_comes_back() {
    let mut model = f32_model("sd15/pipeline");
    let request = crate::engine::request(&model, 12);
    let own = pixels(&model, &request);
    let dir = tempfile::tempdir().unwrap();
    // The same VAE with its output's red channel shifted: a VAE of other weights.
    let shifted = vae_of_checkpoint(
        "sd15/checkpoint.safetensors",
        &dir.path().join("shifted.safetensors"),
        false,
        |name, t| {
            if name == "decoder.conv_out.bias" {
                let mut v = t.f32();
                v[0] += 0.5;
                *t = Fixture::from_f32(t.shape.clone(), &v);
            }
        },
        vec![],
    );
    let mut cache = None;
    let mut r = request.clone();
    r.vae = VaeChoice::File(shifted);
    choose(&mut [&mut model], &r, &mut cache);
    let other = pixels(&model, &r);
    let (worst, _) = pixel_diff(
        &other,
        &own.iter().map(|&p| i64::from(p)).collect::<Vec<_>>(),
    );
    assert!(
        worst > 20,
        "the shifted VAE's red is off by {worst} levels only"
    );
    let red_brighter = (other.chunks(3).zip(own.chunks(3)))
        .filter(|(a, b)| a[0] > b[0])
        .count();
    assert!(
        red_brighter > other.len() / 3 / 2,
        "red is brighter in most pixels"
    );

    for back in [VaeChoice::ModelsOwn, VaeChoice::Automatic] {
        choose(&mut [&mut model], &r, &mut cache);
        let mut own_request = request.clone();
        own_request.vae = back.clone();
        let used = choose(&mut [&mut model], &own_request, &mut cache);
        assert!(used.used.is_none(), "{back:?}");
        assert_eq!(
            pixels(&model, &own_request),
            own,
            "{back:?}: the model's own again"
        );
    }
}

/// The `first_stage_model.*` VAE of the SD 2.x checkpoint (the SDXL VAE's architecture,
/// other weights), as a file of its own.
fn sd2_vae(dir: &Path) -> PathBuf {
    let path = dir.join("sd2-vae.safetensors");
    vae_of_checkpoint(
        "sd2v/checkpoint.safetensors",
        &path,
        false,
        |_, _| {},
        vec![],
    )
}

/// `latents` (a run's final latents, in the sampler's scale) as `vae_model`'s VAE decodes
/// them after dividing by `scaling_factor`, as 8-bit pixels.
fn decoded_by(vae_model: &Model, latents: &Fixture, scaling_factor: f32) -> Vec<u8> {
    let dims: [usize; 4] = latents.shape.clone().try_into().unwrap();
    let z = tensor_from_vec(latents.f32(), dims, &Device::flex()).div_scalar(scaling_factor);
    let decoded = tensor_to_vec(vae_model.vae.decode(z));
    let (h, w) = (
        dims[2] * vae_model.vae_factor(),
        dims[3] * vae_model.vae_factor(),
    );
    imaging::from_planar_signed(&decoded, w as u32, h as u32).pixels
}

fn run(rel: &str) -> (Json, SchedulerConfig) {
    let run = ember_tests::json(&format!("{rel}.json"));
    let config = SchedulerConfig::from_json(&run["scheduler_config"].to_string()).unwrap();
    (run, config)
}

#[test]
fn another_familys_vae_decodes_the_runs_latents_as_on_its_own_model() {
    // SDXL's run with the SD 2.x VAE: the latents are still diffusers' (a VAE does not take
    // part in denoising), and the picture is those latents, divided by SDXL's scaling factor
    // (the model's, whatever VAE decodes), through the SD 2.x VAE. That VAE's decode is
    // checked against diffusers by the sd2v runs.
    let mut sdxl = f32_model("sdxl/pipeline");
    let sd2 = f32_model("sd2v/pipeline");
    let (json, config) = run("sdxl/runs/txt2img_euler");
    let mut request = crate::pipelines::request_for(&sdxl, "sdxl/runs", &json, config);
    let dir = tempfile::tempdir().unwrap();
    request.vae = VaeChoice::File(sd2_vae(dir.path()));
    let sdxl_scale = sdxl.vae_config.scaling_factor;
    let mut cache = None;
    choose(&mut [&mut sdxl], &request, &mut cache);
    assert_eq!(
        sdxl.vae_config.scaling_factor, sdxl_scale,
        "the model's scaling stays"
    );
    let mut quiet = |_| std::ops::ControlFlow::Continue(());
    let generation = generate(&sdxl, &request, &mut quiet).unwrap();
    check_decoded_by_sd2(&generation, "sdxl/runs/txt2img_euler", &sd2, sdxl_scale);
}

/// `generation` made `run`'s latents, and its picture is them through the SD 2.x VAE.
fn check_decoded_by_sd2(
    generation: &inference::api::Generation,
    run: &str,
    sd2: &Model,
    sdxl_scale: f32,
) {
    let golden = Fixtures::load(&format!("{run}.safetensors"));
    let final_latents = golden.get("final_latents");
    let expected_latents = final_latents.f64();
    let scale = expected_latents.iter().fold(0f64, |m, v| m.max(v.abs()));
    assert_close(
        "final latents",
        &generation.latents,
        &expected_latents,
        LATENT_TOL * scale,
        0.0,
    );
    let expected = decoded_by(sd2, final_latents, sdxl_scale);
    let ours = &generation.images[0].pixels;
    let expected_i: Vec<i64> = expected.iter().map(|&p| i64::from(p)).collect();
    let (worst, off) = pixel_diff(ours, &expected_i);
    assert!(worst <= PIXEL_TOL, "off by {worst} levels ({off} channels)");
    let (from_own, _) = pixel_diff(ours, &golden.get("image_u8").i64());
    assert!(
        from_own > 10,
        "{run}: the SD 2.x VAE's picture is SDXL's own (within {from_own})"
    );
}

#[test]
fn the_refiner_decodes_with_the_chosen_vae_too() {
    let mut base = f32_model("sdxl/pipeline");
    let mut refiner = f32_model("sdxl/refiner");
    let sd2 = f32_model("sd2v/pipeline");
    let (json, config) = run("sdxl/runs/base_refiner_ensemble_euler");
    let mut request = crate::pipelines::request_for(&base, "sdxl/runs", &json, config);
    assert!(request.refiner_switch.is_some(), "a two-stage run");
    let dir = tempfile::tempdir().unwrap();
    request.vae = VaeChoice::File(sd2_vae(dir.path()));
    let sdxl_scale = refiner.vae_config.scaling_factor;
    let mut cache = None;
    choose(&mut [&mut base, &mut refiner], &request, &mut cache);
    let mut quiet = |_| std::ops::ControlFlow::Continue(());
    let generation = generate_refined(&base, Some(&refiner), &request, &mut quiet).unwrap();
    check_decoded_by_sd2(
        &generation,
        "sdxl/runs/base_refiner_ensemble_euler",
        &sd2,
        sdxl_scale,
    );
}

#[test]
fn files_that_are_not_a_vae_for_the_model_are_refused_with_reasons() {
    let mut model = f32_model("sd15/pipeline");
    let dir = tempfile::tempdir().unwrap();
    let sd2 = sd2_vae(dir.path());
    let truncated = vae_of_checkpoint(
        "sd15/checkpoint.safetensors",
        &dir.path().join("truncated.safetensors"),
        false,
        |_, _| {},
        vec![],
    );
    let bytes = std::fs::read(&truncated).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let nan = vae_of_checkpoint(
        "sd15/checkpoint.safetensors",
        &dir.path().join("nan.safetensors"),
        false,
        |name, t| {
            if name == "decoder.conv_in.weight" {
                let mut v = t.f32();
                v[3] = f32::NAN;
                *t = Fixture::from_f32(t.shape.clone(), &v);
            }
        },
        vec![],
    );
    let incomplete = vae_of_checkpoint(
        "sd15/checkpoint.safetensors",
        &dir.path().join("incomplete.safetensors"),
        false,
        |_, _| {},
        vec![],
    );
    ember_tests::write_edited_file(
        &incomplete.clone(),
        &incomplete,
        |name, _| !name.starts_with("decoder.mid."),
        vec![],
    );
    let cases: [(PathBuf, &str); 6] = [
        (sd2, "has shape"),
        (reference("sd15/checkpoint.safetensors"), "whole checkpoint"),
        (reference("sd15/pipeline"), "whole model folder"),
        (truncated, "truncated.safetensors"),
        (nan, "NaN"),
        (incomplete, "lacks"),
    ];
    let own = pixels(&model, &crate::engine::request(&model, 4));
    for (path, says) in cases {
        let mut r = crate::engine::request(&model, 4);
        r.vae = VaeChoice::File(path.clone());
        let e = set_for_request(&mut [&mut model], &r, &mut None, false)
            .err()
            .unwrap_or_else(|| panic!("{} was taken as a VAE", path.display()))
            .to_string();
        assert!(e.contains(says), "{}: {e}", path.display());
        // The model keeps its own VAE.
        r.vae = VaeChoice::ModelsOwn;
        assert_eq!(pixels(&model, &r), own, "{}", path.display());
    }
}

#[test]
fn the_engine_uses_the_chosen_vae_and_writes_it_as_a1111_does() {
    use inference::worker::{BurnEngine, Engine, ModelRole};
    let dir = tempfile::tempdir().unwrap();
    // A checkpoint with a VAE named after it beside it: Automatic takes that one.
    let checkpoint = dir.path().join("dream.safetensors");
    std::fs::copy(reference("sd15/checkpoint.safetensors"), &checkpoint).unwrap();
    let beside = vae_of_checkpoint(
        "sd15/checkpoint.safetensors",
        &dir.path().join("dream.vae.safetensors"),
        false,
        |_, _| {},
        vec![],
    );
    let chosen = copy_folder(&reference("sd15/pipeline/vae"), &dir.path().join("my-vae"));
    let mut engine = BurnEngine::new(Device::flex(), Precision::F32);
    let mut go_on = |_, _| std::ops::ControlFlow::Continue(());
    let config = reference("sd15/pipeline");
    (engine.load(&checkpoint, Some(&config), ModelRole::Main, &mut go_on)).unwrap();
    let model = f32_model("sd15/pipeline");
    let fields = |engine: &mut BurnEngine, vae: VaeChoice| {
        let mut request = crate::engine::request(&model, 2);
        request.steps = 2;
        request.vae = vae;
        let mut quiet = |_| std::ops::ControlFlow::Continue(());
        let generation = engine.generate(&request, &mut quiet, &|| false).unwrap();
        let text = engine.parameters(&request, &generation, 0);
        let p = inference::metadata::Parameters::parse(&text);
        let keys: Vec<String> = p.fields.iter().map(|(k, _)| k.clone()).collect();
        (p, keys)
    };
    let model_at = |keys: &[String]| keys.iter().position(|k| k == "Model").unwrap();

    let (p, keys) = fields(&mut engine, VaeChoice::Automatic);
    let at = model_at(&keys);
    assert_eq!(
        keys[at + 1..at + 3],
        ["VAE hash", "VAE"],
        "A1111's order: {keys:?}"
    );
    assert_eq!(p.get("VAE"), Some("dream.vae.safetensors"));
    let hash = inference::hashing::model_hash(&beside, None).unwrap();
    assert_eq!(p.get("VAE hash"), Some(hash.as_str()));
    assert_eq!(hash.len(), 10);

    let (p, keys) = fields(&mut engine, VaeChoice::File(chosen));
    let at = model_at(&keys);
    assert_eq!(keys[at + 1], "VAE", "a folder has no hash: {keys:?}");
    assert_eq!(p.get("VAE"), Some("my-vae"));
    assert_eq!(p.get("VAE hash"), None);

    let (p, _) = fields(&mut engine, VaeChoice::ModelsOwn);
    assert_eq!(
        (p.get("VAE"), p.get("VAE hash")),
        (None, None),
        "the model's own"
    );
}
