//! Builds `tests/cuda_dry_run`'s stand-ins for NVIDIA's driver and NVRTC with the C compiler
//! Rust links with, so tests run Ember's CUDA path on a machine without an NVIDIA GPU (CI):
//! kernels compute nothing there, but memory, launches and failures behave as a driver's.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `tests/cuda_dry_run/<source>` into the shared library `dir/<library>`.
fn compile(source: &str, dir: &Path, library: &str) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("cuda_dry_run")
        .join(source);
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(dir.join(library))
        .arg(&source)
        .status()
        .expect("cc runs (Rust links with it)");
    assert!(status.success(), "{} builds", source.display());
}

/// The stand-in driver in `dir`, as `libcuda.so` (cudarc's first name, before a real
/// driver's `libcuda.so.1`) and `libcuda.so.1`.
pub fn build_driver(dir: &Path) {
    compile("fake_libcuda.c", dir, "libcuda.so");
    std::os::unix::fs::symlink("libcuda.so", dir.join("libcuda.so.1")).unwrap();
}

/// The stand-in NVRTC in `dir`, as `libnvrtc.so`.
pub fn build_nvrtc(dir: &Path) {
    compile("fake_libnvrtc.c", dir, "libnvrtc.so");
}

/// Empty files named as the CUDA headers Burn's kernels include, in `toolkit/include`
/// (`headers` relative to it): enough for Ember's check, and the stand-in NVRTC reads none.
pub fn write_headers(toolkit: &Path, headers: &[&str]) {
    for header in headers {
        let path = toolkit.join("include").join(header);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    }
}

/// Every header Ember checks for, as CUDA 13's pip wheels lay them out.
pub const ALL_HEADERS: &[&str] = &[
    "cuda_fp16.h",
    "cuda_bf16.h",
    "mma.h",
    "crt/mma.h",
    "cccl/cuda/barrier",
];

/// A whole stand-in CUDA installation (driver, NVRTC, headers) in a folder of its own.
pub struct StandIn {
    dir: tempfile::TempDir,
}

impl StandIn {
    pub fn build() -> Self {
        let dir = tempfile::tempdir().unwrap();
        build_driver(dir.path());
        build_nvrtc(dir.path());
        write_headers(&dir.path().join("toolkit"), ALL_HEADERS);
        Self { dir }
    }

    /// Where the driver's log goes (`FAKE_CUDA_LOG`).
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("driver.log")
    }

    /// Sets `command` to run on the stand-in, its kernel cache in the stand-in's folder
    /// (the stand-in NVRTC's kernels must not reach a real cache).
    pub fn apply<'a>(&self, command: &'a mut Command) -> &'a mut Command {
        let dir = self.dir.path();
        command
            .env("LD_LIBRARY_PATH", dir)
            .env("CUDA_PATH", dir.join("toolkit"))
            .env("EMBER_CUDA_DRY_RUN", "1")
            .env("EMBER_CACHE_DIR", dir.join("cache"))
            .env("FAKE_CUDA_LOG", self.log())
            .env_remove("FAKE_CUDA_MEMORY_MIB")
            .env_remove("FAKE_CUDA_LOSE_AFTER")
            .env_remove("FAKE_CUDA_PTXAS")
    }

    /// The last `exit of process` line of the driver's log: its launch count and peak
    /// memory in bytes.
    pub fn launches_and_peak(&self) -> (u64, u64) {
        let log = std::fs::read_to_string(self.log()).unwrap_or_default();
        let line = log
            .lines()
            .rfind(|l| l.starts_with("exit of process"))
            .unwrap_or_else(|| panic!("the stand-in driver logged no exit: {log}"));
        let number_before = |word: &str| -> u64 {
            let head = &line[..line.find(word).unwrap()];
            head.trim_end().rsplit(' ').next().unwrap().parse().unwrap()
        };
        (number_before(" launches"), number_before(" bytes"))
    }
}
