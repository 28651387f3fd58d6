//! wgpu devices Burn runs on beyond wgpu's default: the GPUs wgpu sees through Vulkan, Metal
//! and DirectX 12, numbered as `ember devices` lists them, and opening one by that number
//! (`--device wgpu:N`) on a machine with several (wgpu's default, `--device wgpu`, is only ever
//! the one it ranks best); registering a device another component made (the window's) with
//! Burn; and the memory a Vulkan adapter has.

use burn::tensor::Device;

use crate::device::{OpenedDevice, kernel_language, wgpu};
use crate::error::{Error, Result};

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

/// Each adapter in order, with everything that decides which kernels it can run: name,
/// vendor and device ids, driver, driver version and API.
pub fn identities() -> Vec<String> {
    let identity = |adapter: &wgpu::Adapter| {
        let info = adapter.get_info();
        format!(
            "{}|{:x}|{:x}|{}|{}|{:?}",
            info.name, info.vendor, info.device, info.driver, info.driver_info, info.backend
        )
    };
    adapters(&instance()).iter().map(identity).collect()
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
pub fn open(number: usize) -> std::result::Result<OpenedDevice, String> {
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
    let adapter = shared.adapter.clone();
    let device = shared_wgpu_device(shared).map_err(|e| e.to_string())?;
    let memory = record_gpu_memory(&device, &adapter);
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
fn request_device(
    adapter: &wgpu::Adapter,
) -> std::result::Result<(wgpu::Device, wgpu::Queue), String> {
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

/// Records the memory of the GPU `device` runs on (see [`crate::memory::available_on`]);
/// returns it as `", 7.8 GiB"` for a description, empty where the driver does not say.
pub fn record_gpu_memory(device: &Device, adapter: &wgpu::Adapter) -> String {
    match vulkan_device_memory(adapter) {
        Some(bytes) => {
            crate::memory::set_gpu_memory_bytes(device, bytes);
            format!(", {}", crate::memory::human_bytes(bytes))
        }
        None => String::new(),
    }
}

/// The largest device-local memory heap of a Vulkan adapter, in bytes: the card's own
/// memory (on an integrated GPU, the share of the computer's the driver gives it). `None`
/// on other APIs; wgpu's safe API does not tell (cubecl reads it the same way, only in its
/// SPIR-V build).
#[allow(unsafe_code)]
fn vulkan_device_memory(adapter: &wgpu::Adapter) -> Option<u64> {
    // VK_MEMORY_HEAP_DEVICE_LOCAL_BIT.
    const DEVICE_LOCAL: u32 = 1;
    // SAFETY: `as_hal` borrows the adapter's Vulkan handles while `adapter` is alive, and
    // vkGetPhysicalDeviceMemoryProperties only reads properties of that physical device
    // through the instance that owns it; no handle is kept.
    unsafe {
        let vulkan = adapter.as_hal::<wgpu::hal::api::Vulkan>()?;
        let properties = vulkan
            .shared_instance()
            .raw_instance()
            .get_physical_device_memory_properties(vulkan.raw_physical_device());
        let heaps = &properties.memory_heaps[..properties.memory_heap_count as usize];
        heaps
            .iter()
            .filter(|heap| heap.flags.as_raw() & DEVICE_LOCAL != 0)
            .map(|heap| heap.size)
            .max()
    }
}

/// A descriptor asking for every feature and limit `adapter` has (wgpu's defaults are too
/// little for Burn's kernels), less mappable primary buffers, which are slow on discrete GPUs
/// and which Burn does not need.
pub fn full_device_descriptor(
    adapter: &wgpu::Adapter,
    label: &'static str,
) -> wgpu::DeviceDescriptor<'static> {
    wgpu::DeviceDescriptor {
        label: Some(label),
        required_features: adapter
            .features()
            .difference(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS),
        required_limits: adapter.limits(),
        ..Default::default()
    }
}

/// The handles of a wgpu device another component created (the window's), for Burn to run on
/// too: previews and images then never leave the GPU between the engine and the screen.
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
pub fn shared_wgpu_device(shared: SharedWgpu) -> Result<Device> {
    let info = shared.adapter.get_info();
    let adapter = shared.adapter.clone();
    let setup = burn::tensor::wgpu::WgpuSetup {
        instance: shared.instance,
        adapter: shared.adapter,
        device: shared.device,
        queue: shared.queue,
        backend: info.backend,
    };
    let device = Device::wgpu_options()
        .setup(setup)
        .init()
        .map_err(|e| Error::Device(format!("could not run Burn on {}: {e}", info.name)))?;
    record_gpu_memory(&device, &adapter);
    Ok(device)
}
