//! Compute devices (which exist, opening one) and the small conversions between host vectors
//! and tensors; the networks' float format is in `device/precision.rs`, Burn's GPU runtime
//! settings in `device/gpu_runtime.rs`.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

pub(crate) use crate::gpu_failure::{GpuWork, device_failure_while, innermost_cause};

use burn::tensor::{Device, Tensor, TensorData};

use crate::error::{Error, Result};

mod gpu_runtime;
mod precision;

pub use gpu_runtime::{
    GpuRuntime, configure_gpu_runtime, gpu_drivers_fingerprint, kernels_compiled,
};
#[cfg(feature = "cuda")]
pub(crate) use precision::note_stand_in_driver;
pub(crate) use precision::{CastParams, values_are_fake};
pub use precision::{Precision, all_finite, auto_precision, choose_precision};

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

#[cfg(test)]
mod tests {
    use super::DeviceKind;

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
}
