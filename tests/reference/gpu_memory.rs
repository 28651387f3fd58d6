//! The GPU's own memory on the wgpu backend: requests checked against it, text encoders
//! parked in the computer's memory on a small GPU (and the same image once they are back),
//! and a job too large for it refused while the worker goes on.

use burn::tensor::Device;
use ember_tests::reference;
use inference::device::Precision;
use inference::pipeline::generate;
use inference::weights::load;

use crate::gpu::{options, quiet, wgpu};

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
        let name = "gpu_memory::a_small_gpu_parks_its_text_encoders_and_refuses_a_job_too_large";
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
