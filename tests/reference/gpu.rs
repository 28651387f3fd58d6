//! The reference runs on the wgpu backend: Mesa's software Vulkan (lavapipe) where the
//! machine has no GPU, as in CI (`./test.sh` installs it on Debian), a real GPU where it has
//! one. In f32 the runs must match diffusers as on the CPU (SD 1.x, SD 2.x, SDXL and its
//! refiner); in f16 the image must stay within a few levels of the f32 one.

use std::ops::ControlFlow;
use std::path::PathBuf;

use burn::tensor::Device;
use ember_tests::{Json, inpainting_folder, pixel_diff, reference, run_models, runs, runs_in};
use inference::api::Progress;
use inference::device::{DeviceKind, Precision};
use inference::lora::LoraSpec;
use inference::pipeline::generate;
use inference::schedule::diffusers::SchedulerConfig;
use inference::weights::{LoadOptions, load};

use crate::pipelines::{check_run, request_for};

/// The wgpu device, or a failure saying what to install.
pub(crate) fn wgpu() -> Device {
    wgpu_and_name().0
}

/// The wgpu device and how wgpu describes its adapter ("llvmpipe (…) (Cpu, Vulkan, …)").
fn wgpu_and_name() -> (Device, String) {
    let opened = DeviceKind::Wgpu
        .open()
        .unwrap_or_else(|e| panic!("the GPU tests need a wgpu adapter: {e}"));
    eprintln!("GPU tests on {}", opened.description);
    (opened.device, opened.description)
}

/// The runs of a folder the wgpu tests reproduce: every one on a GPU. On a software renderer
/// (lavapipe, as in CI: wgpu's adapter type `Cpu`) the first (by name) of the runs that bring
/// a model folder no earlier chosen run loaded: SD 1.x img2img and the 9-channel inpainting,
/// SD 2.x txt2img, the SDXL base + refiner ensemble. Lavapipe turns each new kernel into
/// machine code once per process (measured: a one-step SD 1.x generation 178 s there with a
/// cold Mesa cache, 56 s with a warm one, and four steps no longer than one), so each model's
/// shapes cost minutes of a 2-core machine and a further run of the same model little but
/// time; the CPU runs reproduce every sampler and pipeline, and the kernel tests check every
/// kernel on lavapipe. `EMBER_GPU_RUNS=all` takes every run there as well.
fn runs_for(adapter: &str, runs: Vec<(String, Json)>) -> Vec<(String, Json)> {
    let every = std::env::var("EMBER_GPU_RUNS").is_ok_and(|v| v == "all");
    if every || !adapter.contains("(Cpu, ") {
        return runs;
    }
    let total = runs.len();
    let mut loaded = std::collections::HashSet::new();
    let chosen: Vec<_> = runs
        .into_iter()
        .filter(|(_, run)| {
            let (base, second) = run_models(run);
            // A LoRA run's second name is its file; the model it merges into is the base.
            let folders =
                std::iter::once(base).chain(second.filter(|s| !s.ends_with(".safetensors")));
            // Every folder is marked loaded, not only up to the first new one.
            let mut brings_a_new_folder = false;
            for folder in folders {
                brings_a_new_folder |= loaded.insert(folder);
            }
            brings_a_new_folder
        })
        .collect();
    let names: Vec<&str> = chosen.iter().map(|(name, _)| name.as_str()).collect();
    eprintln!(
        "a software renderer: {} of {total} runs, one per model folder ({names:?}; \
         EMBER_GPU_RUNS=all for every run)",
        chosen.len()
    );
    chosen
}

pub(crate) fn options(
    device: &Device,
    precision: Precision,
    config_dir: Option<PathBuf>,
) -> LoadOptions {
    LoadOptions {
        config_dir,
        ..LoadOptions::new(device.clone(), precision)
    }
}

/// Every SD 1.x run the CPU reproduces (one per model folder on a software renderer: [`runs_for`]),
/// from the diffusers folder, on the GPU in f32: the same latents after every step, final
/// latents and image, within the README's tolerances.
#[test]
fn every_sd15_run_reproduces_on_wgpu_in_f32() {
    let (device, adapter) = wgpu_and_name();
    let folder = load(
        &reference("sd15/pipeline"),
        &options(&device, Precision::F32, None),
    )
    .unwrap();
    let inpaint_dir = inpainting_folder();
    let inpaint = load(inpaint_dir.path(), &options(&device, Precision::F32, None)).unwrap();
    let mut reproduced = 0;
    let readable = runs().into_iter().filter(|(_, run)| {
        SchedulerConfig::from_json(&run["scheduler_config"].to_string()).is_ok()
    });
    for (name, run) in runs_for(&adapter, readable.collect()) {
        let config = SchedulerConfig::from_json(&run["scheduler_config"].to_string()).unwrap();
        let nine_channels = run["model"]
            .as_str()
            .is_some_and(|m| m.contains("unet_inpaint"));
        let model = if nine_channels { &inpaint } else { &folder };
        check_run("sd15/runs", &name, &run, "wgpu", (model, None), config);
        reproduced += 1;
    }
    assert!(reproduced > 0, "no SD 1.x run was reproduced");
}

/// Every SD 2.x (v-prediction) and SDXL run (txt2img, img2img, inpainting, the refiner
/// alone and the base + refiner ensemble, with a LoRA where the run has one) from the
/// diffusers folders, on the GPU in f32, within the tolerances the CPU meets (one run per
/// model folder on a software renderer: [`runs_for`]).
#[test]
fn every_sd2_and_sdxl_run_reproduces_on_wgpu_in_f32() {
    let (device, adapter) = wgpu_and_name();
    let options = options(&device, Precision::F32, None);
    let mut models: std::collections::HashMap<String, inference::model::Model> = Default::default();
    let mut reproduced = Vec::new();
    for dir in ["sd2v/runs", "sdxl/runs"] {
        for (name, run) in runs_for(&adapter, runs_in(dir)) {
            let config = SchedulerConfig::from_json(&run["scheduler_config"].to_string()).unwrap();
            let (base, second) = run_models(&run);
            let lora = run["lora_scale"].as_f64().map(|scale| LoraSpec {
                path: reference(second.as_deref().expect("a LoRA run names its LoRA")),
                text_encoder: scale as f32,
                unet: scale as f32,
            });
            let refiner = second.filter(|_| lora.is_none());
            for folder in std::iter::once(&base).chain(&refiner) {
                if !models.contains_key(folder) {
                    models.insert(folder.clone(), load(&reference(folder), &options).unwrap());
                }
            }
            let specs: Vec<LoraSpec> = lora.into_iter().collect();
            inference::lora::set(models.get_mut(&base).unwrap(), &specs).unwrap();
            let refiner = refiner.as_ref().map(|r| &models[r]);
            check_run(dir, &name, &run, "wgpu", (&models[&base], refiner), config);
            reproduced.push(format!("{dir}/{name}"));
        }
    }
    for kind in ["sd2v/runs/txt2img", "sdxl/runs/base_refiner"] {
        assert!(
            reproduced.iter().any(|n| n.starts_with(kind)),
            "no {kind} run was reproduced on wgpu (reproduced: {reproduced:?})"
        );
    }
}

/// Most levels an f16 image (f32 VAE) may differ from the f32 one on the GPU: on lavapipe
/// the txt2img, img2img and inpainting runs differed by at most 1, 1 and 1 (the test prints
/// them) since convolutions run as matrix products that sum in f32; 3, 4 and 5 with Burn's
/// direct convolution, which sums in f16. The tolerance leaves room for other weights.
const F16_PIXEL_TOL: i64 = 4;

/// A txt2img, an img2img and an inpainting run in f16 on the GPU (the VAE in f32, as
/// `--precision auto` loads it) against the same runs in f32 there; the observed worst
/// channel difference of each is printed.
/// `test.sh` leaves it out on a software renderer (README, "Left out on a software renderer").
#[test]
fn f16_on_wgpu_stays_close_to_f32() {
    let device = wgpu();
    assert!(
        device.supports_dtype(Precision::F16.dtype()),
        "the adapter computes in f16"
    );
    let f32_model = load(
        &reference("sd15/pipeline"),
        &options(&device, Precision::F32, None),
    )
    .unwrap();
    let half = LoadOptions {
        vae_upcast: true,
        ..options(&device, Precision::F16, None)
    };
    let f16_model = load(&reference("sd15/pipeline"), &half).unwrap();
    let vae = if f16_model.vae_config.force_upcast {
        Precision::F32
    } else {
        Precision::F16
    };
    assert_eq!(
        f16_model.vae_precision, vae,
        "the VAE's precision follows force_upcast"
    );
    let mut compared = 0;
    for kind in ["txt2img_", "img2img", "inpaint_blend"] {
        let Some((name, run)) = runs().into_iter().find(|(name, _)| name.starts_with(kind)) else {
            continue;
        };
        let config = SchedulerConfig::from_json(&run["scheduler_config"].to_string()).unwrap();
        let request = request_for(&f32_model, "sd15/runs", &run, config);
        let a = generate(&f32_model, &request, &mut quiet).unwrap();
        let b = generate(&f16_model, &request, &mut quiet).unwrap();
        let (worst, off) = pixel_diff(&a.images[0].pixels, &b.images[0].pixels);
        eprintln!("{name}: f16 differs from f32 by at most {worst} levels ({off} channels)");
        assert!(
            worst <= F16_PIXEL_TOL,
            "{name}: f16 differs from f32 by {worst} levels"
        );
        compared += 1;
    }
    assert!(compared > 0, "no run was compared");
}

pub(crate) fn quiet(_: Progress) -> ControlFlow<()> {
    ControlFlow::Continue(())
}

/// The app's device on Vulkan: the one `window_gpu` opens for the window (with the extensions
/// Burn's SPIR-V kernels use), registered with Burn as the window's, compiles SPIR-V and
/// reproduces an SD 1.x run as the default device does. Checked by the `wgpu_lost` test on
/// the device it then loses (each device compiles its own kernels: on lavapipe minutes of
/// a 2-core machine).
pub(crate) fn window_device_compiles_spirv_and_reproduces_a_run(device: &Device) {
    use inference::device::kernel_language;
    if cfg!(target_os = "linux") {
        assert_eq!(
            kernel_language(device),
            Some("SPIR-V"),
            "Vulkan runs SPIR-V"
        );
    }
    let folder = load(
        &reference("sd15/pipeline"),
        &options(device, Precision::F32, None),
    )
    .unwrap();
    let (name, run, config) = runs()
        .into_iter()
        .find_map(|(name, run)| {
            let config = SchedulerConfig::from_json(&run["scheduler_config"].to_string()).ok()?;
            let plain = run["model"]
                .as_str()
                .is_none_or(|m| !m.contains("unet_inpaint"));
            plain.then_some((name, run, config))
        })
        .expect("an SD 1.x run on the plain UNet");
    check_run("sd15/runs", &name, &run, "wgpu", (&folder, None), config);
}
