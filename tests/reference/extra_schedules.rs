//! diffusers' `set_timesteps` for every scheduler class Ember reproduces x every
//! `timestep_spacing` x Karras sigmas, at step counts the reference tree does not use: the
//! tables `tests/extra/make_scheduler_tables.py` recorded with diffusers itself (CI reads the
//! JSON; the script needs torch and diffusers).

use ember_tests::{Json, assert_close};
use inference::schedule::diffusers::{SchedulerClass, SchedulerConfig};

/// Sigmas and interpolated timesteps: float32 values of float64 numpy arithmetic.
const REL: f64 = 2e-6;

fn cases() -> Vec<Json> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("extra/scheduler_tables.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let json: Json = serde_json::from_str(&text).unwrap();
    json["cases"].as_array().unwrap().clone()
}

fn floats(v: &Json) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn every_class_spacing_and_karras_choice_matches_diffusers_tables() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for case in cases() {
        let config = SchedulerConfig::from_json(&case["config"].to_string())
            .unwrap_or_else(|e| panic!("{}: {e}", case["config"]));
        let steps = case["steps"].as_u64().unwrap() as usize;
        let what = format!(
            "{} {} karras={} with {steps} steps",
            config.class.class_name(),
            case["config"]["timestep_spacing"],
            config.use_karras_sigmas
        );
        let plan = config.plan(steps, 0.0).unwrap();
        let ours = config.loop_timesteps(&plan);
        let theirs = floats(&case["timesteps"]);
        let result = std::panic::catch_unwind(|| {
            assert_eq!(ours.len(), theirs.len(), "{what}: timestep count");
            let ours32: Vec<f32> = ours.iter().map(|&t| t as f32).collect();
            // KDPM2 ancestral's midpoint sigma equals the next step's, and Ember calls the UNet
            // there with that step's timestep where diffusers interpolates again (see
            // `sampler_runs`): under 1e-3 apart, or the rounding (under 0.5) with Karras
            // sigmas, whose main timesteps diffusers rounds.
            let atol = match (config.class, config.use_karras_sigmas) {
                (SchedulerClass::KDpm2AncestralDiscrete, false) => 1e-3,
                (SchedulerClass::KDpm2AncestralDiscrete, true) => 0.5,
                _ => 0.0,
            };
            if theirs.iter().all(|t| t.fract() == 0.0) && atol == 0.0 {
                assert_eq!(ours, theirs, "{what}: timesteps");
            } else {
                assert_close(&format!("{what}: timesteps"), &ours32, &theirs, atol, REL);
            }
            if let Some(sigmas) = case.get("sigmas") {
                let sigmas = floats(sigmas);
                let ours = config.loop_sigmas(&plan);
                assert_eq!(ours.len(), sigmas.len(), "{what}: sigma count");
                assert_close(&format!("{what}: sigmas"), &ours, &sigmas, 0.0, REL);
            }
        });
        match result {
            Ok(()) => checked += 1,
            Err(e) => failures.push(
                e.downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_else(|| what.clone()),
            ),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        checked + failures.len(),
        failures.join("\n")
    );
    assert!(checked > 0, "no case checked");
}
