//! A load that fails never costs the working model: a garbage file (refused from its
//! headers) and a checkpoint missing a tensor (refused while loading) both leave the loaded
//! model in place, whether the engine holds both models while loading or frees the old one
//! first and loads it again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use burn::tensor::Device;
use ember_tests::reference;
use inference::api::GenerateRequest;
use inference::device::Precision;
use inference::worker::{BurnEngine, CancelToken, Command, Event, JobId, ModelRole, WorkerHandle};

/// Waits for the load's outcome (the tiny reference checkpoint needs its folder's configs).
fn load(worker: &WorkerHandle, path: &Path) -> Event {
    worker.send(Command::LoadModel {
        path: path.to_path_buf(),
        config_dir: path.is_file().then(|| reference("sd15/pipeline")),
        role: ModelRole::Main,
        cancel: CancelToken::new(),
    });
    until(worker, |e| {
        matches!(e, Event::ModelLoaded { .. } | Event::ModelFailed { .. })
    })
}

fn until(worker: &WorkerHandle, done: impl Fn(&Event) -> bool) -> Event {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        match worker.try_event() {
            Some(e) if done(&e) => return e,
            Some(_) => {}
            None => std::thread::sleep(Duration::from_millis(2)),
        }
    }
    panic!("timed out");
}

/// The reference checkpoint less its first UNet tensor: its headers say SD 1.x, loading it
/// fails.
fn checkpoint_missing_a_tensor(dir: &Path) -> (PathBuf, String) {
    let bytes = std::fs::read(reference("sd15/checkpoint.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors = file.tensors();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let dropped = tensors
        .iter()
        .position(|(name, _)| name.starts_with("model.diffusion_model."))
        .expect("the checkpoint has UNet tensors");
    let (name, _) = tensors.remove(dropped);
    let path = dir.join("missing.safetensors");
    std::fs::write(&path, safetensors::serialize(tensors, None).unwrap()).unwrap();
    (path, name)
}

#[test]
fn a_failed_load_keeps_the_working_model() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.safetensors");
    std::fs::write(&garbage, b"this is not a checkpoint at all").unwrap();
    let (missing, missing_name) = checkpoint_missing_a_tensor(dir.path());
    let engines = [
        ("beside", BurnEngine::new(Device::flex(), Precision::F32)),
        (
            "one at a time",
            BurnEngine::new(Device::flex(), Precision::F32).one_model_at_a_time(),
        ),
    ];
    for (how, engine) in engines {
        let worker = WorkerHandle::spawn(engine, || {}).unwrap();
        let Event::ModelLoaded { summary, .. } = load(&worker, &reference("sd15/pipeline")) else {
            panic!("{how}: the reference model loads");
        };
        for (bad, expected) in [(&garbage, "garbage"), (&missing, missing_name.as_str())] {
            let Event::ModelFailed { error, kept, .. } = load(&worker, bad) else {
                panic!("{how}: {} must fail", bad.display());
            };
            assert!(error.contains(expected), "{how}: {error}");
            let kept = kept.unwrap_or_else(|| panic!("{how}: {error} lost the model"));
            assert_eq!(kept.path, summary.path, "{how}");
        }
        worker.send(Command::Generate {
            job: JobId(1),
            request: Box::new(GenerateRequest {
                prompt: "a lighthouse".into(),
                steps: 2,
                width: 64,
                height: 64,
                ..GenerateRequest::default()
            }),
            cancel: CancelToken::new(),
        });
        let outcome = until(&worker, |e| {
            matches!(e, Event::Finished { .. } | Event::Failed { .. })
        });
        assert!(
            matches!(outcome, Event::Finished { .. }),
            "{how}: the kept model still generates: {outcome:?}"
        );
    }
}
