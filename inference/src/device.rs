//! Compute devices and the small conversions between host vectors and tensors.

use burn::tensor::{Device, Tensor, TensorData};

use crate::error::{Error, Result};

/// Which backend runs the models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceKind {
    /// burn-flex on the CPU (always available).
    #[default]
    Cpu,
    /// burn-wgpu (feature `wgpu`).
    Wgpu,
    /// burn-cuda (feature `cuda`).
    Cuda,
}

impl DeviceKind {
    /// Parses `cpu`, `wgpu` or `cuda`.
    pub fn parse(name: &str) -> Result<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(DeviceKind::Cpu),
            "wgpu" | "gpu" => Ok(DeviceKind::Wgpu),
            "cuda" => Ok(DeviceKind::Cuda),
            other => Err(Error::settings(format!(
                "unknown device {other:?}; valid devices: cpu, wgpu, cuda"
            ))),
        }
    }

    /// The Burn device, or an error saying which build feature it needs.
    pub fn device(self) -> Result<Device> {
        match self {
            DeviceKind::Cpu => Ok(Device::flex()),
            DeviceKind::Wgpu => wgpu_device(),
            DeviceKind::Cuda => cuda_device(),
        }
    }
}

#[cfg(feature = "wgpu")]
fn wgpu_device() -> Result<Device> {
    Ok(Device::wgpu(burn::tensor::DeviceKind::DefaultDevice))
}

/// The wgpu crate Burn is built against; a window sharing its device must use the same one.
#[cfg(feature = "wgpu")]
pub use burn::tensor::wgpu::wgpu;

/// The handles of a wgpu device another component created (the window's), for Burn to run on
/// too: previews and images then never leave the GPU between the engine and the screen.
#[cfg(feature = "wgpu")]
pub struct SharedWgpu {
    pub instance: wgpu::Instance,
    pub adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
}

/// Registers `shared` with Burn's wgpu runtime.
///
/// The device must have been created with the adapter's features and limits (see the
/// app's `shared_device`); Burn does not check all of them.
#[cfg(feature = "wgpu")]
pub fn shared_wgpu_device(shared: SharedWgpu) -> Result<Device> {
    let backend = shared.adapter.get_info().backend;
    let setup = burn::tensor::wgpu::WgpuSetup {
        instance: shared.instance,
        adapter: shared.adapter,
        device: shared.device,
        queue: shared.queue,
        backend,
    };
    Device::wgpu_options().setup(setup).init().map_err(|e| {
        Error::Device(format!(
            "could not run Burn on the window's GPU device: {e}"
        ))
    })
}

#[cfg(not(feature = "wgpu"))]
fn wgpu_device() -> Result<Device> {
    Err(Error::Device(
        "this build has no wgpu backend; rebuild with `--features wgpu` or use --device cpu".into(),
    ))
}

#[cfg(feature = "cuda")]
fn cuda_device() -> Result<Device> {
    Ok(Device::cuda(0))
}

#[cfg(not(feature = "cuda"))]
fn cuda_device() -> Result<Device> {
    Err(Error::Device(
        "this build has no CUDA backend; rebuild with `--features cuda` or use --device cpu".into(),
    ))
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
        param.map(|t| t.cast(dtype))
    }
}
