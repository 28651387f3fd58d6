//! Compute devices and the small conversions between host vectors and tensors.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

pub(crate) use crate::gpu_failure::{GpuWork, device_failure_while, innermost_cause};

use burn::tensor::{Device, Tensor, TensorData};

use crate::error::{Error, Result};

/// Which backend runs the models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum DeviceKind {
    /// A real GPU through wgpu when this build has it and the machine has one, else the CPU.
    #[default]
    Auto,
    /// burn-flex on the CPU (always available).
    Cpu,
    /// burn-wgpu (feature `wgpu`) on wgpu's default adapter: the best GPU.
    Wgpu,
    /// burn-wgpu on the adapter of this number in `ember devices`' list (`wgpu:N`), where a
    /// machine has several GPUs.
    WgpuAdapter(usize),
    /// burn-cuda (feature `cuda`) on the GPU of this number in the driver's order (`cuda`
    /// is `cuda:0`).
    Cuda(usize),
}

impl DeviceKind {
    /// Parses `auto`, `cpu`, `wgpu`, `wgpu:N`, `cuda` or `cuda:N`.
    pub fn parse(name: &str) -> Result<Self> {
        let name = name.trim().to_ascii_lowercase();
        let unknown = || {
            Error::settings(format!(
                "unknown device {name:?}; valid devices: auto, cpu, wgpu, wgpu:N, cuda, cuda:N \
                 (`ember devices` lists the numbers)"
            ))
        };
        let (api, number) = match name.split_once(':') {
            Some((api, number)) => {
                let number = number.trim().parse::<usize>().map_err(|_| unknown())?;
                (api.trim(), Some(number))
            }
            None => (name.as_str(), None),
        };
        match (api, number) {
            ("auto", None) => Ok(DeviceKind::Auto),
            ("cpu", None) => Ok(DeviceKind::Cpu),
            ("wgpu" | "gpu", None) => Ok(DeviceKind::Wgpu),
            ("wgpu" | "gpu", Some(n)) => Ok(DeviceKind::WgpuAdapter(n)),
            ("cuda", n) => Ok(DeviceKind::Cuda(n.unwrap_or(0))),
            _ => Err(unknown()),
        }
    }

    /// The Burn device, or an error saying which build feature it needs.
    pub fn device(self) -> Result<Device> {
        self.open().map(|opened| opened.device)
    }

    /// The Burn device and what it is.
    pub fn open(self) -> Result<OpenedDevice> {
        let on = |device, gpu, description: &str| OpenedDevice {
            device,
            gpu,
            description: description.to_string(),
        };
        // Burn registers each GPU device once per process: open each once too.
        type Opened = std::result::Result<OpenedDevice, String>;
        static AUTO: OnceLock<OpenedDevice> = OnceLock::new();
        static WGPU: OnceLock<Opened> = OnceLock::new();
        static NUMBERED: Mutex<BTreeMap<DeviceKind, Opened>> = Mutex::new(BTreeMap::new());
        let numbered = |open: fn(usize) -> Opened, n| {
            let mut opened = NUMBERED.lock().unwrap_or_else(|e| e.into_inner());
            opened.entry(self).or_insert_with(|| open(n)).clone()
        };
        match self {
            DeviceKind::Auto => Ok(AUTO.get_or_init(auto_device).clone()),
            DeviceKind::Cpu => Ok(on(Device::flex(), false, "the CPU, as asked")),
            DeviceKind::Wgpu => WGPU.get_or_init(wgpu_device).clone(),
            DeviceKind::WgpuAdapter(n) => numbered(wgpu_adapter, n),
            DeviceKind::Cuda(n) => numbered(cuda_device, n),
        }
        .map_err(Error::Device)
    }
}

/// The name `--device` takes: `auto`, `cpu`, `wgpu`, `wgpu:N`, `cuda:N`.
impl std::fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceKind::Auto => f.write_str("auto"),
            DeviceKind::Cpu => f.write_str("cpu"),
            DeviceKind::Wgpu => f.write_str("wgpu"),
            DeviceKind::WgpuAdapter(n) => write!(f, "wgpu:{n}"),
            DeviceKind::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// One line of [`list_devices`]: a device `--device` can name, or a backend without one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceRow {
    /// `cpu`, `wgpu:0`, `cuda:1`; for a backend without devices, its name (`wgpu`, `cuda`).
    pub name: String,
    /// What it is ("NVIDIA GeForce RTX 4090 (Vulkan, discrete GPU)"), or why there is none.
    pub description: String,
    /// The device to ask for; `None` for a backend without devices.
    pub kind: Option<DeviceKind>,
}

impl DeviceRow {
    fn device(kind: DeviceKind, description: String) -> Self {
        Self {
            name: kind.to_string(),
            description,
            kind: Some(kind),
        }
    }

    fn none(backend: &str, why: String) -> Self {
        Self {
            name: backend.into(),
            description: why,
            kind: None,
        }
    }
}

/// Every device `--device` can name on this machine, for `ember devices` and the app's
/// Device menu; a backend that has none, or is not built in, as one row saying why.
pub fn list_devices() -> Vec<DeviceRow> {
    let mut rows = vec![DeviceRow::device(
        DeviceKind::Cpu,
        "the CPU (burn-flex)".into(),
    )];
    #[cfg(feature = "wgpu")]
    {
        let adapters = crate::wgpu_adapters::list();
        if adapters.is_empty() {
            rows.push(DeviceRow::none(
                "wgpu",
                "none: wgpu sees no GPU (Vulkan, Metal or DirectX 12); install a Vulkan driver"
                    .into(),
            ));
        }
        for (n, adapter) in adapters.into_iter().enumerate() {
            rows.push(DeviceRow::device(DeviceKind::WgpuAdapter(n), adapter));
        }
    }
    #[cfg(not(feature = "wgpu"))]
    rows.push(DeviceRow::none(
        "wgpu",
        "not in this build (rebuild with `--features wgpu`)".into(),
    ));
    #[cfg(feature = "cuda")]
    match crate::cuda_device::list() {
        Ok(gpus) => {
            for (n, gpu) in gpus.into_iter().enumerate() {
                rows.push(DeviceRow::device(DeviceKind::Cuda(n), gpu));
            }
        }
        Err(why) => rows.push(DeviceRow::none("cuda", format!("none: {why}"))),
    }
    #[cfg(not(feature = "cuda"))]
    rows.push(DeviceRow::none(
        "cuda",
        "not in this build (rebuild with `--features cuda`)".into(),
    ));
    rows
}

/// A device opened for the engine.
#[derive(Clone, Debug)]
pub struct OpenedDevice {
    pub device: Device,
    /// Whether it is a GPU (half precision pays off; memory is the device's own).
    pub gpu: bool,
    /// Which device it is and, for `auto`, why: "the CPU: no GPU adapter found".
    pub description: String,
}

/// A discrete, integrated or virtual GPU that wgpu finds (software renderers are slower than
/// the CPU backend), else the CPU with the reason.
#[cfg(feature = "wgpu")]
fn auto_device() -> OpenedDevice {
    use burn::tensor::DeviceKind as Kind;
    use burn::tensor::wgpu::WgpuBackend as Api;
    // Only the native APIs are asked: probing OpenGL opens EGL, which complains on stderr
    // where there is no display, and compute through it is slow anyway.
    for api in [Api::Vulkan, Api::Metal, Api::Dx12] {
        for kind in [
            Kind::DiscreteGpu(0),
            Kind::IntegratedGpu(0),
            Kind::VirtualGpu(0),
        ] {
            let options = Device::wgpu_options().graphics_api(api).device_kind(kind);
            if let Ok(opened) = open_wgpu(options) {
                return opened;
            }
        }
    }
    OpenedDevice {
        device: Device::flex(),
        gpu: false,
        description: "the CPU: wgpu found no GPU (Vulkan, Metal or DirectX 12); \
            --device wgpu runs on a software renderer if one is installed"
            .into(),
    }
}

#[cfg(feature = "wgpu")]
fn open_wgpu(
    options: burn::tensor::wgpu::WgpuOptions,
) -> std::result::Result<OpenedDevice, burn::tensor::wgpu::WgpuInitError> {
    let (device, setup) = options.init_with_setup()?;
    let info = setup.adapter.get_info();
    let memory = record_gpu_memory(&device, &setup.adapter);
    let language = kernel_language(&device).unwrap_or("no");
    Ok(OpenedDevice {
        device,
        gpu: true,
        description: format!(
            "{} ({:?}, {:?}{memory}, {language} kernels)",
            info.name, info.device_type, info.backend
        ),
    })
}

/// What Burn compiles its GPU kernels to on `device`, for people: "SPIR-V" on Vulkan (the
/// route to tensor cores), "WGSL" elsewhere; `None` on the CPU.
#[cfg(feature = "wgpu")]
pub fn kernel_language(device: &Device) -> Option<&'static str> {
    Some(match kernels::gpu::shader_language(device)? {
        "spirv" => "SPIR-V",
        "wgsl" => "WGSL",
        "msl" => "MSL",
        other => other,
    })
}

/// Without a GPU backend every device is the CPU.
#[cfg(not(feature = "wgpu"))]
pub fn kernel_language(_device: &Device) -> Option<&'static str> {
    None
}

#[cfg(not(feature = "wgpu"))]
fn auto_device() -> OpenedDevice {
    OpenedDevice {
        device: Device::flex(),
        gpu: false,
        description: "the CPU: this build has no GPU backend (build with `--features wgpu`)".into(),
    }
}

/// wgpu's default adapter: the best GPU, else a software renderer (Mesa's lavapipe).
#[cfg(feature = "wgpu")]
fn wgpu_device() -> std::result::Result<OpenedDevice, String> {
    open_wgpu(Device::wgpu_options()).map_err(|e| {
        format!(
            "wgpu found no adapter ({e}); install a Vulkan driver (on Debian without a GPU, \
             Mesa's software one: apt install mesa-vulkan-drivers) or use --device cpu"
        )
    })
}

#[cfg(feature = "wgpu")]
pub use crate::wgpu_adapters::{
    SharedWgpu, full_device_descriptor, record_gpu_memory, shared_wgpu_device,
};
/// The wgpu crate Burn is built against; a window sharing its device must use the same one.
#[cfg(feature = "wgpu")]
pub use burn::tensor::wgpu::wgpu;

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

#[cfg(not(feature = "wgpu"))]
fn wgpu_device() -> std::result::Result<OpenedDevice, String> {
    Err("this build has no wgpu backend; rebuild with `--features wgpu` or use --device cpu".into())
}

/// wgpu's adapter `n` in `ember devices`' order (see `wgpu_adapters`).
#[cfg(feature = "wgpu")]
fn wgpu_adapter(n: usize) -> std::result::Result<OpenedDevice, String> {
    crate::wgpu_adapters::open(n)
}

#[cfg(not(feature = "wgpu"))]
fn wgpu_adapter(_n: usize) -> std::result::Result<OpenedDevice, String> {
    wgpu_device()
}

/// Burn's CUDA device `n`, checked first (see `cuda_device`).
#[cfg(feature = "cuda")]
fn cuda_device(n: usize) -> std::result::Result<OpenedDevice, String> {
    crate::cuda_device::open(n)
}

#[cfg(not(feature = "cuda"))]
fn cuda_device(_n: usize) -> std::result::Result<OpenedDevice, String> {
    Err("this build has no CUDA backend; rebuild with `--features cuda` or use --device cpu".into())
}

/// The float format the networks compute in. Sampler maths always stays in f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Precision {
    #[default]
    F32,
    F16,
    Bf16,
}

impl Precision {
    /// Parses `f32`, `f16` or `bf16`.
    pub fn parse(name: &str) -> Result<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "f32" | "fp32" => Ok(Precision::F32),
            "f16" | "fp16" => Ok(Precision::F16),
            "bf16" => Ok(Precision::Bf16),
            other => Err(Error::settings(format!(
                "unknown precision {other:?}; valid: f32, f16, bf16"
            ))),
        }
    }

    /// Bytes per weight.
    pub fn bytes(self) -> usize {
        match self {
            Precision::F32 => 4,
            Precision::F16 | Precision::Bf16 => 2,
        }
    }

    /// The Burn dtype.
    pub fn dtype(self) -> burn::tensor::DType {
        match self {
            Precision::F32 => burn::tensor::DType::F32,
            Precision::F16 => burn::tensor::DType::F16,
            Precision::Bf16 => burn::tensor::DType::BF16,
        }
    }
}

/// `--precision`: `auto` is [`auto_precision`]; `f16` / `bf16` must be supported by the
/// device. Returns the networks' precision and whether the VAE stays in f32.
pub fn choose_precision(name: &str, opened: &OpenedDevice) -> Result<(Precision, bool)> {
    let supports = |p: Precision| opened.device.supports_dtype(p.dtype());
    if name.trim().eq_ignore_ascii_case("auto") {
        return Ok(auto_precision(opened.gpu, supports));
    }
    let precision = Precision::parse(name).map_err(|_| {
        Error::settings(format!(
            "unknown precision {name:?}; valid: auto, f32, f16, bf16"
        ))
    })?;
    if !supports(precision) {
        return Err(Error::settings(format!(
            "{} cannot compute in {precision}; use --precision f32 (or auto)",
            opened.description
        )));
    }
    Ok((precision, false))
}

/// `--precision auto` on a device that computes in what `supports` accepts: on a GPU, f16
/// with an f32 VAE ([`crate::weights::LoadOptions::vae_upcast`]; diffusers' and A1111's
/// rule), else bf16 with an f32 VAE (half the memory and, on matrix units, the speed of f16,
/// with f32's range), else f32; always f32 on the CPU, which computes half precision
/// through f32 anyway. f16 comes first where both are offered: its 10-bit mantissa keeps
/// the image closer to f32's than bf16's 7, and a step that overflows runs again in f32.
pub fn auto_precision(gpu: bool, supports: impl Fn(Precision) -> bool) -> (Precision, bool) {
    match [Precision::F16, Precision::Bf16]
        .into_iter()
        .find(|&p| supports(p))
    {
        Some(half) if gpu => (half, true),
        _ => (Precision::F32, false),
    }
}

impl std::fmt::Display for Precision {
    /// The flag's spelling: `f32`, `f16`, `bf16`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
            Precision::Bf16 => "bf16",
        })
    }
}

/// Whether every value of `t` is finite, or the device's error when the work that made `t`
/// failed (a GPU out of memory; Burn reports it at the next read).
pub fn all_finite<const D: usize>(t: &Tensor<D>) -> Result<bool> {
    let finite = t
        .clone()
        .is_finite()
        .all()
        .try_into_scalar::<bool>()
        .map_err(|e| crate::gpu_failure::device_failure(&e.to_string()))?;
    Ok(finite || values_are_fake())
}

/// Whether this process runs on `tests/cuda_dry_run`'s stand-in for NVIDIA's driver, whose
/// kernels compute nothing: the values read back mean nothing, so checks of them pass. The
/// work is still launched, which is what gets every kernel compiled there.
pub(crate) fn values_are_fake() -> bool {
    STAND_IN_DRIVER.load(std::sync::atomic::Ordering::Relaxed)
}

static STAND_IN_DRIVER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Records that the CUDA driver is the dry run's stand-in: both its GPU name says so and
/// `EMBER_CUDA_DRY_RUN` is set, so neither alone turns Ember's value checks off.
#[cfg(feature = "cuda")]
pub(crate) fn note_stand_in_driver(gpu_name: &str) {
    let stand_in = gpu_name.starts_with("Fake CUDA device")
        && std::env::var_os("EMBER_CUDA_DRY_RUN").is_some();
    if stand_in {
        STAND_IN_DRIVER.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A float32 tensor from host data.
pub fn tensor_from_vec<const D: usize>(
    data: Vec<f32>,
    shape: [usize; D],
    device: &Device,
) -> Tensor<D> {
    Tensor::from_data(TensorData::new(data, shape), device)
}

/// A tensor's values as host float32 (converting from its dtype).
pub fn tensor_to_vec<const D: usize>(tensor: Tensor<D>) -> Vec<f32> {
    tensor
        .into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .expect("float tensor data converts to f32")
}

/// Casts every float parameter of a module it maps to one dtype (random initialisation
/// happens in f32; a half-precision VAE that overflowed runs again in f32).
pub(crate) struct CastParams(pub burn::tensor::DType);

impl burn::module::ModuleMapper for CastParams {
    fn map_float<const D: usize>(
        &mut self,
        param: burn::module::Param<burn::tensor::Tensor<D>>,
    ) -> burn::module::Param<burn::tensor::Tensor<D>> {
        let dtype = self.0;
        // The cast's output is a new allocation, padded on CUDA like any other.
        param.map(|t| crate::weight_layout::unpad(t.cast(dtype)))
    }
}

#[cfg(test)]
mod tests {
    use super::{DeviceKind, Precision, auto_precision};

    /// Every name `--device` takes, a GPU's number among them, reads back as written; other
    /// names are one error listing the valid ones.
    #[test]
    fn device_names_parse_with_a_gpus_number() {
        let cases = [
            ("auto", DeviceKind::Auto, "auto"),
            (" CPU ", DeviceKind::Cpu, "cpu"),
            ("gpu", DeviceKind::Wgpu, "wgpu"),
            ("wgpu:1", DeviceKind::WgpuAdapter(1), "wgpu:1"),
            ("cuda", DeviceKind::Cuda(0), "cuda:0"),
            ("CUDA:3", DeviceKind::Cuda(3), "cuda:3"),
        ];
        for (name, kind, written) in cases {
            assert_eq!(DeviceKind::parse(name).unwrap(), kind, "{name}");
            assert_eq!(kind.to_string(), written);
        }
        for bad in ["cuda:", "wgpu:-1", "cpu:0", "auto:1", "metal", "cuda:one"] {
            let error = DeviceKind::parse(bad).unwrap_err().to_string();
            assert!(
                error.contains("valid devices: auto, cpu, wgpu, wgpu:N"),
                "{bad}: {error}"
            );
        }
    }

    /// A GPU takes f16 where it can, bf16 where only that, else f32; the CPU always f32.
    #[test]
    fn auto_precision_prefers_f16_then_bf16_on_a_gpu() {
        let only = |offered: &'static [Precision]| move |p| offered.contains(&p);
        let both = only(&[Precision::F16, Precision::Bf16]);
        assert_eq!(auto_precision(true, both), (Precision::F16, true));
        assert_eq!(
            auto_precision(true, only(&[Precision::Bf16])),
            (Precision::Bf16, true)
        );
        assert_eq!(auto_precision(true, only(&[])), (Precision::F32, false));
        assert_eq!(auto_precision(false, both), (Precision::F32, false));
    }
}
