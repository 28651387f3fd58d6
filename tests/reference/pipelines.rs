//! Whole generations through the engine against every `sd15/runs/*` run whose scheduler
//! Ember reproduces: latents after every step, final latents and the 8-bit image, from the
//! diffusers folder and from the single-file checkpoint. The request and run checks here
//! serve the other families' runs too (`family_runs`).

use std::ops::ControlFlow;
use std::path::PathBuf;

use burn::tensor::Device;
use ember_tests::{Fixtures, Json, assert_close, inpainting_folder, pixel_diff, reference, runs};
use inference::api::{GenerateRequest, Progress, SamplerChoice};
use inference::device::{Precision, tensor_to_vec};
use inference::imaging;
use inference::model::Model;
use inference::pipeline::{Observer, StepLatents, generate_refined};
use inference::schedule::diffusers::SchedulerConfig;
use inference::weights::{LoadOptions, load};

/// Reference README, full runs: latents within 1e-4 of the largest final latent.
const LATENT_TOL: f64 = 1e-4;
/// Most pixel levels a channel may be off (the issue allows 2).
const PIXEL_TOL: i32 = 2;

/// A `[height, width]` JSON pair as `(width, height)`.
fn hw(v: &Json) -> Option<(u32, u32)> {
    let a = v.as_array()?;
    Some((a.get(1)?.as_u64()? as u32, a.first()?.as_u64()? as u32))
}

/// The request a run of `dir` (`sd15/runs`, `sdxl/runs`, ...) describes.
pub fn request_for(
    model: &Model,
    dir: &str,
    run: &Json,
    config: SchedulerConfig,
) -> GenerateRequest {
    let mut r = model.request(
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
    if let Some(path) = ember_tests::run_input_in(dir, run, "init_image") {
        r.init_image = Some(imaging::load_rgb(&path, size).unwrap());
        r.strength = run["strength"].as_f64().unwrap() as f32;
    }
    if let Some(path) = ember_tests::run_input_in(dir, run, "mask_image") {
        r.mask = Some(imaging::load_mask(&path, size).unwrap());
    }
    // SDXL settings, where the run has them.
    r.prompt_2 = run["prompt_2"].as_str().map(str::to_string);
    r.negative_prompt_2 = run["negative_prompt_2"].as_str().map(str::to_string);
    r.size_conditioning.original = hw(&run["original_size"]);
    r.size_conditioning.target = hw(&run["target_size"]);
    if let Some((left, top)) = hw(&run["crops_coords_top_left"]) {
        r.size_conditioning.crop = (left, top);
    }
    r.aesthetic_score = run["aesthetic_score"].as_f64().map(|v| v as f32);
    r.negative_aesthetic_score = run["negative_aesthetic_score"].as_f64().map(|v| v as f32);
    r.refiner_switch = run["denoising_end"].as_f64().map(|v| v as f32);
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

/// The latents a run recorded after every loop iteration: `latents_after_step`, or a
/// two-stage run's `base_` then `refiner_` ones. Returns the values and the iteration count.
fn recorded_steps(tensors: &Fixtures) -> (Vec<f64>, usize) {
    if tensors.has("latents_after_step") {
        let after = tensors.get("latents_after_step");
        return (after.f64(), after.shape[0]);
    }
    let (base, refiner) = (
        tensors.get("base_latents_after_step"),
        tensors.get("refiner_latents_after_step"),
    );
    let mut all = base.f64();
    all.extend(refiner.f64());
    (all, base.shape[0] + refiner.shape[0])
}

/// One run of `dir` through the engine (with `refiner` for a two-stage run): latents after
/// every step, final latents and the image.
pub fn check_run(
    dir: &str,
    name: &str,
    run: &Json,
    layout: &str,
    (model, refiner): (&Model, Option<&Model>),
    config: SchedulerConfig,
) {
    let request = request_for(model, dir, run, config);
    check_run_request(dir, name, layout, (model, refiner), &request);
}

/// [`check_run`] with the request already made (a run that needs more than its JSON says,
/// such as an embeddings folder).
pub fn check_run_request(
    dir: &str,
    name: &str,
    layout: &str,
    (model, refiner): (&Model, Option<&Model>),
    request: &GenerateRequest,
) {
    let tensors = Fixtures::load(&format!("{dir}/{name}.safetensors"));
    let request = request.clone();
    let mut recorder = Recorder(Vec::new());
    let generation = generate_refined(model, refiner, &request, &mut recorder)
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
    let (all, iterations) = recorded_steps(&tensors);
    let per = all.len() / iterations;
    assert_eq!(
        recorder.0.last().map(|(calls, _)| *calls),
        Some(iterations),
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
    let (worst, off) = pixel_diff(ours, &theirs);
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
        ..LoadOptions::new(Device::flex(), Precision::F32)
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
        let dir = "sd15/runs";
        if run["model"]
            .as_str()
            .is_some_and(|m| m.contains("unet_inpaint"))
        {
            check_run(
                dir,
                &name,
                &run,
                "inpainting folder",
                (&inpaint, None),
                config,
            );
        } else {
            check_run(
                dir,
                &name,
                &run,
                "diffusers folder",
                (&folder, None),
                config.clone(),
            );
            check_run(dir, &name, &run, "single file", (&single, None), config);
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
