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
fn wgpu() -> Device {
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

fn options(device: &Device, precision: Precision, config_dir: Option<PathBuf>) -> LoadOptions {
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

fn quiet(_: Progress) -> ControlFlow<()> {
    ControlFlow::Continue(())
}

/// The GPU's own memory, as the driver reports it, is what a request is checked against:
/// less what the loaded weights hold there, and a request that cannot fit is refused
/// before it starts with hints for the GPU (the CPU's memory is not asked).
#[test]
fn requests_are_checked_against_the_gpus_own_memory() {
    use inference::memory::{MemoryOf, available_on, gpu_memory_bytes};
    use inference::worker::estimate::{Speed, cost};
    let device = wgpu();
    let capacity = gpu_memory_bytes(&device).expect("a Vulkan driver states its memory");
    let model = load(
        &reference("sd15/pipeline"),
        &options(&device, Precision::F32, None),
    )
    .unwrap();
    assert_eq!(MemoryOf::of(&device), MemoryOf::Gpu);
    let free = available_on(&device).unwrap();
    assert!(free < capacity, "the weights count: {free} of {capacity}");
    let mut request = model.request("a lighthouse", 1);
    (request.width, request.height) = (4096, 4096);
    let e = cost(
        &model,
        &request,
        (&mut Speed::default(), &|| false),
        Some(64 << 20),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("needs about")
            && e.contains("of GPU memory is free")
            && e.contains("--device cpu"),
        "{e}"
    );
}

/// A GPU short of memory, in a child process of its own (lavapipe compiles every kernel
/// once per process, minutes of a 2-core machine, so the two checks share one):
/// `EMBER_GPU_MEMORY` stands for a small card there, and no other test's allocations fall
/// between the memory counts. [`parked_text_encoders_come_back_and_give_the_same_image`],
/// then [`a_job_too_large_for_the_gpu_is_refused_and_the_worker_goes_on`].
/// `test.sh` leaves it out on a software renderer (README, "Left out on a software renderer").
#[test]
fn a_small_gpu_parks_its_text_encoders_and_refuses_a_job_too_large() {
    const CHILD: &str = "EMBER_TEST_SMALL_GPU";
    if std::env::var_os(CHILD).is_none() {
        let name = "gpu::a_small_gpu_parks_its_text_encoders_and_refuses_a_job_too_large";
        ember_tests::run_test_in_child(name, CHILD, |command| {
            command.env("EMBER_GPU_MEMORY", "320M");
        });
        return;
    }
    parked_text_encoders_come_back_and_give_the_same_image();
    a_job_too_large_for_the_gpu_is_refused_and_the_worker_goes_on();
}

/// Text encoders parked in the computer's memory (what a GPU short of memory does once the
/// prompts are encoded) free their GPU memory, come back for the next prompt and give the
/// same image bit for bit, in f32 and f16; parking happens only on a GPU with less free
/// than the working memory (320 MiB is more than these runs need). The device's memory is
/// counted before and after parking, so no other test may run on the device meanwhile (CI
/// once saw 157 KB of another test's memory counted against the parking).
fn parked_text_encoders_come_back_and_give_the_same_image() {
    use inference::pipeline::residency::{park_encoders_if_short, parkable_bytes};
    let device = wgpu();
    for precision in [Precision::F32, Precision::F16] {
        let model = load(
            &reference("sd15/pipeline"),
            &options(&device, precision, None),
        )
        .unwrap();
        let mut request = model.request("a lighthouse", 3);
        (request.width, request.height, request.steps) = (64, 64, 2);
        let resident = generate(&model, &request, &mut quiet).unwrap();
        let parkable = parkable_bytes(&model);
        assert!(parkable > 0, "the text encoders' weights are on the GPU");

        assert!(!park_encoders_if_short(&[&model], 1 << 20, Some(u64::MAX)));
        assert!(
            !model.encoders[0].is_parked(),
            "enough memory: nothing moves"
        );
        let in_use = || device.memory_pool_usage().map_or(0, |u| u.bytes_in_use);
        let before = in_use();
        assert!(park_encoders_if_short(&[&model], 1 << 20, Some(0)));
        assert!(model.encoders.iter().all(|e| e.is_parked()));
        assert_eq!(parkable_bytes(&model), 0, "nothing left to free");
        // Freed for real: a CPU tensor made by `to_device` would hold its GPU buffer.
        let after = in_use();
        assert!(
            before.saturating_sub(after) >= parkable,
            "{precision}: parking freed {} of the encoders' {parkable} bytes on the GPU",
            before.saturating_sub(after)
        );

        let again = generate(&model, &request, &mut quiet).unwrap();
        assert!(
            resident.images[0].pixels == again.images[0].pixels,
            "{precision}: the image changed after the text encoders came back"
        );
        assert!(
            !model.encoders[0].is_parked(),
            "back on the GPU for the prompt, and kept there with memory to spare"
        );
    }
    // On the CPU there is nothing to free.
    let cpu = load(
        &reference("sd15/pipeline"),
        &options(&Device::flex(), Precision::F32, None),
    )
    .unwrap();
    assert_eq!(parkable_bytes(&cpu), 0);
    assert!(!park_encoders_if_short(&[&cpu], 1 << 20, Some(0)));
}

/// A job too large for the GPU's memory (320 MiB) is refused by the worker before it starts,
/// with the GPU's hints; the model stays loaded and the next job that fits makes its image.
fn a_job_too_large_for_the_gpu_is_refused_and_the_worker_goes_on() {
    use inference::api::GenerateRequest;
    use inference::worker::{BurnEngine, CancelToken, Command, Event, JobId, ModelRole};
    let worker =
        inference::worker::WorkerHandle::spawn(BurnEngine::new(wgpu(), Precision::F32), || {})
            .unwrap();
    let until = |done: &dyn Fn(&Event) -> bool| -> Event {
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_secs(600) {
            match worker.try_event() {
                Some(e) if done(&e) => return e,
                Some(_) => {}
                None => std::thread::sleep(std::time::Duration::from_millis(5)),
            }
        }
        panic!("the worker did not answer in 10 minutes");
    };
    worker.send(Command::LoadModel {
        path: reference("sd15/pipeline"),
        config_dir: None,
        role: ModelRole::Main,
        cancel: CancelToken::new(),
    });
    let loaded = until(&|e| matches!(e, Event::ModelLoaded { .. } | Event::ModelFailed { .. }));
    assert!(matches!(loaded, Event::ModelLoaded { .. }), "{loaded:?}");
    let job = |id, side| Command::Generate {
        job: JobId(id),
        request: Box::new(GenerateRequest {
            prompt: "a lighthouse".into(),
            steps: 1,
            width: side,
            height: side,
            ..GenerateRequest::default()
        }),
        cancel: CancelToken::new(),
    };
    let ended = |e: &Event| matches!(e, Event::Finished { .. } | Event::Failed { .. });
    worker.send(job(1, 1024));
    match until(&ended) {
        Event::Failed { job, error } => {
            assert_eq!(job, JobId(1));
            assert!(
                error.contains("needs about") && error.contains("of GPU memory is free"),
                "{error}"
            );
        }
        other => panic!("a 1024² job on a 320 MiB GPU ran: {other:?}"),
    }
    worker.send(job(2, 64));
    match until(&ended) {
        Event::Finished { job, images, .. } => {
            assert_eq!((job, images.len()), (JobId(2), 1));
        }
        other => panic!("the model stays loaded and a small job runs: {other:?}"),
    }
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
