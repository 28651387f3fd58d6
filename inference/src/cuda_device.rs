//! Opening a CUDA device: checks first what Burn's CUDA backend needs at run time.
//!
//! Burn (through cubecl-cuda and cudarc) loads the NVIDIA driver and NVRTC lazily, on the
//! first operation, and panics on the engine thread where either is missing; its kernels are
//! CUDA C++ that NVRTC compiles against the CUDA Toolkit's headers (Ember builds cubecl-cuda
//! without its LLVM backend, see `vendor/README.md`). Each missing piece is one clear error
//! here instead, naming what to install.

use burn::tensor::Device;

use crate::device::OpenedDevice;
use crate::error::{Error, Result};

/// The first CUDA GPU, once the driver, NVRTC and the CUDA headers are all found.
pub(crate) fn open() -> Result<OpenedDevice> {
    let gpu = find_gpu()?;
    let device = Device::cuda(0);
    crate::memory::set_gpu_memory_bytes(&device, gpu.memory_bytes);
    Ok(OpenedDevice {
        device,
        gpu: true,
        description: format!(
            "{} (CUDA, {}, CUDA C++ kernels compiled by NVRTC)",
            gpu.name,
            crate::memory::human_bytes(gpu.memory_bytes)
        ),
    })
}

/// What the driver says of GPU 0.
struct CudaGpu {
    name: String,
    memory_bytes: u64,
}

#[allow(unsafe_code)]
fn find_gpu() -> Result<CudaGpu> {
    use burn::cubecl::cuda::install::{cuda_path, include_path};
    use cudarc::driver::result::{self as driver, device};

    let fail = |what: String| Error::Device(format!("{what}; or use --device wgpu or cpu"));
    // SAFETY: only tries to `dlopen` each of cudarc's candidate names for the library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(fail(
            "no NVIDIA driver was found (libcuda could not be loaded): install NVIDIA's driver"
                .into(),
        ));
    }
    driver::init().map_err(|e| fail(format!("the NVIDIA driver did not start ({e})")))?;
    let count = device::get_count()
        .map_err(|e| fail(format!("the NVIDIA driver could not list its GPUs ({e})")))?;
    if count < 1 {
        return Err(fail("the NVIDIA driver sees no GPU".into()));
    }
    // SAFETY: as above, for NVRTC.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(fail(
            "NVRTC (libnvrtc, part of the CUDA Toolkit) could not be loaded; Burn's CUDA \
             backend compiles its kernels with it: install the CUDA Toolkit, or add its lib64 \
             folder to LD_LIBRARY_PATH"
                .into(),
        ));
    }
    // cubecl-cuda looks for the headers itself and panics where they are not.
    let headers_found = cuda_path().is_some() && include_path().join("cuda_fp16.h").is_file();
    if !headers_found {
        return Err(fail(
            "the CUDA Toolkit's headers (include/cuda_fp16.h) were not found in $CUDA_PATH, \
             /usr/local/cuda or /opt/cuda; NVRTC needs them to compile Burn's kernels: install \
             the CUDA Toolkit or set CUDA_PATH to it"
                .into(),
        ));
    }
    let gpu = device::get(0).map_err(|e| fail(format!("CUDA GPU 0 could not be opened ({e})")))?;
    let name = device::get_name(gpu).unwrap_or_else(|_| "CUDA GPU 0".into());
    // SAFETY: `gpu` is a device handle the initialised driver just returned.
    let memory_bytes = unsafe { device::total_mem(gpu) }.map_err(|e| {
        fail(format!(
            "the NVIDIA driver did not say GPU 0's memory ({e})"
        ))
    })?;
    Ok(CudaGpu {
        name,
        memory_bytes: memory_bytes as u64,
    })
}
