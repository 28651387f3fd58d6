//! One UNet call of a denoiser, in half precision with an f32 fallback. A half-precision
//! UNet can overflow (f16 tops out at 65504; some finetunes and merges push activations past
//! it), which would turn every later step and the image black; instead the call runs again
//! on an f32 copy of the UNet, kept for the rest of the session, and the generation says so.

use burn::module::Module;
use burn::tensor::{DType, Tensor};

use kernels::wrap::{Wrap, with_wrap};

use crate::device::{CastParams, Precision};
use crate::model::Model;
use crate::models::unet::{AddedConditioning, ControlResiduals, UNet};

/// What a generation says when its model's UNet had to change to f32 during it.
pub const F32_FALLBACK_WARNING: &str = "the UNet overflowed in half precision (NaN or \
    infinite values); it ran again in f32 and stays in f32 for this model (an f32 copy of the \
    UNet: --precision f32 from the start needs less memory)";

/// The conditioning and control of one UNet call, in the network's float format.
pub struct UnetInputs<'a> {
    pub timesteps: &'a [f32],
    pub context: &'a Tensor<3>,
    pub added: Option<&'a AddedConditioning>,
    pub control: Option<&'a ControlResiduals>,
    pub interrupted: &'a dyn Fn() -> bool,
    /// The axes the UNet's convolutions wrap (seamless tiling).
    pub wrap: Wrap,
}

/// The model's UNet on `sample` (f32), in its precision, or in f32 when that overflows (or
/// overflowed before). `None` when interrupted.
///
/// # Shapes
/// - `sample`: `[rows, in_channels, h, w]` (f32) -> `[rows, out_channels, h, w]` (f32)
pub fn run(model: &Model, sample: Tensor<4>, inputs: &UnetInputs<'_>) -> Option<Tensor<4>> {
    if model.precision == Precision::F32 {
        return call(&model.unet, sample, inputs);
    }
    if let Some(unet) = model.unet_f32.get() {
        return in_f32(unet, sample, inputs);
    }
    let half = model.to_f32(call(&model.unet, model.to_network(sample.clone()), inputs)?);
    // A device failure is no overflow: f32 would not help, and the step's own check reports it.
    if crate::device::all_finite(&half).unwrap_or(true) {
        return Some(half);
    }
    // A kernel that stopped for a cancel left its output unfinished: no overflow to keep an
    // f32 copy for (the job's scope drops the result).
    if (inputs.interrupted)() {
        return None;
    }
    let unet = model
        .unet_f32
        .get_or_init(|| model.unet.clone().map(&mut CastParams(DType::F32)));
    in_f32(unet, sample, inputs)
}

fn call(unet: &UNet, sample: Tensor<4>, inputs: &UnetInputs<'_>) -> Option<Tensor<4>> {
    let t = inputs.timesteps;
    let conditioning = (inputs.context, inputs.added);
    with_wrap(inputs.wrap, || match inputs.control {
        Some(c) => unet.forward_controlled(sample, t, conditioning, c, inputs.interrupted),
        None => unet.forward_interruptible(sample, t, conditioning, inputs.interrupted),
    })
}

/// `unet` (f32) with every input cast to f32.
fn in_f32(unet: &UNet, sample: Tensor<4>, inputs: &UnetInputs<'_>) -> Option<Tensor<4>> {
    let f32 = |t: &Tensor<4>| t.clone().cast(DType::F32);
    let context = inputs.context.clone().cast(DType::F32);
    let added = inputs.added.map(|a| AddedConditioning {
        text_embeds: a.text_embeds.clone().cast(DType::F32),
        time_ids: a.time_ids.clone(),
    });
    let control = inputs.control.map(|c| ControlResiduals {
        down: c.down.iter().map(f32).collect(),
        mid: f32(&c.mid),
    });
    let inputs = UnetInputs {
        context: &context,
        added: added.as_ref(),
        control: control.as_ref(),
        ..*inputs
    };
    call(unet, sample, &inputs)
}
