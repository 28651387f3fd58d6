//! Burn's GPU runtime settings: where its autotune answers and compiled kernels are kept
//! (per GPU driver), and its compilation and tuning logs for benchmarks.

/// Where Burn's GPU runtime keeps what it learns about this machine, set once per process
/// before the first GPU device opens.
#[derive(Clone, Debug, Default)]
pub struct GpuRuntime {
    /// Burn's autotune results (which kernel is fastest for each operation and shape on this
    /// adapter) are kept here across runs, so only the first start pays for tuning.
    /// `None`: cubecl's own default place.
    pub cache_dir: Option<std::path::PathBuf>,
    /// The name of the kept answers within that folder: [`gpu_drivers_fingerprint`], so that
    /// another driver (an update that adds or takes away matrix units, another card) starts
    /// afresh instead of reading answers that name kernels it cannot launch (Burn panics on
    /// those). `None`, or `CUBECL_ENVIRONMENT` set: cubecl's name.
    pub drivers: Option<String>,
    /// For benchmarks: write each tuning decision made in this process to this file as a
    /// JSON line (see [`crate::bench::attention_choices`]).
    pub tuning_log: Option<std::path::PathBuf>,
    /// Tune every shape again in this process: stored answers are neither read nor
    /// replaced, so a benchmark measures (and logs) what this build picks now.
    pub retune: bool,
    /// For benchmarks: a line in this file for each kernel compiled in this process (one
    /// found among the kept compiled kernels is not compiled; see [`kernels_compiled`]).
    pub compile_log: Option<std::path::PathBuf>,
}

/// How many kernels a process compiled, from its [`GpuRuntime::compile_log`]; 0 where there
/// is no log.
pub fn kernels_compiled(log: &std::path::Path) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    // cubecl's basic compilation log: one "[Compiling kernel] name" line a kernel.
    text.lines()
        .filter(|line| line.starts_with("[Compiling kernel]"))
        .count()
}

/// Applies `settings` to Burn's GPU runtime; returns whether it took effect (the runtime
/// reads its settings once, when the first GPU device opens). A `cubecl.toml` in the
/// working folder and `CUBECL_*` variables still apply; only the folder is Ember's.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub fn configure_gpu_runtime(settings: &GpuRuntime) -> bool {
    use burn::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig, cache::CacheConfig};
    let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
    if let Some(dir) = &settings.cache_dir {
        config.environment.path = CacheConfig::Directory(dir.clone());
    }
    if let Some(drivers) = &settings.drivers
        && std::env::var_os("CUBECL_ENVIRONMENT").is_none()
    {
        config.environment.name = drivers.clone();
    }
    if let Some(log) = &settings.tuning_log {
        config.autotune.decisions.file = Some(log.clone());
        config.autotune.decisions.append = false;
    }
    config.autotune.disable_cache |= settings.retune;
    if let Some(log) = &settings.compile_log {
        use burn::cubecl::config::compilation::CompilationLogLevel;
        config.compilation.logger.file = Some(log.clone());
        config.compilation.logger.append = false;
        config.compilation.logger.level = CompilationLogLevel::Basic;
    }
    // Keep the compiled SPIR-V (and CUDA's PTX) too, keyed by this executable's build id so a
    // rebuild never reads another build's, not only the autotune answers: a second launch
    // then skips cubecl's compiler (and NVRTC). WGSL is compiled by the driver each run;
    // nothing is kept there.
    config.compilation.cache = true;
    CubeClRuntimeConfig::try_set(config)
}

/// A name for this machine's GPU drivers: `drivers-` and a hash of each wgpu adapter's name,
/// vendor and device ids, driver and driver version, and API. Burn's autotune keys its
/// answers by the adapter's ids alone, which stay the same across a driver update.
#[cfg(feature = "wgpu")]
pub fn gpu_drivers_fingerprint() -> String {
    let adapters = crate::wgpu_adapters::identities().join("\n");
    format!(
        "drivers-{}",
        &crate::hashing::sha256_bytes(adapters.as_bytes())[..16]
    )
}

/// Without wgpu there are no adapters to name; CUDA's answers keep cubecl's name.
#[cfg(not(feature = "wgpu"))]
pub fn gpu_drivers_fingerprint() -> String {
    "default".into()
}

/// Without a GPU backend there is nothing to configure.
#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
pub fn configure_gpu_runtime(_settings: &GpuRuntime) -> bool {
    false
}
