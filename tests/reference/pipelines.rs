//! Whole generations through the engine against every `sd15/runs/*` run whose scheduler
//! Ember reproduces: latents after every step, final latents and the 8-bit image, from the
//! diffusers folder and from the single-file checkpoint.

use std::ops::ControlFlow;
use std::path::PathBuf;

use burn::tensor::Device;
use ember_tests::{Fixtures, Json, assert_close, inpainting_folder, reference, run_input, runs};
use inference::api::{GenerateRequest, Progress, SamplerChoice};
use inference::device::{Precision, tensor_to_vec};
use inference::imaging;
use inference::model::Model;
use inference::pipeline::{Observer, StepLatents, generate};
use inference::schedule::diffusers::SchedulerConfig;
use inference::weights::{LoadOptions, load};

/// Reference README, full runs: latents within 1e-4 of the largest final latent.
const LATENT_TOL: f64 = 1e-4;
/// Most pixel levels a channel may be off (the issue allows 2).
const PIXEL_TOL: i32 = 2;

/// The request a run describes.
pub fn request_for(model: &Model, run: &Json, config: SchedulerConfig) -> GenerateRequest {
    let mut r = GenerateRequest::new(
        model,
        run["prompt"].as_str().unwrap(),
        run["seed"].as_u64().unwrap(),
    );
    r.negative_prompt = run["negative_prompt"].as_str().unwrap_or("").to_string();
    r.width = run["width"].as_u64().unwrap() as u32;
    r.height = run["height"].as_u64().unwrap() as u32;
    r.steps = run["num_inference_steps"].as_u64().unwrap() as u32;
    r.cfg_scale = run["guidance_scale"].as_f64().unwrap() as f32;
    r.eta = run["eta"].as_f64().map(|e| e as f32);
    // diffusers' clip_skip k is A1111's k + 1.
    r.clip_skip = run["clip_skip"].as_u64().map_or(1, |k| k as u32 + 1);
    r.sampler = SamplerChoice::Diffusers(config);
    let size = Some((r.width, r.height));
    if let Some(path) = run_input(run, "init_image") {
        r.init_image = Some(imaging::load_rgb(&path, size).unwrap());
        r.strength = run["strength"].as_f64().unwrap() as f32;
    }
    if let Some(path) = run_input(run, "mask_image") {
        r.mask = Some(imaging::load_mask(&path, size).unwrap());
    }
    r
}

/// Collects the latents after every step, in diffusers' scaling, with the UNet evaluation
/// count at that point.
struct Recorder(Vec<(usize, Vec<f32>)>);

impl Observer for Recorder {
    fn progress(&mut self, _progress: Progress) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
    fn step(&mut self, s: &StepLatents<'_>) {
        self.0.push((
            s.evaluations,
            tensor_to_vec(s.x.clone().mul_scalar(s.to_diffusers_scale)),
        ));
    }
}

fn check_run(name: &str, run: &Json, layout: &str, model: &Model, config: SchedulerConfig) {
    let tensors = Fixtures::load(&format!("sd15/runs/{name}.safetensors"));
    let request = request_for(model, run, config);
    let mut recorder = Recorder(Vec::new());
    let generation = generate(model, &request, &mut recorder)
        .unwrap_or_else(|e| panic!("{name} ({layout}): {e}"));
    let what = format!("{name} ({layout})");

    let final_ref = tensors.get("final_latents").f64();
    let scale = final_ref.iter().fold(0f64, |m, v| m.max(v.abs()));
    let tol = LATENT_TOL * scale;
    assert_close(
        &format!("{what}: final latents"),
        &generation.latents,
        &final_ref,
        tol,
        0.0,
    );

    // diffusers records the latents after every loop iteration (one UNet call each), so a
    // step that made its k-th call is compared with iteration k - 1.
    let after = tensors.get("latents_after_step");
    let per = after.f64().len() / after.shape[0];
    let all = after.f64();
    assert_eq!(
        recorder.0.last().map(|(calls, _)| *calls),
        Some(after.shape[0]),
        "{what}: UNet calls"
    );
    for (i, (calls, ours)) in recorder.0.iter().enumerate() {
        let k = calls - 1;
        assert_close(
            &format!("{what}: latents after step {i}"),
            ours,
            &all[k * per..(k + 1) * per],
            tol,
            0.0,
        );
    }

    let theirs = tensors.get("image_u8").i64();
    let ours = &generation.images[0].pixels;
    let worst = ours
        .iter()
        .zip(&theirs)
        .map(|(&a, &b)| (i64::from(a) - b).abs())
        .max()
        .unwrap();
    let off = ours
        .iter()
        .zip(&theirs)
        .filter(|&(&a, &b)| i64::from(a) != b)
        .count();
    assert!(
        worst <= i64::from(PIXEL_TOL),
        "{what}: a pixel channel is off by {worst} levels ({off} differ)"
    );
    if std::env::var_os("EMBER_TEST_VERBOSE").is_some() {
        eprintln!(
            "{what}: image max diff {worst} level(s), {off} of {} channels differ",
            ours.len()
        );
    }
}

#[test]
fn every_supported_run_reproduces_through_the_engine() {
    let options = |config_dir: Option<PathBuf>| LoadOptions {
        config_dir,
        device: Device::flex(),
        precision: Precision::F32,
    };
    let folder = load(&reference("sd15/pipeline"), &options(None)).unwrap();
    let single = load(
        &reference("sd15/checkpoint.safetensors"),
        &options(Some(reference("sd15/pipeline"))),
    )
    .unwrap();
    let inpaint_dir = inpainting_folder();
    let inpaint = load(inpaint_dir.path(), &options(None)).unwrap();
    let mut reproduced = Vec::new();
    for (name, run) in runs() {
        let Ok(config) = SchedulerConfig::from_json(&run["scheduler_config"].to_string()) else {
            continue;
        };
        if run["model"]
            .as_str()
            .is_some_and(|m| m.contains("unet_inpaint"))
        {
            check_run(&name, &run, "inpainting folder", &inpaint, config);
        } else {
            check_run(&name, &run, "diffusers folder", &folder, config.clone());
            check_run(&name, &run, "single file", &single, config);
        }
        reproduced.push(name);
    }
    for kind in ["txt2img_", "img2img", "inpaint_blend", "inpaint_9ch"] {
        assert!(
            reproduced.iter().any(|n| n.starts_with(kind)),
            "no {kind} run was reproduced"
        );
    }
}
