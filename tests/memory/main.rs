//! Switching models frees the old one: the worker loads the reference model ten times,
//! alternating its two layouts, and the process's resident memory must not grow with the
//! number of switches.
//!
//! A test binary of its own with a plain `main` (no libtest harness): the resident size
//! is a property of the whole process, so no other test may run beside it.

use std::time::{Duration, Instant};

use burn::tensor::Device;
use ember_tests::reference;
use inference::device::Precision;
use inference::worker::{BurnEngine, CancelToken, Command, Event, ModelRole, WorkerHandle};

const SWITCHES: usize = 10;

/// Resident set size in bytes, from `/proc/self/statm` (Linux; CI runs on Linux).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("reading /proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("statm's second field is the resident page count");
    pages * 4096
}

fn load(worker: &WorkerHandle, model: &str) {
    // The tiny single file is not a standard size: its configs come from the folder.
    let config_dir = model
        .ends_with(".safetensors")
        .then(|| reference("sd15/pipeline"));
    worker.send(Command::LoadModel {
        path: reference(model),
        config_dir,
        role: ModelRole::Main,
        cancel: CancelToken::new(),
    });
    let start = Instant::now();
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "loading {model} timed out"
        );
        match worker.try_event() {
            Some(Event::ModelLoaded { .. }) => return,
            Some(Event::ModelFailed { error, .. }) => panic!("loading {model}: {error}"),
            Some(_) => {}
            None => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn main() {
    let models = ["sd15/pipeline", "sd15/checkpoint.safetensors"];
    let worker =
        WorkerHandle::spawn(BurnEngine::new(Device::flex(), Precision::F32), || {}).unwrap();
    let before = resident_bytes();
    load(&worker, models[0]);
    let one_model = resident_bytes().saturating_sub(before);
    // The allocator settles after the first switch (both layouts' readers have run once).
    load(&worker, models[1]);
    let settled = resident_bytes();
    let mut history = vec![settled];
    for i in 2..SWITCHES {
        load(&worker, models[i % 2]);
        history.push(resident_bytes());
    }
    let growth = history.last().unwrap().saturating_sub(settled);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "one model: {:.1} MiB resident; after {SWITCHES} loads: {:.1} MiB growth since the \
         second ({:?} MiB)",
        mib(one_model),
        mib(growth),
        history.iter().map(|&b| mib(b).round()).collect::<Vec<_>>()
    );
    // A model kept alive by every switch would add `one_model` per switch (8 here); allow
    // less than two models' worth of allocator noise over eight switches.
    assert!(
        growth < 2 * one_model,
        "resident memory grew by {:.1} MiB over {} switches (one model is {:.1} MiB): the old \
         model is not freed",
        mib(growth),
        SWITCHES - 2,
        mib(one_model)
    );
    worker.send(Command::Shutdown);
    drop(worker);
    println!("ok: ten model switches do not grow memory");
}
