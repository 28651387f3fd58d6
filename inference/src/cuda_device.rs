//! Opening a CUDA device: checks first what Burn's CUDA backend needs at run time.
//!
//! Burn (through cubecl-cuda and cudarc) loads the NVIDIA driver and NVRTC lazily, on the
//! first operation, and panics on the engine thread where either is missing; its kernels are
//! CUDA C++ that NVRTC compiles against the CUDA Toolkit's headers (Ember builds cubecl-cuda
//! without its LLVM backend, see `vendor/README.md`). Each missing piece is one clear error
//! here instead, naming what to install; pieces that are there but do not work together (an
//! NVRTC newer than the driver, a GPU it cannot compile for, a context the driver refuses)
//! fail one small first operation here, not a job.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

use burn::tensor::{DType, Device, Tensor};

use crate::device::OpenedDevice;
use crate::worker::panic_message;

/// Why CUDA cannot run here, and what to do, in one line.
type Result<T> = std::result::Result<T, String>;

/// CUDA GPUs Ember has opened: Burn pads the rows of their tensors (`weight_layout`).
static OPENED: Mutex<Vec<Device>> = Mutex::new(Vec::new());

/// Whether `device` is a CUDA GPU Ember opened.
pub(crate) fn is_cuda(device: &Device) -> bool {
    OPENED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(device)
}

/// CUDA GPU `number` (the driver's order, as `ember devices` lists them), once the driver,
/// NVRTC and the CUDA headers are all found and a first operation ran.
pub(crate) fn open(number: usize) -> Result<OpenedDevice> {
    let gpu = find_gpu(number)?;
    crate::device::note_stand_in_driver(&gpu.name);
    let device = Device::cuda(number);
    OPENED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(device.clone());
    first_operation(&device).map_err(|why| {
        format!(
            "Burn's CUDA backend failed its first operation on {} ({why}); check that NVRTC \
             is not newer than NVIDIA's driver and knows this GPU; or use --device wgpu or cpu",
            gpu.name
        )
    })?;
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

/// What the driver says of a GPU.
struct CudaGpu {
    name: String,
    memory_bytes: u64,
}

/// The names and memory of the GPUs NVIDIA's driver sees, in its order, for
/// `ember devices`; why none can be listed otherwise.
pub(crate) fn list() -> Result<Vec<String>> {
    let listing = |why: String| why.trim_end_matches(USE_ANOTHER_DEVICE).to_string();
    let count = start_driver().map_err(listing)?;
    (0..count)
        .map(|n| {
            describe(n).map(|gpu| {
                format!(
                    "{} ({})",
                    gpu.name,
                    crate::memory::human_bytes(gpu.memory_bytes)
                )
            })
        })
        .collect::<Result<_>>()
        .map_err(listing)
}

/// The end of each CUDA error line: what to do instead.
const USE_ANOTHER_DEVICE: &str = "; or use --device wgpu or cpu";

/// Loads and starts NVIDIA's driver; how many GPUs it sees.
#[allow(unsafe_code)]
fn start_driver() -> Result<usize> {
    use cudarc::driver::result::{self as driver, device};
    let fail = |what: String| format!("{what}{USE_ANOTHER_DEVICE}");
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
    Ok(count as usize)
}

/// GPU `number`'s name and memory, from the started driver.
#[allow(unsafe_code)]
fn describe(number: usize) -> Result<CudaGpu> {
    use cudarc::driver::result::device;
    let fail = |what: String| format!("{what}{USE_ANOTHER_DEVICE}");
    let gpu = device::get(number as i32)
        .map_err(|e| fail(format!("CUDA GPU {number} could not be opened ({e})")))?;
    let name = device::get_name(gpu).unwrap_or_else(|_| format!("CUDA GPU {number}"));
    // SAFETY: `gpu` is a device handle the initialised driver just returned.
    let memory_bytes = unsafe { device::total_mem(gpu) }.map_err(|e| {
        fail(format!(
            "the NVIDIA driver did not say GPU {number}'s memory ({e})"
        ))
    })?;
    Ok(CudaGpu {
        name,
        memory_bytes: memory_bytes as u64,
    })
}

#[allow(unsafe_code)]
fn find_gpu(number: usize) -> Result<CudaGpu> {
    use burn::cubecl::cuda::install::{cuda_path, include_path};

    let fail = |what: String| format!("{what}{USE_ANOTHER_DEVICE}");
    let count = start_driver()?;
    if number >= count {
        return Err(format!(
            "there is no cuda:{number}: NVIDIA's driver sees {count} GPU(s), cuda:0 to \
             cuda:{}; `ember devices` lists them",
            count - 1
        ));
    }
    // SAFETY: only tries to `dlopen` each of cudarc's candidate names for NVRTC.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(fail(
            "NVRTC (libnvrtc, part of the CUDA Toolkit) could not be loaded; Burn's CUDA \
             backend compiles its kernels with it: install the CUDA Toolkit, or add its lib64 \
             folder to LD_LIBRARY_PATH"
                .into(),
        ));
    }
    // cubecl-cuda looks for the headers itself and panics where they are not.
    let Some(toolkit) = cuda_path() else {
        return Err(fail(
            "the CUDA Toolkit was not found ($CUDA_PATH, /usr/local/cuda, /opt/cuda, or /usr \
             where /usr/bin/nvcc is); NVRTC needs its headers to compile Burn's kernels: \
             install the CUDA Toolkit or set CUDA_PATH to it"
                .into(),
        ));
    };
    let missing = missing_headers(&include_path());
    if !missing.is_empty() {
        let headers: Vec<&str> = missing.iter().map(|(header, _)| *header).collect();
        let mut wheels: Vec<&str> = missing.iter().map(|(_, wheel)| *wheel).collect();
        wheels.dedup();
        return Err(fail(format!(
            "the CUDA headers in {} lack {}, which Burn's kernels include; install the CUDA \
             Toolkit, or with NVIDIA's pip wheels add {} of NVRTC's version, or set CUDA_PATH \
             to a toolkit that has them",
            toolkit.join("include").display(),
            headers.join(", "),
            wheels.join(" and ")
        )));
    }
    describe(number)
}

/// The headers cubecl's CUDA C++ includes that `include` (a toolkit's include folder)
/// lacks, each with the NVIDIA pip wheel that has it. The tensor-core kernels include
/// `mma.h`, which includes `crt/mma.h` (in CUDA 13's wheels a package of its own that
/// PyTorch does not install); the Hopper ones include CCCL's `cuda/barrier` (CUDA 13 keeps
/// CCCL in `include/cccl`, 12 in `include`). Without the last two, those kernels fail to
/// compile at first use, which Burn's autotune prints (pages of it) and skips, running
/// slower: asking for them up front is the clearer failure.
fn missing_headers(include: &std::path::Path) -> Vec<(&'static str, &'static str)> {
    let mut missing: Vec<(&'static str, &'static str)> = [
        ("cuda_fp16.h", "nvidia-cuda-runtime"),
        ("cuda_bf16.h", "nvidia-cuda-runtime"),
        ("mma.h", "nvidia-cuda-runtime"),
        ("crt/mma.h", "nvidia-cuda-crt"),
    ]
    .into_iter()
    .filter(|(header, _)| !include.join(header).is_file())
    .collect();
    let barrier = ["cccl/cuda/barrier", "cuda/barrier"];
    if !barrier.iter().any(|header| include.join(header).is_file()) {
        missing.push(("cuda/barrier (CCCL)", "nvidia-cuda-cccl"));
    }
    missing
}

/// Runs `1 + 1` in f16 on `device`: Burn opens its CUDA context, NVRTC compiles a kernel
/// (with the f16 headers) and the driver loads it.
fn first_operation(device: &Device) -> std::result::Result<(), String> {
    let values = without_panicking(|| {
        let two = Tensor::<1>::ones([8], device)
            .cast(DType::F16)
            .add_scalar(1.0);
        crate::device::tensor_to_vec(two.cast(DType::F32))
    })?;
    if crate::device::values_are_fake() || values.iter().all(|v| *v == 2.0) {
        Ok(())
    } else {
        Err(format!("1 + 1 came back as {values:?}"))
    }
}

/// `run`'s value, or the first panic's message while it ran, on one line. cubecl panics on
/// its device thread first and then, with a less telling message, on the calling one; the
/// default panic hook is held back meanwhile so neither reaches stderr.
fn without_panicking<T>(run: impl FnOnce() -> T) -> std::result::Result<T, String> {
    // The hook is the process's: two callers at once (tests run in parallel) would each
    // restore the hook the other replaced, and a panic would miss both.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let first_panic = Arc::new(Mutex::new(None::<String>));
    let seen = first_panic.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let mut slot = seen.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert_with(|| panic_message(info.payload()));
    }));
    let outcome = catch_unwind(AssertUnwindSafe(run));
    std::panic::set_hook(previous);
    let payload = match outcome {
        Ok(value) => return Ok(value),
        Err(payload) => payload,
    };
    let first = first_panic.lock().unwrap_or_else(|e| e.into_inner()).take();
    let why = first.unwrap_or_else(|| panic_message(&*payload));
    // One line: NVRTC's and the driver's logs run over several.
    let line = why.split_whitespace().collect::<Vec<_>>().join(" ");
    Err(line.chars().take(400).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_panic_is_the_reason_on_one_line() {
        let outcome = without_panicking(|| {
            // As cubecl does: its device thread panics, then the caller on a closed channel.
            let device_thread = std::thread::spawn(|| panic!("NVRTC:\n  sm_120 is not\tknown"));
            let _ = device_thread.join();
            panic!("RecvError");
        });
        assert_eq!(
            outcome,
            Err::<(), _>("NVRTC: sm_120 is not known".to_string())
        );
        assert_eq!(without_panicking(|| 2), Ok(2));
    }

    #[test]
    fn the_headers_kernels_include_are_all_asked_for() {
        let toolkit = tempfile::tempdir().unwrap();
        let include = toolkit.path().join("include");
        let all = [
            "cuda_fp16.h",
            "cuda_bf16.h",
            "mma.h",
            "crt/mma.h",
            "cuda/barrier (CCCL)",
        ];
        let headers =
            |include| -> Vec<&str> { missing_headers(include).iter().map(|(h, _)| *h).collect() };
        assert_eq!(headers(&include), all);
        // CUDA 13's wheels without nvidia-cuda-crt and nvidia-cuda-cccl, as PyTorch has them.
        for header in ["cuda_fp16.h", "cuda_bf16.h", "mma.h"] {
            std::fs::create_dir_all(include.join(header).parent().unwrap()).unwrap();
            std::fs::write(include.join(header), "").unwrap();
        }
        assert_eq!(
            missing_headers(&include),
            [
                ("crt/mma.h", "nvidia-cuda-crt"),
                ("cuda/barrier (CCCL)", "nvidia-cuda-cccl")
            ]
        );
        for header in ["crt/mma.h", "cccl/cuda/barrier"] {
            std::fs::create_dir_all(include.join(header).parent().unwrap()).unwrap();
            std::fs::write(include.join(header), "").unwrap();
        }
        assert!(missing_headers(&include).is_empty());
    }

    #[test]
    fn a_first_operation_runs_on_a_working_device() {
        assert_eq!(first_operation(&Device::flex()), Ok(()));
    }
}
