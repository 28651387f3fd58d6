//! The sampler maths of every `sd15/runs/txt2img_*` run whose scheduler class Ember
//! reproduces: the recorded UNet outputs go through our guidance and sampler, and the
//! latents after every step must match diffusers'. Also: every recorded random draw is
//! regenerated from the run's seed.

use std::cell::Cell;
use std::ops::ControlFlow;

use burn::tensor::{Device, Tensor};
use ember_tests::{Fixture, Json, assert_close, files_in, json};
use inference::device::{tensor_from_vec, tensor_to_vec};
use inference::pipeline::guidance;
use inference::rng::TorchRng;
use inference::rng::brownian::BrownianNoise;
use inference::sampling::{self, Hooks, NoiseSource, StepState};
use inference::schedule::LatentScaling;
use inference::schedule::diffusers::{SchedulerClass, SchedulerConfig};

/// Relative (to the largest reference value) tolerance for replayed sampler maths: the
/// reference README expects ~1e-6 for a float32 port. Observed: at most 5.5e-7 (DDIM and
/// DPM-Solver, which Ember evaluates in sigma scaling rather than diffusers' alpha scaling).
const REPLAY_REL: f64 = 2e-6;

/// The txt2img runs of `sd15/runs`: (name, parsed JSON).
pub fn txt2img_runs() -> Vec<(String, Json)> {
    let runs: Vec<(String, Json)> = files_in("sd15/runs", ".json")
        .into_iter()
        .filter_map(|path| {
            let name = path.file_stem()?.to_str()?.to_string();
            name.starts_with("txt2img_")
                .then(|| (name.clone(), json(&format!("sd15/runs/{name}.json"))))
        })
        .collect();
    assert!(!runs.is_empty(), "no txt2img runs in sd15/runs");
    runs
}

/// Slice `k` of a stacked `[n, ...]` fixture (or the whole of a 4-D one) as a tensor.
pub fn slice(f: &Fixture, k: usize, device: &Device) -> Tensor<4> {
    let all = f.f32();
    let s = &f.shape;
    let dims = match s.len() {
        4 => [s[0], s[1], s[2], s[3]],
        5 => [s[1], s[2], s[3], s[4]],
        n => panic!("unexpected rank {n}"),
    };
    let per: usize = dims.iter().product();
    tensor_from_vec(all[k * per..(k + 1) * per].to_vec(), dims, device)
}

/// Hands out recorded draws in order.
struct Replay(std::vec::IntoIter<Tensor<4>>);

impl NoiseSource for Replay {
    fn draw(&mut self, _like: &Tensor<4>) -> Tensor<4> {
        self.0
            .next()
            .expect("the sampler drew more noise than the run recorded")
    }
}

/// Replays one run; returns the largest per-step error relative to the reference maximum.
fn replay(name: &str, run: &Json, config: &SchedulerConfig) -> f64 {
    let device = Device::flex();
    let tensors = ember_tests::Fixtures::load(&format!("sd15/runs/{name}.safetensors"));
    let steps = run["num_inference_steps"].as_u64().unwrap() as usize;
    let eta = run["eta"].as_f64().unwrap_or(0.0) as f32;
    let guidance_scale = run["guidance_scale"].as_f64().unwrap() as f32;
    let plan = config.plan(steps, eta).unwrap();

    let unet_out = tensors.get("unet_out");
    let unet_timestep = tensors.get("unet_timestep").f64();
    let after = tensors.get("latents_after_step");
    let n_draws = run["rng_draws"].as_array().unwrap().len();
    let mut draws = (0..n_draws)
        .map(|i| slice(tensors.get(&format!("rng_draw_{i:03}")), 0, &device))
        .collect::<Vec<_>>();
    let x = draws.remove(0).mul_scalar(plan.initial_noise_scale);

    let calls = Cell::new(0usize);
    let worst = Cell::new(0f64);
    let mut denoise = |x: &Tensor<4>, sigma: f32| {
        let k = calls.get();
        let (t, expected_t) = (plan.timesteps.timestep(sigma), unet_timestep[k]);
        // KDPM2 ancestral's midpoint sqrt(sigma * sigma_down) is the next step's sigma.
        // diffusers gives that call `_sigma_to_t(sigma)` (log-linear in the table) but the
        // next step's own call its linspace timestep; a denoiser that only sees sigma gets
        // the latter for both. They differ by under 1e-3 timesteps, a UNet difference far
        // below the run tolerance (the end-to-end test of the same run passes).
        let ambiguous =
            config.class == SchedulerClass::KDpm2AncestralDiscrete && plan.sigmas.contains(&sigma);
        let tolerance = if ambiguous {
            1e-3
        } else {
            1e-6 * expected_t.abs().max(1.0)
        };
        assert!(
            (t - expected_t).abs() <= tolerance,
            "{name}: UNet call {k} gets timestep {t}, diffusers used {expected_t}"
        );
        calls.set(k + 1);
        let eps = guidance::guide(slice(unet_out, k, &device), guidance_scale);
        let x0 = guidance::denoised(x, eps, sigma, config.prediction);
        Ok(plan.boundary_condition(x, x0, sigma))
    };
    let mut on_step = |state: &mut StepState| {
        if state.intermediate {
            return ControlFlow::Continue(());
        }
        let iteration = calls.get() - 1;
        let scale = match plan.scaling {
            LatentScaling::VarianceExploding => 1.0,
            LatentScaling::VariancePreserving => {
                1.0 / (1.0 + state.sigma_next * state.sigma_next).sqrt()
            }
        };
        let ours = tensor_to_vec(state.x.clone().mul_scalar(scale));
        let theirs: Vec<f64> = tensor_to_vec(slice(after, iteration, &device))
            .into_iter()
            .map(f64::from)
            .collect();
        let what = format!(
            "{name}: latents after step {} (loop iteration {iteration})",
            state.index
        );
        let d = assert_close(&what, &ours, &theirs, 0.0, REPLAY_REL);
        worst.set(worst.get().max(d.max_abs / d.max_abs_expected));
        ControlFlow::Continue(())
    };
    let mut noise = Replay(draws.into_iter());
    let mut hooks = Hooks {
        denoise: &mut denoise,
        noise: &mut noise,
        uncond: &mut || None,
        on_step: &mut on_step,
    };
    let final_x = plan.sample(&mut hooks, x, 0..plan.steps()).unwrap();

    assert_eq!(
        calls.get(),
        run["n_unet_calls"].as_u64().unwrap() as usize,
        "{name}: UNet calls"
    );
    let ours = tensor_to_vec(final_x.mul_scalar(plan.output_scale()));
    assert_close(
        &format!("{name}: final latents"),
        &ours,
        &tensors.get("final_latents").f64(),
        0.0,
        REPLAY_REL,
    );
    worst.get()
}

#[test]
fn every_supported_run_replays_step_by_step() {
    let mut replayed = Vec::new();
    for (name, run) in txt2img_runs() {
        // Runs of classes Ember does not reproduce yet are refused by the parser with a
        // message naming the class; `required_classes_have_runs` checks the ones it must.
        let Ok(config) = SchedulerConfig::from_json(&run["scheduler_config"].to_string()) else {
            continue;
        };
        let worst = replay(&name, &run, &config);
        eprintln!("{name}: replayed, worst step error {worst:.2e} of the reference maximum");
        replayed.push(config.class);
    }
    for required in ember_tests::required_scheduler_classes() {
        assert!(
            replayed.contains(&required),
            "no run of {required:?} was replayed"
        );
    }
}

/// The noise levels of the Brownian-tree draws of a `DPMSolverSDEScheduler` run, in draw
/// order: two per step that does not end at 0 (diffusers' `sigma_fn(t)` round trips).
fn brownian_queries(run: &Json) -> Vec<(f32, f32)> {
    let config = SchedulerConfig::from_json(&run["scheduler_config"].to_string()).unwrap();
    let steps = run["num_inference_steps"].as_u64().unwrap() as usize;
    let sigmas = config.plan(steps, 0.0).unwrap().sigmas;
    let mut queries = Vec::new();
    for pair in sigmas.windows(2).filter(|p| p[1] > 0.0) {
        let (from, mid, next) = sampling::sde_noise_levels(pair[0], pair[1]);
        queries.extend([(from, mid), (from, next)]);
    }
    queries
}

#[test]
fn every_generator_draw_is_regenerated_from_the_seed() {
    let mut brownian_draws = 0;
    for (name, run) in txt2img_runs() {
        let tensors = ember_tests::Fixtures::load(&format!("sd15/runs/{name}.safetensors"));
        let mut rng = TorchRng::new(run["seed"].as_u64().unwrap());
        let mut tree = None;
        let mut queries = None;
        for draw in run["rng_draws"].as_array().unwrap() {
            let tensor = draw["tensor"].as_str().unwrap();
            let numel = ember_tests::numel(&draw["shape"]);
            let theirs = tensors.get(tensor).f32();
            if draw["caller"].as_str().unwrap().contains("BrownianTree") {
                // DPMSolverSDEScheduler: torchsde's tree seeded with `noise_sampler_seed`
                // over the whole schedule's sigma range.
                let tree = tree.get_or_insert_with(|| {
                    let config = &run["scheduler_config"];
                    let seed = config["noise_sampler_seed"].as_u64().expect("noise seed");
                    let sigmas = tensors.get("sigmas").f32();
                    BrownianNoise::for_sigmas(&sigmas, &[seed], numel).unwrap()
                });
                let queries = queries.get_or_insert_with(|| brownian_queries(&run).into_iter());
                let (sigma, sigma_next) = queries.next().expect("a query per draw");
                let ours = tree.sample(sigma, sigma_next);
                let expected: Vec<f64> = theirs.iter().map(|&v| f64::from(v)).collect();
                assert_close(&format!("{name}: {tensor}"), &ours, &expected, 1e-6, 0.0);
                brownian_draws += 1;
                continue;
            }
            let ours = rng.randn(numel);
            assert_eq!(ours.len(), theirs.len(), "{name}: {tensor} length");
            assert!(
                ours.iter()
                    .zip(&theirs)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{name}: {tensor} differs"
            );
        }
    }
    assert!(brownian_draws > 0, "no Brownian-tree run found");
}
