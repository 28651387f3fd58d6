//! `--device cuda` on a machine whose NVIDIA driver is there but not the rest Burn's CUDA
//! backend needs, and a GPU that runs out of memory or is lost while loading or generating:
//! the stand-ins of `tests/cuda_dry_run` play the driver and NVRTC.

use std::path::Path;
use std::process::Command;

use ember_tests::cuda_stand_in::{self, StandIn};

/// `ember generate --device cuda` with the driver (and maybe NVRTC) in `libraries` and
/// `toolkit` as CUDA_PATH: its stderr, after checking it failed without an image.
fn generate_on_cuda(libraries: &Path, toolkit: &Path) -> String {
    let out = libraries.join("cuda.png");
    let output = crate::device::generate_on_cuda(libraries, &out)
        .env("LD_LIBRARY_PATH", libraries)
        .env("CUDA_PATH", toolkit)
        .env_remove("EMBER_CUDA_DRY_RUN")
        .output()
        .unwrap();
    assert!(!output.status.success() && !out.exists());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A driver but no NVRTC, or NVRTC but headers such as PyTorch's CUDA 13 wheels have
/// (without `crt/mma.h` and CCCL, which Burn's tensor-core and Hopper kernels include):
/// each is one line naming what is missing, before any kernel is compiled.
#[test]
fn a_driver_without_nvrtc_or_all_headers_is_one_line() {
    let libraries = tempfile::tempdir().unwrap();
    let toolkit = tempfile::tempdir().unwrap();
    cuda_stand_in::build_driver(libraries.path());
    cuda_stand_in::write_headers(toolkit.path(), &["cuda_fp16.h", "cuda_bf16.h", "mma.h"]);
    let include = toolkit.path().join("include");

    let stderr = generate_on_cuda(libraries.path(), toolkit.path());
    if stderr.contains("this build has no CUDA backend") {
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        return;
    }
    let nvrtc_missing =
        "error: device: NVRTC (libnvrtc, part of the CUDA Toolkit) could not be loaded";
    let headers_missing = format!(
        "error: device: the CUDA headers in {} lack crt/mma.h, cuda/barrier (CCCL), which \
         Burn's kernels include",
        include.display()
    );
    // Without NVRTC on this machine (CI) the first; with it, the headers are next.
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(nvrtc_missing) || stderr.starts_with(&headers_missing),
        "{stderr}"
    );
    assert!(
        stderr.trim_end().ends_with("; or use --device wgpu or cpu"),
        "{stderr}"
    );

    // An NVRTC that loads (an empty library is enough for the check) leaves the headers.
    let stub = libraries.path().join("stub.c");
    std::fs::write(&stub, "int ember_nvrtc_stand_in;\n").unwrap();
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(libraries.path().join("libnvrtc.so"))
        .arg(&stub)
        .status()
        .unwrap();
    assert!(status.success());
    let stderr = generate_on_cuda(libraries.path(), toolkit.path());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with(&headers_missing), "{stderr}");
    assert!(
        stderr.contains("nvidia-cuda-crt and nvidia-cuda-cccl"),
        "{stderr}"
    );
}

/// `steps` steps of the SD 1.x reference on the stand-in CUDA installation, with `env` set:
/// whether it succeeded, and its stderr.
fn generate_on_stand_in(stand_in: &StandIn, steps: usize, env: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cuda.png");
    let mut command = crate::device::generate_steps_on_cuda(dir.path(), &out, steps);
    stand_in.apply(&mut command).envs(env.iter().copied());
    let output = command.output().unwrap();
    let ok = output.status.success();
    assert_eq!(ok, out.exists(), "an image exactly when it succeeds");
    (ok, String::from_utf8_lossy(&output.stderr).into_owned())
}

/// The line Ember printed for a failure (the stand-in's kernels compute nothing, so cubecl's
/// throughput probes print panics it catches; they are not Ember's).
fn error_line(stderr: &str) -> &str {
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(!stderr.contains("panicked at inference"), "{stderr}");
    assert!(!stderr.contains("panicked at app"), "{stderr}");
    errors[0]
}

/// A GPU lost while loading the model, or while generating (as after an Xid error or a
/// kernel's fault: CUDA's "unspecified launch failure", which it makes sticky), fails in one
/// line that says so and what to do, never a panic, and saves nothing. A GPU that runs out
/// of memory (a card half the size the generation needs, with Ember's check before the job
/// told the card is large, as when another program takes the memory meanwhile) likewise.
#[test]
fn a_gpu_lost_or_out_of_memory_mid_job_is_one_line_and_saves_nothing() {
    let stand_in = StandIn::build();
    // The first run tunes Burn's kernels (launching each candidate); later ones read its
    // answers from the cache.
    let (ok, stderr) = generate_on_stand_in(&stand_in, 2, &[]);
    assert!(ok, "on the stand-in with its memory free: {stderr}");
    let (ok, stderr) = generate_on_stand_in(&stand_in, 1, &[]);
    assert!(ok, "{stderr}");
    let (one_step, _) = stand_in.launches_and_peak();
    let (ok, stderr) = generate_on_stand_in(&stand_in, 2, &[]);
    assert!(ok, "{stderr}");
    let (two_steps, peak) = stand_in.launches_and_peak();
    assert!(two_steps > one_step);

    // A model's loading checks every weight (a launch or more each), after the first
    // operation's few. Two steps launch one step's work more than one step: the launches
    // of the one-step run end within the two-step run's generation, before its image.
    let lost = [
        ("10", "loading the model"),
        (&*one_step.to_string(), "generating"),
    ];
    for (after, doing) in lost {
        let (ok, stderr) = generate_on_stand_in(&stand_in, 2, &[("FAKE_CUDA_LOSE_AFTER", after)]);
        assert!(!ok, "lost after {after} launches: {stderr}");
        let line = error_line(&stderr);
        let expected = format!("error: device: the GPU stopped working while {doing} (");
        assert!(line.starts_with(&expected), "lost after {after}: {line}");
        assert!(line.contains("unspecified launch failure"), "{line}");
        assert!(line.contains("Restart Ember"), "{line}");
        assert!(line.trim_end().ends_with("or use --device cpu"), "{line}");
    }

    let half = (peak >> 20) / 2;
    let env = [
        ("FAKE_CUDA_MEMORY_MIB", &*half.to_string()),
        ("EMBER_GPU_MEMORY", "64G"),
    ];
    let (ok, stderr) = generate_on_stand_in(&stand_in, 2, &env);
    assert!(!ok, "{stderr}");
    let line = error_line(&stderr);
    assert!(
        line.starts_with("error: device: the GPU failed while "),
        "{line}"
    );
    assert!(
        line.contains("allocat"),
        "names the allocation that failed: {line}"
    );
    assert!(line.trim_end().ends_with("--device cpu"), "{line}");
}
