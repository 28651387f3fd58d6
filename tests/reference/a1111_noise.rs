//! A1111's noise, recorded with A1111's own `modules/rng.py` and `rng_philox.py` by
//! `tests/extra/make_a1111_noise.py` (so it holds on any reference tree): its NV source's
//! Philox draws, and `ImageRNG`'s first noise and step noise for both host sources, with
//! batches, variation seeds, "resize seed from" and an eta noise seed delta.

use std::path::{Path, PathBuf};

use ember_tests::{Fixtures, Json, diff};
use inference::api::{GenerateRequest, NoiseOptions, RngSource, Variation};
use inference::rng::{BatchRng, PhiloxRng};

/// Plain draws come out bit for bit, CPU and NV alike; a variation's slerp sums in another
/// order than torch's float32 norms (observed 4.8e-7 on values up to 4).
const NOISE_TOLERANCE: f64 = 2e-6;
/// NV draws: numpy's and Rust's double-precision `log` and `sin` may differ by an ulp
/// before the rounding to float32 (observed: bit for bit).
const PHILOX_TOLERANCE: f64 = 1e-6;

fn noise_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("extra/a1111_noise")
}

fn cases() -> (Json, Fixtures) {
    let dir = noise_dir();
    let text = std::fs::read_to_string(dir.join("cases.json")).unwrap();
    let cases = serde_json::from_str(&text).unwrap();
    (cases, Fixtures::load_path(&dir.join("cases.safetensors")))
}

/// A case's options as A1111 records them (`resize_from` in pixels at its `factor`).
pub fn noise_options(case: &Json) -> NoiseOptions {
    let size = |v: &Json| v.as_u64().unwrap() as u32;
    NoiseOptions {
        rng: RngSource::parse(case["rng"].as_str().unwrap()).unwrap(),
        variation: case["variation_seed"].as_u64().map(|seed| Variation {
            seed,
            strength: case["variation_strength"].as_f64().unwrap() as f32,
        }),
        resize_from: case["resize_from"]
            .as_array()
            .map(|wh| (size(&wh[0]), size(&wh[1]))),
        eta_noise_seed_delta: case["ensd"].as_u64().unwrap_or(0),
    }
}

#[test]
fn a1111_image_noise_reproduces_for_every_source_and_seed_extra() {
    let (cases, tensors) = cases();
    let cases = cases["noise"].as_array().unwrap();
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let request = GenerateRequest {
            seed: case["seed"].as_u64().unwrap(),
            batch: case["batch"].as_u64().unwrap() as u32,
            noise: noise_options(case),
            ..GenerateRequest::default()
        };
        let mut rng = BatchRng::for_request(&request);
        let seeds: Vec<u64> = case["seeds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_u64().unwrap())
            .collect();
        assert_eq!(rng.seeds(), seeds, "{name}: the images' seeds");
        let shape: Vec<usize> = case["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let factor = case["factor"].as_u64().unwrap() as usize;
        let draws = case["draws"].as_u64().unwrap();
        for k in 0..draws {
            let ours = match k {
                0 => rng.first_noise([shape[0], shape[1], shape[2]], factor),
                _ => {
                    if k == 1 {
                        rng.begin_step_noise();
                    }
                    rng.randn(shape.iter().product())
                }
            };
            let theirs = tensors.get(&format!("{name}/draw{k}")).f64();
            let d = diff(&ours, &theirs);
            if std::env::var_os("EMBER_TEST_VERBOSE").is_some() {
                eprintln!("{name} draw {k}: max |diff| {:.2e}", d.max_abs);
            }
            if d.max_abs > NOISE_TOLERANCE {
                failures.push(format!(
                    "{name} draw {k}: max |diff| {:.3e} at {}",
                    d.max_abs, d.worst_index
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn nv_philox_draws_reproduce_a1111s_generator() {
    let (cases, tensors) = cases();
    let cases = cases["philox"].as_array().unwrap();
    assert!(!cases.is_empty());
    for case in cases {
        let seed = case["seed"].as_u64().unwrap();
        let numel = case["numel"].as_u64().unwrap() as usize;
        let mut rng = PhiloxRng::new(seed);
        for k in 0..case["draws"].as_u64().unwrap() {
            let theirs = tensors.get(&format!("philox/{seed}/{numel}/{k}")).f64();
            let d = diff(&rng.randn(numel), &theirs);
            assert!(
                d.max_abs <= PHILOX_TOLERANCE,
                "seed {seed}, {numel} values, draw {k}: max |diff| {:.3e}",
                d.max_abs
            );
        }
    }
}

/// What the seed extras do to whole generations on the reference model, and what the PNG
/// says of them.
#[test]
fn a_variation_batch_keeps_the_seed_and_counts_the_variation_seed_up() {
    use inference::api::{HiresFix, HiresPlan, HiresSize, HiresUpscaler};
    use inference::device::Precision;
    use inference::metadata::{self, ModelRef, Parameters};
    use inference::pipeline::generate;

    use crate::engine::{model, quiet, request};
    let m = model(Precision::F32);
    let pixels = |r: &GenerateRequest| {
        let g = generate(&m, r, &mut quiet).unwrap();
        g.images.into_iter().map(|i| i.pixels).collect::<Vec<_>>()
    };
    let mut r = request(&m, 5);
    r.noise.variation = Some(Variation {
        seed: 100,
        strength: 0.4,
    });
    r.batch = 2;
    let batch = pixels(&r);
    // Image 1 is the image a batch of one with the next variation seed makes.
    let mut single = r.clone();
    single.batch = 1;
    single.noise = r.noise.for_image(1);
    assert_eq!(pixels(&single)[0], batch[1]);
    let plain = pixels(&request(&m, 5));
    assert_ne!(batch[0], plain[0], "a variation changes the image");
    // A strength of 0 is no variation.
    single.noise.variation.as_mut().unwrap().strength = 0.0;
    assert_eq!(pixels(&single)[0], plain[0]);

    let info = ModelRef {
        info: &m.info,
        hash: None,
    };
    let text = metadata::for_generation(&r, info, None, 1).to_text();
    let p = Parameters::parse(&text);
    assert_eq!(p.get("Seed"), Some("5"), "{text}");
    assert_eq!(p.get("Variation seed"), Some("101"), "{text}");
    assert_eq!(p.get("Variation seed strength"), Some("0.4"), "{text}");
    assert_eq!(p.get("RNG"), Some("CPU"), "{text}");
    assert_eq!(p.get("Seed resize from"), None);

    // NV noise, a seed resize and an ENSD (Euler a draws step noise) each make another
    // image, and are written down.
    let mut nv = request(&m, 5);
    let resize = (nv.width / 2, nv.height + 16);
    for option in 0..3 {
        let mut one = request(&m, 5);
        match option {
            0 => one.noise.rng = RngSource::Nv,
            1 => one.noise.resize_from = Some(resize),
            _ => one.noise.eta_noise_seed_delta = 31337,
        }
        assert_ne!(
            pixels(&one)[0],
            plain[0],
            "option {option} changes the image"
        );
    }
    nv.noise.rng = RngSource::Nv;
    nv.noise.resize_from = Some(resize);
    nv.noise.eta_noise_seed_delta = 31337;
    let text = metadata::for_generation(&nv, info, None, 0).to_text();
    let p = Parameters::parse(&text);
    assert_eq!(p.get("RNG"), Some("NV"), "{text}");
    assert_eq!(p.get("ENSD"), Some("31337"), "{text}");
    let resize = format!("{}x{}", resize.0, resize.1);
    assert_eq!(p.get("Seed resize from"), Some(resize.as_str()));

    // A hires fix's second pass of image 1 keeps the seed and its variation seed.
    let fix = HiresFix {
        upscaler: HiresUpscaler::Lanczos,
        size: HiresSize::Scale(2.0),
        steps: 0,
        strength: 0.5,
    };
    let plan = HiresPlan {
        upscaled: (r.width * 2, r.height * 2),
        size: (r.width * 2, r.height * 2),
        offset: (0, 0),
    };
    let second = inference::pipeline::hires::second_pass_request(&r, &fix, &plan, 1);
    assert_eq!(second.seed, 5);
    assert_eq!(second.noise.variation.unwrap().seed, 101);
}
