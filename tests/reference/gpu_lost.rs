//! The real engine losing its GPU mid-job, on `tests/cuda_dry_run`'s stand-in CUDA driver
//! (its GPU is lost once a file exists): the worker moves to the CPU, says what to load
//! again, and the next job there makes the CPU's image.

use std::time::{Duration, Instant};

use ember_tests::cuda_stand_in::StandIn;
use ember_tests::reference;
use inference::api::GenerateRequest;
use inference::device::{DeviceKind, Precision, choose_precision};
use inference::worker::{
    BurnEngine, CancelToken, Command, Event, JobId, ModelRole, ModelToReload, WorkerHandle,
};

/// Set in the child run, which starts with the stand-in's libraries on its library path.
const CHILD: &str = "EMBER_TEST_GPU_LOST_CHILD";
/// The file whose creation loses the stand-in's GPU (`FAKE_CUDA_LOSE_WHEN`).
const TRIGGER: &str = "FAKE_CUDA_LOSE_WHEN";

/// Runs the test `name` again in a child process on the stand-in driver, with the file that
/// loses its GPU in a temporary folder; true in that child.
fn in_child_on_stand_in(name: &str) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let stand_in = StandIn::build();
    let trigger = tempfile::tempdir().unwrap();
    ember_tests::run_test_in_child(&format!("gpu_lost::{name}"), CHILD, |command| {
        stand_in
            .apply(command)
            .env(TRIGGER, trigger.path().join("lose"));
    });
    false
}

/// A worker on the stand-in's CUDA device, in `--precision auto` as the app makes it.
fn cuda_worker() -> WorkerHandle {
    let cuda = DeviceKind::Cuda(0)
        .open()
        .expect("the stand-in CUDA device opens");
    let (precision, vae_upcast) = choose_precision("auto", &cuda).unwrap();
    let engine = BurnEngine::new(cuda.device.clone(), precision).with_vae_upcast(vae_upcast);
    WorkerHandle::spawn(engine, || {}).unwrap()
}

fn load(path: &std::path::Path) -> Command {
    Command::LoadModel {
        path: path.to_path_buf(),
        config_dir: None,
        role: ModelRole::Main,
        cancel: CancelToken::new(),
    }
}

/// Loads `path` and waits until it has loaded.
pub(crate) fn load_and_wait(worker: &WorkerHandle, path: &std::path::Path) {
    worker.send(load(path));
    let loaded = next(worker, |e| {
        matches!(e, Event::ModelLoaded { .. } | Event::ModelFailed { .. })
    });
    assert!(
        matches!(loaded.last(), Some(Event::ModelLoaded { .. })),
        "{loaded:?}"
    );
}

/// `GpuLost`'s list for the main model at `path`.
pub(crate) fn main_model_to_reload(path: &std::path::Path) -> Vec<ModelToReload> {
    vec![ModelToReload {
        role: ModelRole::Main,
        path: path.to_path_buf(),
        config_dir: None,
    }]
}

fn lose_the_gpu() {
    std::fs::write(std::env::var_os(TRIGGER).unwrap(), "").unwrap();
}

/// The GPU lost while a model loads: the load ends with the event that moves the worker to
/// the CPU, listing that model to load there, and no `ModelFailed`.
#[test]
fn a_gpu_lost_while_loading_lists_that_model_to_load_on_the_cpu() {
    if !in_child_on_stand_in("a_gpu_lost_while_loading_lists_that_model_to_load_on_the_cpu") {
        return;
    }
    let worker = cuda_worker();
    lose_the_gpu();
    let model = reference("sd15/pipeline");
    worker.send(load(&model));
    let events = next(&worker, |e| {
        matches!(
            e,
            Event::GpuLost { .. } | Event::ModelLoaded { .. } | Event::ModelFailed { .. }
        )
    });
    let Some(Event::GpuLost { error, reload }) = events.last() else {
        panic!("no GpuLost event: {events:?}");
    };
    assert!(
        error.starts_with("the GPU stopped working while loading the model ("),
        "{error}"
    );
    assert!(error.contains("the model was not loaded"), "{error}");
    assert_eq!(reload, &main_model_to_reload(&model));
    load_and_wait(&worker, &model);
}

#[test]
fn a_gpu_lost_mid_job_moves_the_worker_to_the_cpu_and_the_next_job_runs_there() {
    let name = "a_gpu_lost_mid_job_moves_the_worker_to_the_cpu_and_the_next_job_runs_there";
    if !in_child_on_stand_in(name) {
        return;
    }
    let worker = cuda_worker();
    let model = reference("sd15/pipeline");
    load_and_wait(&worker, &model);

    // The GPU is lost: the job fails, after the event that moves the worker to the CPU.
    lose_the_gpu();
    worker.send(job(1));
    let events = next(&worker, |e| {
        matches!(e, Event::Failed { .. } | Event::Finished { .. })
    });
    let error = lost_mid_job(&events, JobId(1), &model);
    assert!(error.contains("status 719"), "{error}");
    let after = image_after_reload(&worker, &model, 2);
    assert!(
        after == cpu_image(&model),
        "the image after the fall-back is the CPU's"
    );
}

/// Checks that `events` are `job` failing with the GPU lost while generating from `model`:
/// the event that moves the worker to the CPU, listing `model` to load again there, then the
/// job's failure with the same message; returns that message.
pub(crate) fn lost_mid_job(events: &[Event], job: JobId, model: &std::path::Path) -> String {
    let lost = events.iter().find_map(|e| match e {
        Event::GpuLost { error, reload } => Some((error, reload)),
        _ => None,
    });
    let (error, reload) = lost.unwrap_or_else(|| panic!("no GpuLost event: {events:?}"));
    assert!(
        error.starts_with("the GPU stopped working while generating ("),
        "{error}"
    );
    assert!(error.contains("Ember goes on on the CPU"), "{error}");
    assert_eq!(reload, &main_model_to_reload(model));
    match events.last() {
        Some(Event::Failed {
            job: failed,
            error: why,
        }) => {
            assert_eq!((*failed, why), (job, error));
        }
        other => panic!("the job did not fail: {other:?}"),
    }
    error.clone()
}

/// As the UI does after the loss: `model` loads again (on the CPU), and job `id` makes an
/// image; its pixels.
pub(crate) fn image_after_reload(
    worker: &WorkerHandle,
    model: &std::path::Path,
    id: u64,
) -> Vec<u8> {
    load_and_wait(worker, model);
    worker.send(job(id));
    image(&next(worker, |e| {
        matches!(e, Event::Failed { .. } | Event::Finished { .. })
    }))
}

/// [`job`]'s image from `model` on an engine made for the CPU.
pub(crate) fn cpu_image(model: &std::path::Path) -> Vec<u8> {
    let cpu = DeviceKind::Cpu.open().unwrap().device;
    let cpu_worker = WorkerHandle::spawn(BurnEngine::new(cpu, Precision::F32), || {}).unwrap();
    load_and_wait(&cpu_worker, model);
    cpu_worker.send(job(3));
    image(&next(&cpu_worker, |e| {
        matches!(e, Event::Finished { .. } | Event::Failed { .. })
    }))
}

pub(crate) fn job(id: u64) -> Command {
    job_of_steps(id, 2)
}

/// [`job`] with `steps` steps.
pub(crate) fn job_of_steps(id: u64, steps: u32) -> Command {
    Command::Generate {
        job: JobId(id),
        request: Box::new(GenerateRequest {
            prompt: "a lighthouse".into(),
            steps,
            width: 64,
            height: 64,
            seed: 7,
            ..GenerateRequest::default()
        }),
        cancel: CancelToken::new(),
    }
}

/// The worker's events up to the first that `done` says ends the wait (5 minutes at most).
pub(crate) fn next(worker: &WorkerHandle, done: impl Fn(&Event) -> bool) -> Vec<Event> {
    let start = Instant::now();
    let mut events = Vec::new();
    while start.elapsed() < Duration::from_secs(300) {
        match worker.try_event() {
            Some(e) => {
                let last = done(&e);
                events.push(e);
                if last {
                    return events;
                }
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    panic!("the worker did not answer in 5 minutes: {events:?}");
}

/// The pixels of a finished job's one image.
pub(crate) fn image(events: &[Event]) -> Vec<u8> {
    match events.last() {
        Some(Event::Finished { images, .. }) => images[0].image.pixels.clone(),
        other => panic!("the job did not finish: {other:?}"),
    }
}
