//! Training tables, sigma schedules and diffusers' `set_timesteps`, against
//! `samplers_kdiffusion/schedules.*` and `sd15/schedulers/*`.

use ember_tests::{Fixtures, Json, assert_close, json};
use inference::schedule::diffusers::{SchedulerClass, SchedulerConfig};
use inference::schedule::named::{SamplerName, ScheduleName, karras, ksampler_sigmas};
use inference::schedule::{BetaSchedule, DiscreteSchedule, LatentScaling, TableArithmetic};

/// Relative tolerance the reference README gives for interpolated schedules and tables.
const REL: f64 = 1e-6;
/// Relative tolerance for the k-diffusion formula tables (float32 vs float64 evaluation).
const REL_FORMULA: f64 = 2e-6;

fn table(arithmetic: TableArithmetic) -> DiscreteSchedule {
    DiscreteSchedule::new(BetaSchedule::SD, 1000, arithmetic).unwrap()
}

fn as_f64(v: &Json) -> f64 {
    v.as_f64().expect("number")
}

fn schedules() -> Vec<Json> {
    let s = json("samplers_kdiffusion/schedules.json");
    s["schedules"].as_array().expect("schedule list").clone()
}

#[test]
fn training_tables_match_comfyui_and_k_diffusion() {
    let tables = Fixtures::load("samplers_kdiffusion/schedules.safetensors");
    let comfy = table(TableArithmetic::ComfyF64);
    let kd = table(TableArithmetic::KDiffusionF32);
    let exact = |name: &str, ours: &[f32]| {
        let theirs = tables.get(name).f32();
        assert_eq!(ours.len(), theirs.len(), "{name}: length");
        let differing: Vec<usize> = (0..ours.len()).filter(|&i| ours[i] != theirs[i]).collect();
        assert!(
            differing.is_empty(),
            "{name} must be an exact copy; {} values differ, first at {}: ours {}, reference {}",
            differing.len(),
            differing[0],
            ours[differing[0]],
            theirs[differing[0]]
        );
    };
    exact("sd1_sigmas", &comfy.sigmas);
    // k-diffusion evaluates `** 0.5` with torch's vectorised float32 pow, which is not
    // correctly rounded: 11 of the 1000 values are one ulp below a true square root.
    assert_close(
        "kd_discrete_sigmas",
        &kd.sigmas,
        &tables.get("kd_discrete_sigmas").f64(),
        0.0,
        REL,
    );
    let log_sigmas: Vec<f32> = comfy.log_sigmas.iter().map(|&l| l as f32).collect();
    exact("sd1_log_sigmas", &log_sigmas);
    let ac: Vec<f32> = comfy.alphas_cumprod.iter().map(|&a| a as f32).collect();
    assert_close(
        "sd1_alphas_cumprod",
        &ac,
        &tables.get("sd1_alphas_cumprod").f64(),
        0.0,
        REL,
    );
}

#[test]
fn sigma_timestep_conversions() {
    let tables = Fixtures::load("samplers_kdiffusion/schedules.safetensors");
    let comfy = table(TableArithmetic::ComfyF64);
    let kd = table(TableArithmetic::KDiffusionF32);
    let probes = tables.get("probe_sigmas").f32();
    let nearest: Vec<i64> = probes
        .iter()
        .map(|&s| comfy.nearest_timestep(s) as i64)
        .collect();
    assert_eq!(
        nearest,
        tables.get("comfy_timestep").i64(),
        "ComfyUI timestep(sigma)"
    );
    let kd_t: Vec<f32> = probes
        .iter()
        .map(|&s| kd.sigma_to_t(f64::from(s)) as f32)
        .collect();
    assert_close(
        "kd_sigma_to_t",
        &kd_t,
        &tables.get("kd_sigma_to_t").f64(),
        0.0,
        REL,
    );
    let back: Vec<f32> = tables
        .get("kd_sigma_to_t")
        .f32()
        .iter()
        .map(|&t| comfy.sigma_at(f64::from(t)))
        .collect();
    assert_close(
        "comfy_sigma_of_kd_t",
        &back,
        &tables.get("comfy_sigma_of_kd_t").f64(),
        0.0,
        REL,
    );
}

#[test]
fn every_schedule_table_reproduces() {
    let comfy = table(TableArithmetic::ComfyF64);
    let kd = table(TableArithmetic::KDiffusionF32);
    let mut checked = 0;
    for entry in schedules() {
        let name = entry["name"].as_str().unwrap();
        let function = entry["function"].as_str().unwrap_or("");
        let expected: Vec<f64> = entry["values"]
            .as_array()
            .map(|v| v.iter().map(as_f64).collect())
            .unwrap_or_default();
        let ours: Vec<f32> = if let Some(scheduler) = entry["scheduler"].as_str() {
            let steps = entry["steps"].as_u64().unwrap() as usize;
            match ScheduleName::parse(scheduler) {
                // KSampler's list for DPM2 (and DPM2 a, uni_pc): see `ksampler_sigmas`.
                Ok(schedule) if name.contains("ksampler_dpm_2") => {
                    ksampler_sigmas(SamplerName::Dpm2, schedule, &comfy, steps)
                }
                Ok(schedule) => schedule.sigmas(&comfy, steps),
                Err(e) => panic!("{name}: {e}"),
            }
        } else if function.starts_with("ComfyUI AlignYourStepsScheduler.get_sigmas('SD1'") {
            let steps = entry["steps"].as_u64().unwrap() as usize;
            ScheduleName::AlignYourSteps.sigmas(&comfy, steps)
        } else if function.ends_with("get_sigmas_karras") {
            let n = entry["n"].as_u64().unwrap() as usize;
            karras(
                n,
                as_f64(&entry["sigma_min"]),
                as_f64(&entry["sigma_max"]),
                as_f64(&entry["rho"]),
            )
        } else if function.ends_with("get_sigmas_exponential") {
            let n = entry["n"].as_u64().unwrap() as usize;
            inference::schedule::named::exponential(
                n,
                as_f64(&entry["sigma_min"]),
                as_f64(&entry["sigma_max"]),
            )
        } else if function.starts_with("k_diffusion.external.DiscreteSchedule.get_sigmas") {
            let n = entry["n"].as_u64().unwrap() as usize;
            let mut s: Vec<f32> = inference::schedule::linspace_f64(999.0, 0.0, n)
                .iter()
                .map(|&t| kd.sigma_at(t))
                .collect();
            s.push(0.0);
            s
        } else {
            continue; // raw tables and probes: covered by the tests above
        };
        let rel = if function.starts_with("k_diffusion.sampling") {
            REL_FORMULA
        } else {
            REL
        };
        assert_eq!(ours.len(), expected.len(), "{name}: length");
        assert_close(name, &ours, &expected, 0.0, rel);
        checked += 1;
    }
    assert!(checked > 0, "no schedule table was checked");
}

/// The samplers of `sd15/schedulers/index.json` whose class Ember reproduces.
fn supported_diffusers_samplers() -> Vec<(String, Json, SchedulerConfig)> {
    let index = json("sd15/schedulers/index.json");
    let mut out = Vec::new();
    for (name, entry) in index["samplers"].as_object().expect("samplers") {
        let config_text = entry["config"].to_string();
        if let Ok(config) = SchedulerConfig::from_json(&config_text) {
            out.push((name.clone(), entry.clone(), config));
        }
    }
    out
}

#[test]
fn diffusers_tables_match_set_timesteps() {
    let tables = Fixtures::load("sd15/schedulers/tables.safetensors");
    let diffusers = table(TableArithmetic::DiffusersF32);
    let ac: Vec<f32> = diffusers.alphas_cumprod.iter().map(|&a| a as f32).collect();
    assert_close(
        "alphas_cumprod",
        &ac,
        &tables.get("alphas_cumprod").f64(),
        0.0,
        REL,
    );

    let samplers = supported_diffusers_samplers();
    let classes: Vec<SchedulerClass> = samplers.iter().map(|(_, _, c)| c.class).collect();
    for required in ember_tests::required_scheduler_classes() {
        assert!(
            classes.contains(&required),
            "{required:?} is required but not reproduced"
        );
    }
    for (name, entry, config) in samplers {
        for (steps, t) in entry["tables"].as_object().unwrap() {
            let steps: usize = steps.parse().unwrap();
            let plan = config.plan(steps, 0.0).unwrap();
            let what = format!("{name} with {steps} steps");
            let ours = config.loop_timesteps(&plan);
            let theirs = tables.get(t["timesteps"].as_str().unwrap());
            let theirs: Vec<f64> = match theirs.dtype {
                safetensors::Dtype::I64 => theirs.i64().into_iter().map(|v| v as f64).collect(),
                _ => theirs.f64(),
            };
            if config.class == SchedulerClass::KDpm2AncestralDiscrete {
                // Its midpoint equals the next step's sigma, which Ember maps to that step's
                // timestep where diffusers interpolates again (see `sampler_runs`): under 1e-3.
                let ours: Vec<f32> = ours.iter().map(|&t| t as f32).collect();
                assert_close(&format!("timesteps of {what}"), &ours, &theirs, 1e-3, REL);
            } else if theirs.iter().any(|t| t.fract() != 0.0) {
                // Timesteps from `_sigma_to_t` (Karras sigmas, second-order midpoints)
                // interpolate numpy's float32 `log` of the sigma table, which is not correctly
                // rounded; they agree to an ulp or two.
                let ours: Vec<f32> = ours.iter().map(|&t| t as f32).collect();
                assert_close(&format!("timesteps of {what}"), &ours, &theirs, 0.0, REL);
            } else {
                assert_eq!(ours, theirs, "timesteps of {what}");
            }
            if let Some(sigmas) = t["sigmas"].as_str() {
                let ours = config.loop_sigmas(&plan);
                assert_close(
                    &format!("sigmas of {what}"),
                    &ours,
                    &tables.get(sigmas).f64(),
                    0.0,
                    REL,
                );
            }
            if config.class.class_name() != "DDIMScheduler"
                && plan.scaling == LatentScaling::VarianceExploding
            {
                let init = as_f64(&t["init_noise_sigma"]);
                assert!(
                    (f64::from(plan.initial_noise_scale) - init).abs() <= REL * init,
                    "init_noise_sigma of {what}: ours {}, diffusers {init}",
                    plan.initial_noise_scale
                );
            }
        }
    }
}
