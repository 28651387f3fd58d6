//! Every sampler against `samplers_kdiffusion/runs`: k-diffusion's and ComfyUI's sampling
//! functions driven by a closed-form dummy denoiser, with every random draw recorded. Each
//! run is replayed through Ember's sampler (same sigmas, same draws; Brownian-tree noise is
//! regenerated from the run's entropy instead) and compared call by call (the denoiser's
//! inputs) and step by step (`x_after_step`, `final_x`).

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::ops::ControlFlow;

use burn::tensor::{Device, Tensor};
use ember_tests::{Fixture, Fixtures, Json, assert_close_scaled, json};
use inference::device::{tensor_from_vec, tensor_to_vec};
use inference::rng::brownian::BrownianNoise;
use inference::sampling::{self, Algorithm, AlgorithmOptions, Hooks, NoiseSource, StepState};

use crate::kdiffusion_samplers::sampler_for;
use crate::sampler_runs::slice;

/// The reference README's tolerance for these runs: abs 1e-4 * max(1, max |reference|) per
/// step and per denoiser input (>= 10x the float32 rounding noise it measured).
const TOL: f64 = 1e-4;

/// Runs Ember does not reproduce. The test fails when this list is out of date in either
/// direction, so nothing is skipped silently.
/// - `comfy_lms`: ComfyUI's LMS returns the denoised sample on its last step; Ember's `lms`
///   is k-diffusion's (A1111's, and diffusers' LMSDiscrete), replayed by the `lms` run.
const NOT_REPRODUCED: &[&str] = &["comfy_lms"];

/// A closed-form denoiser of the tree's form
/// `tanh(x / sqrt(1 + sigma*sigma)) * A ± (B * sin|cos(C * x)) * (sigma / (1 + sigma))`,
/// with its constants read from the formula the tree writes (index.json `denoiser` and
/// `cfg_uncond_denoiser`), evaluated in its float32 operation order.
#[derive(Clone, Copy, Debug)]
struct Dummy {
    a: f32,
    sign: f32,
    b: f32,
    cos: bool,
    c: f32,
}

impl Dummy {
    /// Parses the right-hand side of `denoised = …` / `uncond = …`.
    fn parse(formula: &str) -> Self {
        fn bad(formula: &str) -> ! {
            panic!("unexpected dummy denoiser formula {formula:?}")
        }
        let number = |s: &str| s.trim().parse::<f32>().unwrap_or_else(|_| bad(formula));
        let rhs = formula
            .rsplit('=')
            .next()
            .unwrap_or_else(|| bad(formula))
            .trim();
        let rest = rhs
            .strip_prefix("tanh(x / sqrt(1 + sigma*sigma)) * ")
            .unwrap_or_else(|| bad(formula));
        let (a, rest) = rest.split_once(' ').unwrap_or_else(|| bad(formula));
        let (sign, rest) = rest.split_once(" (").unwrap_or_else(|| bad(formula));
        let (b, rest) = rest.split_once(" * ").unwrap_or_else(|| bad(formula));
        let cos = rest.starts_with("cos(");
        let (c, rest) = rest[4..]
            .split_once(" * x))")
            .unwrap_or_else(|| bad(formula));
        assert_eq!(rest.trim(), "* (sigma / (1 + sigma))", "{formula}");
        Self {
            a: number(a),
            sign: if sign == "-" { -1.0 } else { 1.0 },
            b: number(b),
            cos,
            c: number(c),
        }
    }

    /// The tree's denoiser (`for_uncond`: the CFG++ runs' unconditional prediction).
    fn from_index(for_uncond: bool) -> Self {
        let index = json("samplers_kdiffusion/index.json");
        let key = if for_uncond {
            "cfg_uncond_denoiser"
        } else {
            "denoiser"
        };
        Self::parse(index[key].as_str().expect("the index writes its denoiser"))
    }

    fn eval(&self, x: &Tensor<4>, sigma: f32) -> Tensor<4> {
        let a = 1.0 + sigma * sigma;
        let p = x.clone().div_scalar(a.sqrt()).tanh().mul_scalar(self.a);
        let inner = x.clone().mul_scalar(self.c);
        let trig = if self.cos { inner.cos() } else { inner.sin() };
        let q = trig.mul_scalar(self.b).mul_scalar(sigma / (1.0 + sigma));
        if self.sign < 0.0 { p - q } else { p + q }
    }
}

/// The tree's two denoisers, read once.
fn dummies() -> &'static (Dummy, Dummy) {
    static DUMMIES: std::sync::OnceLock<(Dummy, Dummy)> = std::sync::OnceLock::new();
    DUMMIES.get_or_init(|| (Dummy::from_index(false), Dummy::from_index(true)))
}

fn dummy_denoiser(x: &Tensor<4>, sigma: f32) -> Tensor<4> {
    dummies().0.eval(x, sigma)
}

fn dummy_uncond(x: &Tensor<4>, sigma: f32) -> Tensor<4> {
    dummies().1.eval(x, sigma)
}

/// Hands out the recorded draws that enter `x`, in order. Draws k-diffusion makes and then
/// multiplies by zero (or does not use) are left out: Ember does not draw them. A draw past
/// the recorded ones is NaN, so using it fails the comparison.
struct Replay(std::vec::IntoIter<Tensor<4>>);

impl NoiseSource for Replay {
    fn draw(&mut self, like: &Tensor<4>) -> Tensor<4> {
        self.0
            .next()
            .unwrap_or_else(|| like.clone().mul_scalar(f32::NAN))
    }
}

/// k-diffusion's `BrownianTreeNoiseSampler` regenerated from the run's entropy: the SDE
/// samplers' noise is then made by Ember from the seed alone, at the noise levels its own
/// sampler asks for (which must be k-diffusion's to the last bit to pick the same nodes).
struct Tree(BrownianNoise);

impl NoiseSource for Tree {
    fn draw(&mut self, like: &Tensor<4>) -> Tensor<4> {
        panic!(
            "a Brownian-tree run drew noise without noise levels ({:?})",
            like.dims()
        )
    }

    fn draw_between(&mut self, like: &Tensor<4>, sigma: f32, sigma_next: f32) -> Tensor<4> {
        tensor_from_vec(
            self.0.sample(sigma, sigma_next),
            like.dims(),
            &like.device(),
        )
    }
}

fn brownian_tree(run: &Json, sigmas: &[f32]) -> Tree {
    let tree = &run["brownian_tree"];
    let entropy = tree["entropy"].as_u64().expect("brownian_tree.entropy");
    let numel = ember_tests::numel(&run["shape"]);
    let noise = BrownianNoise::for_sigmas(sigmas, &[entropy], numel).expect("positive sigmas");
    Tree(noise)
}

fn effective_draws(run: &Json, tensors: &Fixtures, device: &Device) -> Vec<Tensor<4>> {
    run["draws"]
        .as_array()
        .expect("draws")
        .iter()
        .filter(|d| d["multiplied_by_zero"] != true && d["used"] != false)
        .map(|d| slice(tensors.get(d["tensor"].as_str().unwrap()), 0, device))
        .collect()
}

fn values(t: &Tensor<4>) -> Vec<f32> {
    tensor_to_vec(t.clone())
}

fn expected(f: &Fixture, k: usize, device: &Device) -> Vec<f64> {
    values(&slice(f, k, device))
        .into_iter()
        .map(f64::from)
        .collect()
}

/// Replays one run; returns the largest step error on the tolerance's scale.
fn replay(name: &str, run: &Json, algorithm: Algorithm, options: AlgorithmOptions) -> f64 {
    let device = Device::flex();
    let tensors = Fixtures::load(&format!("samplers_kdiffusion/runs/{name}.safetensors"));
    // DPM fast / adaptive runs record their (sigma_min, sigma_max) instead; ComfyUI derives
    // those from the shared sigma list, as Ember does.
    let sigmas: Vec<f32> = if let Some(list) = run["sigmas"].as_array() {
        // The run's own schedule (runs may use other lists than the index's).
        list.iter().map(|v| v.as_f64().unwrap() as f32).collect()
    } else if tensors.has("sigmas") {
        tensors.get("sigmas").f32()
    } else {
        let index = json("samplers_kdiffusion/index.json");
        let list: Vec<f32> = index["sigmas"]
            .as_array()
            .expect("index sigmas")
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        let range = tensors.get("sigma_range").f32();
        assert_eq!(
            (list[list.len() - 2], list[0]),
            (range[0], range[1]),
            "{name}: sigma range"
        );
        list
    };
    let x_init = slice(tensors.get("x_init"), 0, &device);
    let (model_x, model_sigma) = (tensors.get("model_x"), tensors.get("model_sigma").f32());
    // UniPC runs record ComfyUI's state in VP scaling, `x / sqrt(1 + t^2)` at its timesteps
    // (the last one 0.001): Ember reports `x_vp / alpha(t)`, so compare `ours * alpha(t)`.
    let unipc = tensors.has("x_vp_after_update");
    let after = tensors.get(if unipc {
        "x_vp_after_update"
    } else {
        "x_after_step"
    });
    let vp_scale = |k: usize| -> f32 {
        if !unipc {
            return 1.0;
        }
        let t = tensors.get("unipc_timesteps").f32()[k + 1];
        (0.5 * (1.0 / (t * t + 1.0)).ln()).exp()
    };

    let calls = Cell::new(0usize);
    let worst = RefCell::new(0f64);
    let cfg_pp = algorithm.needs_uncond();
    let cfg_scale = json("samplers_kdiffusion/index.json")["cfg_scale"]
        .as_f64()
        .unwrap() as f32;
    let last_uncond: RefCell<Option<Tensor<4>>> = RefCell::new(None);
    let scaled = |d: ember_tests::Diff| d.max_abs / d.max_abs_expected.max(1.0);
    let mut denoise = |x: &Tensor<4>, sigma: f32| {
        let k = calls.get();
        assert!(
            k < model_sigma.len(),
            "{name}: more denoiser calls than the run's {k}"
        );
        let s = f64::from(model_sigma[k]);
        assert!(
            (f64::from(sigma) - s).abs() <= 1e-5 * s.max(1.0),
            "{name}: call {k} at sigma {sigma}, the reference called at {s}"
        );
        let d = assert_close_scaled(
            &format!("{name}: x of denoiser call {k}"),
            &values(x),
            &expected(model_x, k, &device),
            TOL,
        );
        let mut w = worst.borrow_mut();
        *w = w.max(scaled(d));
        calls.set(k + 1);
        let cond = dummy_denoiser(x, sigma);
        if !cfg_pp {
            return Ok(cond);
        }
        // ComfyUI's cfg_function: uncond + (cond - uncond) * scale.
        let uncond = dummy_uncond(x, sigma);
        *last_uncond.borrow_mut() = Some(uncond.clone());
        Ok(uncond.clone() + (cond - uncond).mul_scalar(cfg_scale))
    };
    let mut on_step = |state: &mut StepState| {
        if state.intermediate {
            return ControlFlow::Continue(());
        }
        let d = assert_close_scaled(
            &format!("{name}: x after step {}", state.index),
            &values(&state.x.clone().mul_scalar(vp_scale(state.index))),
            &expected(after, state.index, &device),
            TOL,
        );
        let mut w = worst.borrow_mut();
        *w = w.max(scaled(d));
        ControlFlow::Continue(())
    };
    let mut replayed = Replay(effective_draws(run, &tensors, &device).into_iter());
    let mut tree;
    let noise: &mut dyn NoiseSource = if run["noise"] == "brownian" {
        tree = brownian_tree(run, &sigmas);
        &mut tree
    } else {
        &mut replayed
    };
    let mut hooks = Hooks {
        denoise: &mut denoise,
        noise,
        uncond: &mut || last_uncond.borrow().clone(),
        on_step: &mut on_step,
    };
    let final_x = sampling::run(algorithm, options, &mut hooks, x_init, &sigmas).unwrap();
    assert_eq!(
        calls.get(),
        run["n_model_calls"].as_u64().unwrap() as usize,
        "{name}: denoiser calls"
    );
    let d = assert_close_scaled(
        &format!("{name}: final x"),
        &values(&final_x),
        &tensors.get("final_x").f64(),
        TOL,
    );
    worst.into_inner().max(scaled(d))
}

#[test]
fn the_dummy_denoiser_matches_every_recorded_call() {
    let device = Device::flex();
    let tensors = Fixtures::load("samplers_kdiffusion/runs/heun.safetensors");
    let (xs, sigmas) = (tensors.get("model_x"), tensors.get("model_sigma").f32());
    for (k, &sigma) in sigmas.iter().enumerate() {
        let ours = dummy_denoiser(&slice(xs, k, &device), sigma);
        assert_close_scaled(
            &format!("denoiser call {k}"),
            &values(&ours),
            &expected(tensors.get("model_denoised"), k, &device),
            1e-6,
        );
    }
}

#[test]
fn every_ported_sampler_replays_its_kdiffusion_run() {
    let index = json("samplers_kdiffusion/index.json");
    let mut unported = BTreeSet::new();
    let mut replayed = 0;
    for entry in index["runs"].as_array().expect("runs") {
        let name = entry["name"].as_str().unwrap();
        let run = json(&format!("samplers_kdiffusion/runs/{name}.json"));
        let Some((algorithm, options)) = sampler_for(&run) else {
            unported.insert(name.to_string());
            continue;
        };
        let worst = replay(name, &run, algorithm, options);
        eprintln!("{name}: {algorithm:?} replayed, worst error {worst:.1e} (tolerance {TOL:e})");
        replayed += 1;
    }
    let expected: BTreeSet<String> = NOT_REPRODUCED.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        unported, expected,
        "runs without an Ember sampler differ from NOT_REPRODUCED"
    );
    assert!(replayed > 0, "no run was replayed");
}
