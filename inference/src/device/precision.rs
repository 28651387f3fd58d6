//! The float format the networks compute in (`--precision`), choosing it for a device, and
//! the checks that a half-precision result is finite.

use burn::tensor::Tensor;

use super::OpenedDevice;
use crate::error::{Error, Result};

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
    use super::{Precision, auto_precision};

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
