//! Weights kept without row padding on CUDA, where cubecl would otherwise more than double
//! a half-precision 3×3 convolution's memory.
//!
//! cubecl 0.11.3's CUDA runtime lays out every tensor it makes from host data or allocates
//! for an operation's output "pitched" (`cubecl-server` `PitchedMemoryLayoutPolicy`,
//! `cubecl-runtime` `optimal_align`): each row of the last dimension is padded to at least
//! 16 bytes. A 3×3 kernel's rows are 3 values, 6 bytes in f16, so SD 1.5's weights took
//! 4.23 GB for 2.13 GB (counted on the stand-in driver). A tensor made flat has one row,
//! and giving a contiguous tensor its shape back moves no data, so the weight keeps its
//! size. wgpu lays tensors out contiguously already; there this is a no-op.

use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::{Device, Tensor};

/// `module` with every float weight laid out contiguously where its device pads rows
/// (CUDA), and the padded copies' memory given back to the driver; elsewhere `module`
/// itself. On a weight already contiguous it moves no data.
pub fn unpadded<M: Module>(module: M) -> M {
    let Some(device) = module.devices().into_iter().next() else {
        return module;
    };
    if !pads_rows(&device) {
        return module;
    }
    let module = module.map(&mut Unpad);
    device.memory_cleanup();
    module
}

/// Whether tensors that Burn allocates on `device` have padded rows.
pub fn pads_rows(device: &Device) -> bool {
    #[cfg(feature = "cuda")]
    {
        crate::cuda_device::is_cuda(device)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = device;
        false
    }
}

/// `tensor` laid out contiguously where its device pads rows; elsewhere `tensor` itself.
pub fn unpad<const D: usize>(tensor: Tensor<D>) -> Tensor<D> {
    if !pads_rows(&tensor.device()) {
        return tensor;
    }
    let shape = tensor.shape();
    // A padded tensor is not contiguous, so making it flat copies it into one row; the copy
    // is contiguous, so the shape comes back as metadata only.
    tensor.reshape([shape.num_elements()]).reshape(shape)
}

struct Unpad;

impl ModuleMapper for Unpad {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        param.map(unpad)
    }
}
