//! The real engine losing its wgpu device mid-job, as a driver reset or a GPU taken away
//! does: the test destroys the device the engine shares (as the window shares its own) once
//! a job has begun, and the worker must move to the CPU, say what to load again, and make
//! the CPU's image with the next job. Before that, the device compiles SPIR-V and reproduces
//! an SD 1.x reference run (`gpu::window_device_compiles_spirv_and_reproduces_a_run`) and
//! makes the CPU's image through the worker. On the GPU where there is one; `test.sh` leaves
//! it out on a software renderer (README, "Left out on a software renderer").

use inference::device::{Precision, shared_wgpu_device, wgpu};
use inference::worker::{BurnEngine, Event, JobId, WorkerHandle};

use crate::gpu_lost::{
    cpu_image, image, image_after_reload, job, job_of_steps, load_and_wait, lost_mid_job, next,
};
use ember_tests::{pixel_diff, reference};

/// Set in the child run: a lost device stays lost for the whole process.
const CHILD: &str = "EMBER_TEST_WGPU_LOST_CHILD";

#[test]
fn a_wgpu_device_lost_mid_job_moves_the_worker_to_the_cpu_and_the_next_job_runs_there() {
    let name = "a_wgpu_device_lost_mid_job_moves_the_worker_to_the_cpu_and_the_next_job_runs_there";
    if std::env::var_os(CHILD).is_none() {
        ember_tests::run_test_in_child(&format!("wgpu_lost::{name}"), CHILD, |_| {});
        return;
    }
    // The device the window would share, so the test holds a handle Burn also runs on.
    let shared = inference::window_gpu::open_for_window(wgpu::PowerPreference::HighPerformance)
        .expect("the Vulkan device opens")
        .expect("the wgpu tests need a Vulkan adapter (lavapipe: mesa-vulkan-drivers)");
    let handle = shared.device.clone();
    let device = shared_wgpu_device(shared).unwrap();
    crate::gpu::window_device_compiles_spirv_and_reproduces_a_run(&device);
    // f32, as the wgpu reference runs before it: their kernels are compiled already.
    let engine = BurnEngine::new(device, Precision::F32);
    let worker = WorkerHandle::spawn(engine, || {}).unwrap();
    let model = reference("sd15/pipeline");
    load_and_wait(&worker, &model);
    let cpu = cpu_image(&model);

    // Before the loss, the device Burn shares makes the CPU's image (in f32, within a level).
    worker.send(job(1));
    let before = image(&next(&worker, |e| {
        matches!(e, Event::Failed { .. } | Event::Finished { .. })
    }));
    let (worst, _) = pixel_diff(&before, &cpu);
    assert!(worst <= 1, "{worst} levels from the CPU's image");

    // The device is lost once the next job's first step is done; of its 20 steps, those left
    // take far longer than the test takes to see the first (even a real GPU's).
    worker.send(job_of_steps(2, 20));
    let begun = next(&worker, |e| {
        matches!(
            e,
            Event::Progress { step: 1.., .. } | Event::Failed { .. } | Event::Finished { .. }
        )
    });
    assert!(
        matches!(begun.last(), Some(Event::Progress { .. })),
        "{begun:?}"
    );
    handle.destroy();
    let events = next(&worker, |e| {
        matches!(e, Event::Failed { .. } | Event::Finished { .. })
    });
    let error = lost_mid_job(&events, JobId(2), &model);
    // wgpu marks the destroyed device lost once its queue is empty; a read before that fails.
    let causes = [
        "(wgpu lost the device: it was destroyed)",
        "(wgpu could not read from the device any more)",
    ];
    assert!(
        causes.iter().any(|cause| error.starts_with(&format!(
            "the GPU stopped working while generating {cause}; nothing was saved"
        ))),
        "{error}"
    );
    let after = image_after_reload(&worker, &model, 3);
    assert!(after == cpu, "the image after the fall-back is the CPU's");
}
