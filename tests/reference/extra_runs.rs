//! Runs the reference tree does not cover, recorded with diffusers by
//! `tests/extra/make_runs.py` on tiny seeded models of our own (`tests/extra/models`, with
//! the vocabulary of `assets/clip`), so they hold on any reference tree: every diffusers
//! scheduler class x every timestep spacing, strength < 1 for img2img and 4- and 9-channel
//! inpainting, v-prediction with zero-terminal SNR, CFG rescale, SDXL's second prompt; and
//! (`tests/extra/make_controlnet_runs.py`, in `control_runs/`) an SDXL ControlNet made from
//! the tiny SDXL UNet, at full guidance and with a scale and start / end fractions;
//! (`tests/extra/make_a1111_noise.py`, in `noise_runs/`) runs started from A1111's noise;
//! and (`tests/extra/make_seamless_runs.py`, in `seamless_runs/`) seamless tiling on both
//! axes and on one, txt2img and img2img.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use burn::tensor::Device;
use ember_tests::{Fixtures, Json, diff, pixel_diff};
use inference::api::{SamplerChoice, Seamless};
use inference::device::Precision;
use inference::imaging;
use inference::model::Model;
use inference::pipeline::generate;
use inference::schedule::diffusers::SchedulerConfig;
use inference::weights::{LoadOptions, load};

/// Final latents within this fraction of their largest magnitude (observed under 3e-5).
const LATENT_TOLERANCE: f64 = 1e-4;
/// `DPMSolverSDEScheduler`'s final latents: torch's vectorised float32 `log`/`exp` differ
/// from correctly rounded ones by an ulp for some sigmas, and such an ulp can move a
/// Brownian-tree query across the tree's grid (observed 5e-4 of max in one case of three).
const SDE_LATENT_TOLERANCE: f64 = 2e-3;
/// Decoded 8-bit images within this many levels.
const PIXEL_TOLERANCE: i64 = 2;

fn extra_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("extra")
}

/// Copies `from` (recursively) to `to`.
fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_folder(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A loadable copy of `models/<model>` in `dir`: the tokenizers get the vocabulary of
/// `assets/clip`, and `unet` (another folder of `models/`) replaces the UNet.
fn assemble(dir: &Path, model: &str, unet: Option<&str>) -> PathBuf {
    let models = extra_dir().join("models");
    let out = dir.join(format!("{model}+{}", unet.unwrap_or("unet")));
    copy_folder(&models.join(model), &out);
    let assets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/clip");
    for tokenizer in ["tokenizer", "tokenizer_2"] {
        if out.join(tokenizer).is_dir() {
            for file in ["vocab.json", "merges.txt"] {
                std::fs::copy(assets.join(file), out.join(tokenizer).join(file)).unwrap();
            }
        }
    }
    if let Some(unet) = unet {
        std::fs::remove_dir_all(out.join("unet")).unwrap();
        copy_folder(&models.join(unet), &out.join("unet"));
    }
    out
}

/// Runs one recorded case on `model`; `Err` says how it differs from diffusers.
fn check(
    run: &Json,
    model: &mut Model,
    tensors: &Fixtures,
    config: SchedulerConfig,
) -> Result<(), String> {
    let extra = extra_dir();
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
    r.sampler = SamplerChoice::Diffusers(config);
    // The A1111 noise runs (`noise_runs/`): its noise source and seed extras, and a batch.
    if run["rng"].is_string() {
        r.noise = super::a1111_noise::noise_options(run);
        r.batch = run["batch"].as_u64().unwrap() as u32;
    }
    let size = Some((r.width, r.height));
    if let Some(init) = run["init_image"].as_str() {
        r.init_image = Some(imaging::load_rgb(&extra.join(init), size).unwrap());
        r.strength = run["strength"].as_f64().unwrap() as f32;
    }
    if let Some(mask) = run["mask_image"].as_str() {
        r.mask = Some(imaging::load_mask(&extra.join(mask), size).unwrap());
    }
    if let Some(mode) = run["seamless"].as_str() {
        r.seamless = Seamless::parse(mode).map_err(|e| e.to_string())?;
    }
    if let Some(controlnet) = run["controlnet"].as_str() {
        use inference::control::{MapSettings, Module};
        let number = |key: &str| run[key].as_f64().unwrap() as f32;
        r.controlnets = vec![inference::api::ControlRequest {
            model: extra.join("models").join(controlnet),
            image: imaging::load_rgb(&extra.join(run["control_image"].as_str().unwrap()), None)
                .unwrap(),
            scale: number("controlnet_conditioning_scale"),
            start: number("control_guidance_start"),
            end: number("control_guidance_end"),
            map: MapSettings::new(Module::None),
        }];
    }
    inference::control::set_for_request(model, &r).map_err(|e| e.to_string())?;
    let quiet = &mut |_: inference::api::Progress| std::ops::ControlFlow::Continue(());
    let g = generate(model, &r, quiet).map_err(|e| e.to_string())?;
    let expected = tensors.get("final_latents").f64();
    let d = diff(&g.latents, &expected);
    let sde = run["scheduler_config"]["_class_name"] == "DPMSolverSDEScheduler";
    let tolerance = if sde {
        SDE_LATENT_TOLERANCE
    } else {
        LATENT_TOLERANCE
    };
    let bound = tolerance * d.max_abs_expected;
    if d.max_abs > bound {
        return Err(format!(
            "final latents: max |diff| {:.3e} > {bound:.3e} ({:.2e} of max |ref|)",
            d.max_abs,
            d.max_abs / d.max_abs_expected
        ));
    }
    let expected = match tensors.tensors.get("images_u8") {
        Some(images) => images.i64(),
        None => tensors.get("image_u8").i64(),
    };
    let ours: Vec<u8> = g.images.iter().flat_map(|i| i.pixels.clone()).collect();
    let (worst, _) = pixel_diff(&ours, &expected);
    if worst > PIXEL_TOLERANCE {
        return Err(format!("a pixel differs by {worst} levels"));
    }
    // The recorded wrap matters: without it the image is another one.
    if r.seamless.is_on() {
        r.seamless = Seamless::Off;
        let plain = generate(model, &r, quiet).map_err(|e| e.to_string())?;
        let plain: Vec<u8> = plain.images.iter().flat_map(|i| i.pixels.clone()).collect();
        let (apart, _) = pixel_diff(&plain, &expected);
        if apart <= 4 * PIXEL_TOLERANCE {
            return Err(format!(
                "without seamless tiling the image differs by only {apart} levels"
            ));
        }
    }
    if std::env::var_os("EMBER_TEST_VERBOSE").is_some() {
        eprintln!(
            "{}: {:.2e} of max",
            run["name"],
            d.max_abs / d.max_abs_expected
        );
    }
    Ok(())
}

#[test]
fn extra_diffusers_runs_reproduce() {
    check_runs_in("runs");
}

/// Runs started from A1111's noise (`tests/extra/make_a1111_noise.py`): the NV source, a
/// variation seed over a batch, "resize seed from", and ancestral step noise from A1111's
/// generators after an eta noise seed delta.
#[test]
fn a1111_noise_runs_reproduce() {
    check_runs_in("noise_runs");
}

/// A1111's Tiling (every UNet and VAE convolution circular) and its Asymmetric tiling
/// script (one axis circular, the other zero-padded).
#[test]
fn seamless_runs_reproduce() {
    check_runs_in("seamless_runs");
}

#[test]
fn sdxl_controlnet_runs_reproduce() {
    check_runs_in("control_runs");
}

/// Every recorded run in `extra/<folder>`.
fn check_runs_in(folder: &str) {
    let dir = extra_dir().join(folder);
    let scratch = tempfile::tempdir().unwrap();
    let mut models: HashMap<(String, Option<String>), Model> = HashMap::new();
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    for path in paths {
        let run: Json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let name = run["name"].as_str().unwrap().to_string();
        let tensors = Fixtures::load_path(&path.with_extension("safetensors"));
        let config = SchedulerConfig::from_json(&run["scheduler_config"].to_string())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let key = (
            run["model"].as_str().unwrap().to_string(),
            run["unet"].as_str().map(str::to_string),
        );
        // What `--prediction` does for a model whose files say otherwise.
        let prediction = config.prediction;
        let model = models.entry(key.clone()).or_insert_with(|| {
            let folder = assemble(scratch.path(), &key.0, key.1.as_deref());
            load(&folder, &LoadOptions::new(Device::flex(), Precision::F32))
                .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        });
        model.prediction = prediction;
        if let Err(e) = check(&run, model, &tensors, config) {
            failures.push(format!("{name}: {e}"));
        }
        checked += 1;
    }
    assert!(checked > 0, "no extra run in {}", dir.display());
    assert!(
        failures.is_empty(),
        "{} of {checked} extra runs differ from diffusers:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
