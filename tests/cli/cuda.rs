//! `--device cuda` on a machine whose NVIDIA driver is there but not the rest Burn's CUDA
//! backend needs: the stand-in driver of `tests/cuda_dry_run` plays the driver.

use std::path::Path;
use std::process::Command;

/// Builds the stand-in for NVIDIA's driver into `dir` with the C compiler Rust links with,
/// as `libcuda.so` (cudarc's first name, before a real driver's `libcuda.so.1`) and
/// `libcuda.so.1`.
fn build_stand_in_driver(dir: &Path) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/cuda_dry_run/fake_libcuda.c");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(dir.join("libcuda.so"))
        .arg(&source)
        .status()
        .expect("cc runs (Rust links with it)");
    assert!(status.success(), "the stand-in driver builds");
    std::os::unix::fs::symlink("libcuda.so", dir.join("libcuda.so.1")).unwrap();
}

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
    build_stand_in_driver(libraries.path());
    let include = toolkit.path().join("include");
    std::fs::create_dir_all(&include).unwrap();
    for header in ["cuda_fp16.h", "cuda_bf16.h", "mma.h"] {
        std::fs::write(include.join(header), "").unwrap();
    }

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
