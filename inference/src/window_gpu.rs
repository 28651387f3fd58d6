//! Opens the Vulkan device a window shares with the engine, as Burn's SPIR-V kernels need it.
//!
//! On a Vulkan adapter Burn compiles its kernels to SPIR-V and relies on Vulkan features that
//! wgpu's own device creation never turns on (cooperative matrices for tensor cores, explicit
//! workgroup-memory layouts, 8- and 16-bit storage, ...): cubecl decides from the adapter that
//! they are there, so on a device made without them its kernels would be rejected or, worse,
//! run anyway. cubecl can open such a device itself; a window that shares its device with the
//! engine is handed that one instead of making its own. Other graphics APIs (Metal, DirectX 12)
//! run WGSL kernels on the window's ordinary device, as before.

use crate::device::{SharedWgpu, wgpu};

/// The best Vulkan adapter's device opened for Burn's SPIR-V kernels, for a window to present
/// with and the engine to compute on.
///
/// `Ok(None)`: there is no Vulkan adapter, or cubecl finds it lacks what SPIR-V kernels need
/// (Burn then compiles WGSL for it), so the window may make its own device. `Err`: the
/// adapter needs cubecl's device and opening it failed; the engine must not use the window's.
#[cfg(feature = "spirv")]
pub fn open_for_window(power: wgpu::PowerPreference) -> Result<Option<SharedWgpu>, String> {
    use burn::cubecl::future::block_on;
    use burn::cubecl::wgpu::vulkan::try_request_vulkan_device;
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: wgpu::Backends::VULKAN,
        flags: wgpu::InstanceFlags::from_build_config().with_env(),
        backend_options: wgpu::BackendOptions::from_env_or_default(),
        memory_budget_thresholds: wgpu::MemoryBudgetThresholds::default(),
        display: None,
    });
    let options = wgpu::RequestAdapterOptions {
        power_preference: power,
        ..Default::default()
    };
    let Ok(adapter) = block_on(instance.request_adapter(&options)) else {
        return Ok(None);
    };
    let name = adapter.get_info().name;
    match block_on(try_request_vulkan_device(&adapter)) {
        Ok(Some((device, queue))) => Ok(Some(SharedWgpu {
            instance,
            adapter,
            device,
            queue,
        })),
        Ok(None) => Ok(None),
        Err(e) => Err(format!(
            "could not open {name} for Burn's SPIR-V kernels: {e}"
        )),
    }
}

/// A WGSL-only build runs on any device the window makes.
#[cfg(not(feature = "spirv"))]
pub fn open_for_window(_power: wgpu::PowerPreference) -> Result<Option<SharedWgpu>, String> {
    Ok(None)
}
