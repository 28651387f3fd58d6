//! The GPUs wgpu sees through Vulkan, Metal and DirectX 12, numbered as `ember devices`
//! lists them, and opening one by that number (`--device wgpu:N`) on a machine with several:
//! wgpu's default (`--device wgpu`) is only ever the one it ranks best.

use crate::device::{
    OpenedDevice, SharedWgpu, full_device_descriptor, kernel_language, shared_wgpu_device, wgpu,
};

/// The graphics APIs Ember computes through; OpenGL is left out (slow compute, and probing it
/// opens EGL, which complains where there is no display).
const APIS: wgpu::Backends = wgpu::Backends::VULKAN
    .union(wgpu::Backends::METAL)
    .union(wgpu::Backends::DX12);

fn instance() -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: APIS,
        flags: wgpu::InstanceFlags::from_build_config().with_env(),
        backend_options: wgpu::BackendOptions::from_env_or_default(),
        memory_budget_thresholds: wgpu::MemoryBudgetThresholds::default(),
        display: None,
    })
}

fn adapters(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    burn::cubecl::future::block_on(instance.enumerate_adapters(APIS))
}

/// Each adapter in order, as `"NVIDIA GeForce RTX 4090 (discrete GPU, Vulkan)"`.
pub fn list() -> Vec<String> {
    adapters(&instance()).iter().map(describe).collect()
}

fn describe(adapter: &wgpu::Adapter) -> String {
    let info = adapter.get_info();
    let kind = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => "discrete GPU",
        wgpu::DeviceType::IntegratedGpu => "integrated GPU",
        wgpu::DeviceType::VirtualGpu => "virtual GPU",
        wgpu::DeviceType::Cpu => "software renderer",
        wgpu::DeviceType::Other => "other",
    };
    format!("{} ({kind}, {:?})", info.name, info.backend)
}

/// Burn on adapter `number` of [`list`], on a device opened as for the window: on Vulkan
/// with the extensions Burn's SPIR-V kernels use where the adapter has them.
pub fn open(number: usize) -> Result<OpenedDevice, String> {
    let instance = instance();
    let mut adapters = adapters(&instance);
    if number >= adapters.len() {
        let seen: Vec<String> = adapters
            .iter()
            .enumerate()
            .map(|(n, adapter)| format!("wgpu:{n} {}", describe(adapter)))
            .collect();
        return Err(match seen.is_empty() {
            true => {
                format!("there is no wgpu:{number}: wgpu sees no GPU (Vulkan, Metal or DirectX 12)")
            }
            false => format!(
                "there is no wgpu:{number}: wgpu sees {}; `ember devices` lists them",
                seen.join(", ")
            ),
        });
    }
    let adapter = adapters.swap_remove(number);
    let described = describe(&adapter);
    let (device, queue) = request_device(&adapter)
        .map_err(|e| format!("wgpu:{number} ({described}) could not be opened: {e}"))?;
    let shared = SharedWgpu {
        instance,
        adapter,
        device,
        queue,
    };
    let info = shared.adapter.get_info();
    let memory = match crate::device::vulkan_device_memory(&shared.adapter) {
        Some(bytes) => format!(", {}", crate::memory::human_bytes(bytes)),
        None => String::new(),
    };
    let device = shared_wgpu_device(shared).map_err(|e| e.to_string())?;
    let language = kernel_language(&device).unwrap_or("no");
    Ok(OpenedDevice {
        device,
        gpu: true,
        description: format!(
            "{} ({:?}, {:?}{memory}, {language} kernels, wgpu:{number})",
            info.name, info.device_type, info.backend
        ),
    })
}

/// The adapter's device: on Vulkan, cubecl's with its SPIR-V kernels' extensions where the
/// adapter has them; elsewhere (or without them, for WGSL kernels) one with every feature and
/// limit the adapter has, as the window asks for.
fn request_device(adapter: &wgpu::Adapter) -> Result<(wgpu::Device, wgpu::Queue), String> {
    use burn::cubecl::future::block_on;
    #[cfg(feature = "spirv")]
    if adapter.get_info().backend == wgpu::Backend::Vulkan {
        use burn::cubecl::wgpu::vulkan::try_request_vulkan_device;
        match block_on(try_request_vulkan_device(adapter)) {
            Ok(Some(pair)) => return Ok(pair),
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    let descriptor = full_device_descriptor(adapter, "Ember engine device");
    block_on(adapter.request_device(&descriptor)).map_err(|e| e.to_string())
}
