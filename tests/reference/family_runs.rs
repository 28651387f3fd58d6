//! Whole SD 2.x and SDXL generations through the engine: every run of `sd2v/runs` and
//! `sdxl/runs` (txt2img, img2img, inpainting, the refiner alone and the base + refiner
//! ensemble) from the diffusers folders and from the single files, and the conditioning the
//! UNet received in each.

use ember_tests::{Fixtures, Json, assert_close_scaled, run_models, runs_in, single_file_of};
use inference::device::tensor_to_vec;
use inference::model::Model;
use inference::pipeline::prompt;
use inference::schedule::diffusers::SchedulerConfig;

use crate::pipelines::{check_run, request_for};

/// A folder's model in both layouts: `(layout label, model)`.
fn both_layouts(folder: &str) -> Vec<(String, Model)> {
    crate::families::layouts(folder, single_file_of(folder))
}

/// The scheduler config of a run (a two-stage run's stages share it).
fn scheduler_of(run: &Json) -> SchedulerConfig {
    SchedulerConfig::from_json(&run["scheduler_config"].to_string())
        .unwrap_or_else(|e| panic!("scheduler config: {e}"))
}

/// Runs made with a LoRA merged: their settings say so.
fn needs_lora(run: &Json) -> bool {
    !run["lora_scale"].is_null()
}

#[test]
fn every_sd2_and_sdxl_run_reproduces_through_the_engine() {
    let mut reproduced = Vec::new();
    for dir in ["sd2v/runs", "sdxl/runs"] {
        for (name, run) in runs_in(dir) {
            if needs_lora(&run) {
                // The model names the base folder + the LoRA file, merged at the run's scale.
                let (base, lora) = run_models(&run);
                let scale = run["lora_scale"].as_f64().unwrap() as f32;
                let lora = ember_tests::reference(&lora.expect("a LoRA run names its LoRA"));
                let config = scheduler_of(&run);
                for (layout, mut model) in both_layouts(&base) {
                    let spec = inference::lora::LoraSpec {
                        path: lora.clone(),
                        text_encoder: scale,
                        unet: scale,
                    };
                    inference::lora::set(&mut model, &[spec]).unwrap();
                    check_run(dir, &name, &run, &layout, (&model, None), config.clone());
                }
                reproduced.push(format!("{dir}/{name}"));
                continue;
            }
            let (base, refiner) = run_models(&run);
            let config = scheduler_of(&run);
            let bases = both_layouts(&base);
            let refiners = refiner.as_deref().map(both_layouts);
            for (i, (layout, model)) in bases.iter().enumerate() {
                let refiner = refiners.as_ref().map(|r| &r[i].1);
                check_run(dir, &name, &run, layout, (model, refiner), config.clone());
            }
            reproduced.push(format!("{dir}/{name}"));
        }
    }
    for kind in [
        "sd2v/runs/txt2img",
        "sdxl/runs/txt2img",
        "sdxl/runs/img2img",
        "sdxl/runs/inpaint",
        "sdxl/runs/refine",
        "sdxl/runs/base_refiner",
    ] {
        assert!(
            reproduced.iter().any(|n| n.starts_with(kind)),
            "no {kind} run was reproduced (reproduced: {reproduced:?})"
        );
    }
}

/// The conditioning tensors a run recorded for its first UNet call: the context, pooled
/// text and time ids, each `[negative; positive]`. `prefix` is `base_` / `refiner_` for a
/// two-stage run.
fn recorded_conditioning(
    tensors: &Fixtures,
    prefix: &str,
) -> Option<(Vec<f64>, Vec<f64>, Vec<f64>)> {
    let key = |k: &str| format!("{prefix}{k}");
    if tensors.has(&key("encoder_hidden_states")) {
        return Some((
            tensors.get(&key("encoder_hidden_states")).f64(),
            tensors.get(&key("text_embeds")).f64(),
            tensors.get(&key("time_ids")).f64(),
        ));
    }
    if !tensors.has("pooled_prompt_embeds") {
        return None;
    }
    let cat = |a: &str, b: &str| {
        let mut v = tensors.get(a).f64();
        v.extend(tensors.get(b).f64());
        v
    };
    let ids = tensors.get("add_time_ids").f64();
    Some((
        cat("negative_prompt_embeds", "prompt_embeds"),
        cat("negative_pooled_prompt_embeds", "pooled_prompt_embeds"),
        ids.iter().chain(&ids).copied().collect(),
    ))
}

#[test]
fn sdxl_conditioning_matches_what_every_run_fed_the_unet() {
    let mut checked = 0;
    for (name, run) in runs_in("sdxl/runs") {
        if needs_lora(&run) {
            continue; // Its merged encoders are checked in `lora`.
        }
        let tensors = Fixtures::load(&format!("sdxl/runs/{name}.safetensors"));
        let (base, refiner) = run_models(&run);
        let stages: Vec<(String, &str)> = match refiner {
            Some(r) => vec![(base, "base_"), (r, "refiner_")],
            None => vec![(base, "")],
        };
        for (folder, prefix) in stages {
            let Some((context, pooled, time_ids)) = recorded_conditioning(&tensors, prefix) else {
                continue;
            };
            for (layout, model) in both_layouts(&folder) {
                let request = request_for(&model, "sdxl/runs", &run, scheduler_of(&run));
                let what = format!("{name} {prefix}({folder}, {layout})");
                let c = prompt::encode(&model, &request, true).unwrap();
                assert_close_scaled(
                    &format!("{what}: context"),
                    &tensor_to_vec(c.context),
                    &context,
                    1e-4,
                );
                let added = c.added.expect("SDXL models take pooled text and time ids");
                assert_close_scaled(
                    &format!("{what}: pooled"),
                    &tensor_to_vec(added.text_embeds),
                    &pooled,
                    1e-4,
                );
                let ours: Vec<f64> = added.time_ids.iter().map(|&v| f64::from(v)).collect();
                assert_eq!(ours, time_ids, "{what}: time ids");
                checked += 1;
            }
        }
    }
    assert!(checked > 0, "no SDXL run recorded its conditioning");
}

#[test]
fn sd2_conditioning_matches_the_recorded_prompt_embeddings() {
    let mut checked = 0;
    for (name, run) in runs_in("sd2v/runs") {
        let tensors = Fixtures::load(&format!("sd2v/runs/{name}.safetensors"));
        for (layout, model) in both_layouts("sd2v/pipeline") {
            let request = request_for(&model, "sd2v/runs", &run, scheduler_of(&run));
            let c = prompt::encode(&model, &request, true).unwrap();
            let mut expected = tensors.get("negative_prompt_embeds").f64();
            expected.extend(tensors.get("prompt_embeds").f64());
            assert_close_scaled(
                &format!("{name} ({layout}): context"),
                &tensor_to_vec(c.context),
                &expected,
                1e-4,
            );
            assert!(c.added.is_none(), "SD 2.x takes no pooled text");
            checked += 1;
        }
    }
    assert!(checked > 0, "no SD 2.x run found");
}

#[test]
fn every_sampler_and_schedule_runs_on_v_prediction_and_sdxl_models() {
    use inference::api::SamplerChoice;
    use inference::pipeline::generate;
    use inference::schedule::named::{SamplerName, ScheduleName};
    for folder in ["sd2v/pipeline", "sdxl/pipeline"] {
        let (_, model) = both_layouts(folder).swap_remove(0);
        let caps = model.capabilities();
        let run = |sampler: SamplerName, schedule: ScheduleName| {
            let mut r = model.request("a lighthouse", 7);
            r.steps = 3;
            r.cfg_scale = 3.0;
            r.cfg_rescale = 0.5;
            r.sampler = SamplerChoice::Named { sampler, schedule };
            let what = format!("{folder} ({}): {sampler} {schedule}", caps.label());
            let g = generate(&model, &r, &mut |_: inference::api::Progress| {
                std::ops::ControlFlow::Continue(())
            })
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(g.latents.iter().all(|v| v.is_finite()), "{what}");
            assert_eq!(g.images.len(), 1, "{what}");
        };
        for sampler in SamplerName::ALL {
            run(sampler, ScheduleName::Karras);
        }
        for schedule in ScheduleName::ALL {
            run(SamplerName::Euler, schedule);
        }
    }
}
