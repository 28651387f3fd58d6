//! Where a loaded model's UNet and text-encoder weights came from, kept so that a weight can
//! be read again exactly as it was loaded: what takes a LoRA out, bit for bit, without a
//! copy of every weight it changed (on SD 1.5 a typical LoRA changes 1.2 GiB of them).
//!
//! Only `.safetensors` files are kept as sources: their reader checks, before every read,
//! that the file is still the one opened ([`super::safetensors_file`]). Weights from a
//! pickle, or built in memory, have no source; LoRA keeps a copy of those instead.

use std::collections::HashMap;

use burn::module::Module;
use burn::store::burn_pack::Tensor as PackTensor;
use burn::store::{ModuleSnapshot, bridge};
use burn::tensor::{DType, Device, Tensor, TensorData};
use kernels::widen::{LowRank, widen_add_into};

use super::apply::load_adapter;
use crate::error::{Error, Result};
use crate::lora::Network;
use crate::lora::swap::Weight;

/// The tensors each network was loaded from, by module path, unread (a few hundred bytes
/// each: the file is read again only when a weight is put back).
#[derive(Clone, Default)]
pub struct WeightSources {
    networks: HashMap<Network, HashMap<String, PackTensor>>,
    /// The float format the networks were loaded in.
    dtype: Option<DType>,
}

impl WeightSources {
    /// Remembers `tensors` (named by module path, as [`super::apply_strict`] takes them) as
    /// `network`'s sources, loaded in `dtype`.
    pub fn keep(&mut self, network: Network, tensors: Vec<PackTensor>, dtype: DType) {
        self.dtype = Some(dtype);
        let by_path = tensors.into_iter().map(|t| (t.name.clone(), t)).collect();
        self.networks.insert(network, by_path);
    }

    /// Whether `network`'s weight at module path `path` can be read again from its file.
    pub fn has(&self, network: Network, path: &str) -> bool {
        self.networks
            .get(&network)
            .is_some_and(|tensors| tensors.contains_key(path))
    }

    /// Puts `network`'s weights at `paths` back into `module` as they were loaded: read
    /// from the file again and converted exactly as loading converted them. Every path must
    /// have a source ([`Self::has`]). On an error (the file changed on disk, or can no
    /// longer be read) the weights not put back are left as they are.
    pub fn reload<M: Module>(
        &self,
        module: &mut M,
        network: Network,
        paths: &[&str],
    ) -> Result<()> {
        let (Some(tensors), Some(dtype)) = (self.networks.get(&network), self.dtype) else {
            return Err(missing_source(paths.first().copied().unwrap_or("")));
        };
        let pack = paths
            .iter()
            .map(|path| {
                tensors
                    .get(*path)
                    .cloned()
                    .ok_or_else(|| missing_source(path))
            })
            .collect::<Result<Vec<_>>>()?;
        let result = module.apply(pack, None, Some(Box::new(load_adapter(dtype))), true);
        if let Some(error) = result.errors.first() {
            return Err(Error::settings(format!(
                "reading the loaded weights again: {error}; load the model again"
            )));
        }
        if result.applied.len() != paths.len() {
            return Err(Error::settings(format!(
                "reading the loaded weights again: {} of {} were put back; load the model again",
                result.applied.len(),
                paths.len()
            )));
        }
        // The weights read again are new host data on the device, padded on CUDA.
        if module
            .devices()
            .first()
            .is_some_and(crate::weight_layout::pads_rows)
        {
            *module = crate::weight_layout::unpadded(module.clone());
        }
        Ok(())
    }
}

impl WeightSources {
    /// Whether [`Self::reread_into`] applies: the networks hold f32 weights on the CPU.
    pub fn rereads_in_place(&self, device: &Device) -> bool {
        self.dtype == Some(DType::F32) && *device == Device::flex()
    }

    /// `network`'s `weight` read from its file again into `w`, the weight's own f32 CPU
    /// buffer (nothing allocated but the read itself): the values [`Self::reload`] gives,
    /// as a float widened to f32 is exact and a `Linear` weight is only transposed. With
    /// `update` (in the file's orientation) that low-rank change is added in the same pass:
    /// a LoRA merged again at another strength. Returns the weight read again, or on an
    /// error `w` as it was.
    pub fn reread_into(
        &self,
        network: Network,
        weight: &Weight<'_>,
        w: Tensor<1>,
        update: Option<&LowRank<'_>>,
    ) -> (Tensor<1>, Result<()>) {
        let Some(source) = self.networks.get(&network).and_then(|t| t.get(weight.path)) else {
            return (w, Err(missing_source(weight.path)));
        };
        let dims = weight.dims;
        let expected: Vec<usize> = if weight.linear {
            dims.iter().rev().copied().collect()
        } else {
            dims.to_vec()
        };
        // `[rows, cols]` of the file's layout (a Linear weight is written transposed).
        let n: usize = dims.iter().product();
        let rows = expected.first().copied().unwrap_or(1);
        let size = [rows, n.checked_div(rows).unwrap_or(0)];
        let fits = update
            .is_none_or(|u| u.up.len() == size[0] * u.rank && u.down.len() == u.rank * size[1]);
        if source.shape.as_slice() != expected.as_slice() || w.dtype() != DType::F32 || !fits {
            let e = Error::settings(format!(
                "`{}` was loaded as {dims:?} from {:?}",
                weight.path,
                source.shape.as_slice()
            ));
            return (w, Err(e));
        }
        let data = match bridge::to_data(source) {
            Ok(data) => data,
            Err(e) => {
                let e = Error::settings(format!(
                    "reading `{}` again: {e}; load the model again",
                    weight.path
                ));
                return (w, Err(e));
            }
        };
        let device = w.device();
        let mut target = w.into_data();
        let dst = target.as_mut_slice::<f32>().expect("an f32 weight");
        let transpose = weight.linear;
        match data.dtype() {
            DType::F16 => widen_add_into(f16s(&data), dst, size, transpose, update),
            DType::BF16 => widen_add_into(bf16s(&data), dst, size, transpose, update),
            DType::F32 => widen_add_into(f32s(&data), dst, size, transpose, update),
            _ => {
                let data = data.convert_dtype(DType::F32);
                widen_add_into(f32s(&data), dst, size, transpose, update)
            }
        }
        (Tensor::from_data(target, &device), Ok(()))
    }
}

fn f16s(data: &TensorData) -> &[half::f16] {
    data.as_slice().expect("f16 tensor data")
}

fn bf16s(data: &TensorData) -> &[half::bf16] {
    data.as_slice().expect("bf16 tensor data")
}

fn f32s(data: &TensorData) -> &[f32] {
    data.as_slice().expect("f32 tensor data")
}

fn missing_source(path: &str) -> Error {
    Error::settings(format!(
        "the loaded weight `{path}` has no file to be read again from"
    ))
}
