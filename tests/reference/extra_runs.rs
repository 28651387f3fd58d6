//! Runs the reference tree does not cover, recorded with diffusers by
//! `tests/extra/make_runs.py` (CI reads the files): v-prediction with a zero-terminal-SNR
//! schedule and trailing spacing, CFG rescale, SDXL's second prompt, on the tree's SD 2.x
//! and SDXL models, from the diffusers folders and the single files; and 9-channel SDXL
//! inpainting with a UNet the script made (`tests/extra/models`), from a folder.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use ember_tests::{Fixtures, Json, assert_close, reference, single_file_of};
use inference::api::SamplerChoice;
use inference::device::Precision;
use inference::imaging;
use inference::pipeline::generate;
use inference::schedule::diffusers::{Prediction, SchedulerConfig};
use inference::weights::{LoadOptions, load};

/// Copies `from` (one level of subfolders) to `to`, leaving out the subfolder `skip`.
fn copy_folder(from: &Path, to: &Path, skip: &str) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_name() == skip {
            continue;
        }
        if entry.path().is_dir() {
            copy_folder(&entry.path(), &target, "");
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The layouts a run is checked in: `(label, model path, config dir)`. A run with its own
/// UNet gets a copy of its folder with that UNet, held by `keep`.
fn layouts(
    run: &Json,
    extra: &Path,
    keep: &mut Vec<tempfile::TempDir>,
) -> Vec<(String, PathBuf, Option<PathBuf>)> {
    let folder = run["model"].as_str().unwrap();
    if let Some(unet) = run["unet"].as_str() {
        let dir = tempfile::tempdir().unwrap();
        copy_folder(&reference(folder), dir.path(), "unet");
        copy_folder(&extra.join(unet), &dir.path().join("unet"), "");
        let path = dir.path().to_path_buf();
        keep.push(dir);
        return vec![(format!("{folder} with {unet}"), path, None)];
    }
    vec![
        ("folder".into(), reference(folder), None),
        (
            "single file".into(),
            reference(single_file_of(folder)),
            Some(reference(folder)),
        ),
    ]
}

#[test]
fn extra_diffusers_runs_reproduce_from_both_layouts() {
    let extra = Path::new(env!("CARGO_MANIFEST_DIR")).join("extra");
    let dir = extra.join("runs");
    let mut keep: Vec<tempfile::TempDir> = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let run: Json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let name = run["name"].as_str().unwrap();
        let tensors = Fixtures::load_path(&path.with_extension("safetensors"));
        let config = SchedulerConfig::from_json(&run["scheduler_config"].to_string()).unwrap();
        // What `--prediction` does for a v-prediction model whose files say otherwise.
        let prediction = Some(config.prediction);
        for (layout, model_path, config_dir) in layouts(&run, &extra, &mut keep) {
            let options = LoadOptions {
                config_dir,
                prediction,
                ..LoadOptions::new(Device::flex(), Precision::F32)
            };
            let model = load(&model_path, &options).unwrap();
            let mut r = model.request(
                run["prompt"].as_str().unwrap(),
                run["seed"].as_u64().unwrap(),
            );
            r.negative_prompt = run["negative_prompt"].as_str().unwrap_or("").into();
            r.prompt_2 = run["prompt_2"].as_str().map(str::to_string);
            r.steps = run["steps"].as_u64().unwrap() as u32;
            r.cfg_scale = run["guidance_scale"].as_f64().unwrap() as f32;
            r.cfg_rescale = run["guidance_rescale"].as_f64().unwrap() as f32;
            r.width = run["width"].as_u64().unwrap() as u32;
            r.height = run["height"].as_u64().unwrap() as u32;
            r.sampler = SamplerChoice::Diffusers(config.clone());
            let size = Some((r.width, r.height));
            if let Some(init) = run["init_image"].as_str() {
                r.init_image = Some(imaging::load_rgb(&reference(init), size).unwrap());
                r.strength = run["strength"].as_f64().unwrap() as f32;
            }
            if let Some(mask) = run["mask_image"].as_str() {
                r.mask = Some(imaging::load_mask(&reference(mask), size).unwrap());
            }
            let what = format!("{name} ({layout})");
            let g = generate(&model, &r, &mut |_: inference::api::Progress| {
                std::ops::ControlFlow::Continue(())
            })
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            let expected = tensors.get("final_latents").f64();
            let max = expected.iter().fold(0f64, |m, v| m.max(v.abs()));
            assert_close(
                &format!("{what}: final latents"),
                &g.latents,
                &expected,
                1e-4 * max,
                0.0,
            );
            let theirs = tensors.get("image_u8").i64();
            let worst = g.images[0]
                .pixels
                .iter()
                .zip(&theirs)
                .map(|(&a, &b)| (i64::from(a) - b).abs())
                .max()
                .unwrap();
            assert!(worst <= 2, "{what}: a pixel differs by {worst} levels");
            if prediction == Some(Prediction::V) {
                assert_eq!(model.prediction, Prediction::V, "{what}");
            }
            checked += 1;
        }
    }
    assert!(checked > 0, "no extra run in {}", dir.display());
}
