//! The inference worker's protocol, with a fake engine (timing, cancellation, panics,
//! shutdown) and with the real engine on the reference model.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use burn::tensor::Device;
use ember_tests::fake_engine::{self, FakeEngine};
use ember_tests::reference;
use inference::api::GenerateRequest;
use inference::device::Precision;
use inference::pipeline::generate;
use inference::weights::{LoadOptions, load};
use inference::worker::{BurnEngine, CancelToken, Command, Event, JobId, ModelRole, WorkerHandle};

fn fake_worker(step_ms: u64) -> (WorkerHandle, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let steps = Arc::new(AtomicUsize::new(0));
    let wakes = Arc::new(AtomicUsize::new(0));
    let w = wakes.clone();
    let engine = FakeEngine {
        steps_run: steps.clone(),
        ..FakeEngine::new(Duration::from_millis(step_ms))
    };
    let handle = WorkerHandle::spawn(engine, move || {
        w.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    (handle, steps, wakes)
}

fn request(prompt: &str, steps: u32) -> Box<GenerateRequest> {
    Box::new(GenerateRequest {
        prompt: prompt.into(),
        steps,
        ..GenerateRequest::default()
    })
}

/// Collects events until `done` says stop (or 10 s pass).
fn events_until(handle: &WorkerHandle, mut done: impl FnMut(&Event) -> bool) -> Vec<Event> {
    let start = Instant::now();
    let mut seen = Vec::new();
    while start.elapsed() < Duration::from_secs(10) {
        match handle.try_event() {
            Some(e) => {
                let stop = done(&e);
                seen.push(e);
                if stop {
                    return seen;
                }
            }
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    panic!("timed out; events so far: {seen:?}");
}

#[test]
fn cancelling_mid_job_stops_within_a_step() {
    let (worker, steps, wakes) = fake_worker(20);
    let cancel = CancelToken::new();
    worker.send(Command::Generate {
        job: JobId(1),
        request: request("a cat", 50),
        cancel: cancel.clone(),
    });
    events_until(&worker, |e| matches!(e, Event::Progress { step: 3, .. }));
    cancel.cancel();
    let at_cancel = steps.load(Ordering::SeqCst);
    let events = events_until(&worker, |e| {
        matches!(e, Event::Cancelled { .. } | Event::Finished { .. })
    });
    assert!(
        matches!(events.last(), Some(Event::Cancelled { job: JobId(1) })),
        "{events:?}"
    );
    assert!(
        steps.load(Ordering::SeqCst) <= at_cancel + 1,
        "the job ran on after the cancel"
    );
    assert!(wakes.load(Ordering::SeqCst) > 0, "the UI was woken");
}

#[test]
fn cancelling_inside_one_long_kernel_call_stops_it_and_drops_its_result() {
    // A CPU attention at a large size takes minutes in one call, between the checks a step
    // makes: the worker puts the job's cancel in scope for such kernels, and drops the
    // unfinished result of one that gave up.
    let (worker, steps, _) = fake_worker(0);
    let cancel = CancelToken::new();
    worker.send(Command::Generate {
        job: JobId(1),
        request: request(fake_engine::LONG_KERNEL_PROMPT, 1),
        cancel: cancel.clone(),
    });
    // Cancelled once inside the "kernel" (a cancel before it would end the job anyway).
    let start = Instant::now();
    while steps.load(Ordering::SeqCst) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the job never started"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let at_cancel = Instant::now();
    cancel.cancel();
    let events = events_until(&worker, |e| {
        matches!(e, Event::Cancelled { .. } | Event::Finished { .. })
    });
    assert!(
        matches!(events.last(), Some(Event::Cancelled { job: JobId(1) })),
        "the unfinished result must not be kept: {events:?}"
    );
    assert!(
        at_cancel.elapsed() < fake_engine::LONG_KERNEL_TIME / 3,
        "the kernel ran on after the cancel"
    );
}

#[test]
fn a_job_sent_while_one_runs_starts_after_it_finishes() {
    let (worker, _, _) = fake_worker(5);
    worker.send(Command::Generate {
        job: JobId(1),
        request: request("first", 5),
        cancel: CancelToken::new(),
    });
    worker.send(Command::Generate {
        job: JobId(2),
        request: request("second", 5),
        cancel: CancelToken::new(),
    });
    let events = events_until(&worker, |e| {
        matches!(e, Event::Finished { job: JobId(2), .. })
    });
    let order: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::JobStarted { job } => Some(format!("start {}", job.0)),
            Event::Finished { job, .. } => Some(format!("finish {}", job.0)),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["start 1", "finish 1", "start 2", "finish 2"]);
}

#[test]
fn a_panicking_job_fails_and_the_worker_keeps_serving() {
    let (worker, _, _) = fake_worker(1);
    worker.send(Command::Generate {
        job: JobId(1),
        request: request("panic", 3),
        cancel: CancelToken::new(),
    });
    let events = events_until(&worker, |e| matches!(e, Event::Failed { .. }));
    match events.last() {
        Some(Event::Failed {
            job: JobId(1),
            error,
        }) => assert!(error.contains("told to panic"), "{error}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    worker.send(Command::Generate {
        job: JobId(2),
        request: request("fine", 3),
        cancel: CancelToken::new(),
    });
    events_until(&worker, |e| {
        matches!(e, Event::Finished { job: JobId(2), .. })
    });
}

#[test]
fn previews_are_latest_only() {
    let (worker, _, _) = fake_worker(2);
    worker.send(Command::Generate {
        job: JobId(7),
        request: request("a cat", 30),
        cancel: CancelToken::new(),
    });
    events_until(&worker, |e| matches!(e, Event::Finished { .. }));
    let preview = worker.take_preview().expect("a preview");
    assert_eq!(
        (preview.job, preview.step),
        (JobId(7), 30),
        "only the newest preview is kept"
    );
    assert!(
        worker.take_preview().is_none(),
        "a preview is handed out once"
    );
}

#[test]
fn shutdown_joins_promptly_even_mid_job() {
    // The app's exit: the window closes and drops its handle mid-job, with more queued;
    // nobody cancels the job's own token.
    let (worker, steps, _) = fake_worker(50);
    for id in 1..=3 {
        worker.send(Command::Generate {
            job: JobId(id),
            request: request("a cat", 1000),
            cancel: CancelToken::new(),
        });
    }
    events_until(&worker, |e| matches!(e, Event::Progress { .. }));
    let start = Instant::now();
    let before = steps.load(Ordering::SeqCst);
    drop(worker);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "dropping the handle waited {:?} for a 1000-step job",
        start.elapsed()
    );
    // At most the step under way finishes; a queued job starting would add more.
    let run = steps.load(Ordering::SeqCst);
    assert!(
        run <= before + 1,
        "{run} steps ran, {before} before the drop"
    );
}

#[test]
fn the_real_engine_through_the_worker_makes_the_engines_image() {
    let device = Device::flex();
    let options = LoadOptions {
        config_dir: None,
        ..LoadOptions::new(device.clone(), Precision::F32)
    };
    let model = load(&reference("sd15/pipeline"), &options).unwrap();
    let mut req = model.request("a lighthouse", 11);
    req.steps = 5;
    let direct = generate(&model, &req, &mut |_| ControlFlow::Continue(())).unwrap();
    drop(model);

    let worker = WorkerHandle::spawn(BurnEngine::new(device, Precision::F32), || {}).unwrap();
    worker.send(Command::LoadModel {
        path: reference("sd15/pipeline"),
        config_dir: None,
        role: ModelRole::Main,
        cancel: CancelToken::new(),
    });
    let events = events_until(&worker, |e| {
        matches!(e, Event::ModelLoaded { .. } | Event::ModelFailed { .. })
    });
    let Some(Event::ModelLoaded { summary, .. }) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(summary.family, "SD 1.x");
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::ModelLoading {
                step: 2,
                total: 4,
                ..
            }
        )),
        "loading reports its stages"
    );
    worker.send(Command::Generate {
        job: JobId(1),
        request: Box::new(req),
        cancel: CancelToken::new(),
    });
    let events = events_until(&worker, |e| {
        matches!(e, Event::Finished { .. } | Event::Failed { .. })
    });
    let Some(Event::Finished {
        images: results, ..
    }) = events.last()
    else {
        panic!("{events:?}")
    };
    assert_eq!(results[0].seed, 11);
    let parameters = &results[0].parameters;
    assert!(parameters.starts_with("a lighthouse\n"), "{parameters}");
    assert!(
        parameters.contains("Steps: 5,") && parameters.contains("Seed: 11,"),
        "{parameters}"
    );
    let images: Vec<_> = results.iter().map(|r| r.image.clone()).collect();
    assert_eq!(
        images, direct.images,
        "the worker makes the same image as the engine called directly"
    );
    let preview = worker.take_preview().expect("a live preview");
    assert_eq!(
        (preview.image.width, preview.image.height),
        (16, 16),
        "previews are at latent size"
    );
}

/// An upscale cancelled while it waited ends as cancelled without starting (the fake
/// engine has no upscalers: had it started, it would have failed saying so).
#[test]
fn an_upscale_cancelled_before_it_starts_ends_as_cancelled() {
    let (worker, _, _) = fake_worker(1);
    let cancel = CancelToken::new();
    cancel.cancel();
    let image = inference::imaging::ImageRgb8 {
        width: 8,
        height: 8,
        pixels: vec![0; 8 * 8 * 3],
    };
    worker.send(Command::Upscale {
        job: JobId(7),
        request: Box::new(inference::upscale::UpscaleRequest {
            image,
            model: "4x.pth".into(),
            options: Default::default(),
            source_parameters: None,
        }),
        cancel,
    });
    let events = events_until(&worker, |e| {
        matches!(e, Event::Cancelled { .. } | Event::Failed { .. })
    });
    assert!(
        matches!(events.last(), Some(Event::Cancelled { job: JobId(7) })),
        "{events:?}"
    );
}

/// A panic outside any job or load ends the worker, which says so as its last event.
#[test]
fn a_worker_that_fails_outside_a_job_says_it_stopped() {
    let engine = FakeEngine {
        panic_on_unload: true,
        ..FakeEngine::new(Duration::ZERO)
    };
    let worker = WorkerHandle::spawn(engine, || {}).unwrap();
    worker.send(Command::Unload(ModelRole::Refiner));
    let events = events_until(&worker, |e| matches!(e, Event::Stopped { .. }));
    assert!(
        matches!(events.last(), Some(Event::Stopped { error }) if error.contains("fails to unload")),
        "{events:?}"
    );
    worker.send(Command::Unload(ModelRole::Main));
    std::thread::sleep(Duration::from_millis(50));
    assert!(worker.try_event().is_none(), "nothing after it");
}

#[test]
fn loading_can_be_cancelled() {
    let worker =
        WorkerHandle::spawn(BurnEngine::new(Device::flex(), Precision::F32), || {}).unwrap();
    let cancel = CancelToken::new();
    cancel.cancel();
    worker.send(Command::LoadModel {
        path: reference("sd15/pipeline"),
        config_dir: None,
        role: ModelRole::Main,
        cancel,
    });
    let events = events_until(&worker, |e| {
        matches!(e, Event::ModelLoaded { .. } | Event::ModelFailed { .. })
    });
    assert!(
        matches!(events.last(), Some(Event::ModelFailed { error, .. }) if error.contains("cancelled")),
        "{events:?}"
    );
}

#[test]
fn a_long_job_is_announced_and_one_that_cannot_fit_is_refused_before_it_starts() {
    use inference::worker::Cost;
    let start = |cost: Result<Cost, String>| {
        let mut engine = FakeEngine::new(Duration::from_millis(1));
        engine.cost = Some(cost);
        let steps = engine.steps_run.clone();
        let worker = WorkerHandle::spawn(engine, || {}).unwrap();
        worker.send(Command::Generate {
            job: JobId(1),
            request: request("a cat", 3),
            cancel: CancelToken::new(),
        });
        let events = events_until(&worker, |e| {
            matches!(e, Event::Finished { .. } | Event::Failed { .. })
        });
        (events, steps.load(Ordering::SeqCst))
    };
    let long = Cost {
        working_bytes: 1 << 30,
        time: Some(Duration::from_secs(2 * 3600 + 300)),
    };
    let (events, steps) = start(Ok(long));
    let notice = events.iter().find_map(|e| match e {
        Event::Notice { message, .. } => Some(message.clone()),
        _ => None,
    });
    let notice = notice.expect("a long job is announced");
    assert!(
        notice.contains("2 h 5 min") && notice.contains("Cancel"),
        "{notice}"
    );
    assert_eq!(steps, 3, "an announced job still runs");

    let short = Cost {
        working_bytes: 1 << 20,
        time: Some(Duration::from_secs(20)),
    };
    let (events, _) = start(Ok(short));
    assert!(!events.iter().any(|e| matches!(e, Event::Notice { .. })));

    let (events, steps) = start(Err("needs about 90 GiB but only 8 GiB is free".into()));
    let error = events.iter().find_map(|e| match e {
        Event::Failed { error, .. } => Some(error.clone()),
        _ => None,
    });
    assert!(error.expect("refused").contains("90 GiB"));
    assert_eq!(steps, 0, "a refused job never starts a step");
}
