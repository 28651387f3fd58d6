//! What a request will cost before it starts: working memory against what the machine has
//! free (a request that cannot fit is refused), and time from this device's measured speed
//! (a request that will take long is announced, so nobody waits hours without knowing).

use std::time::{Duration, Instant};

use burn::tensor::Tensor;

use crate::api::GenerateRequest;
use crate::error::{Error, Result};
use crate::memory;
use crate::model::Model;
use crate::pipeline::residency;

/// Requests this much larger than the calibration call (in UNet rows x latent pixels) are
/// timed against a measured speed; smaller ones finish quickly whatever the device.
const CALIBRATE_ABOVE: usize = 2 * 64 * 64;

/// The latent side of the calibration call.
const CALIBRATION_SIDE: usize = 32;

/// Seconds per UNet row-pixel of this model on this device, measured once per model.
#[derive(Clone, Copy, Debug, Default)]
pub struct Speed(pub Option<f64>);

/// A request's cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cost {
    /// Working memory at the peak, bytes (the weights are already loaded).
    pub working_bytes: u64,
    /// Expected time of the denoising, when the request is large enough to be timed; a
    /// lower bound (attention grows faster than the pixel count).
    pub time: Option<Duration>,
}

/// The cost of `request` on `model`; `Err` when its working memory cannot fit in
/// `available` bytes free on the model's device (the computer's memory, or a GPU's own;
/// unknown: not checked). `speed` is measured on the first large request and kept; `interrupted`
/// abandons the measurement (`Cancelled`).
pub fn cost(
    model: &Model,
    request: &GenerateRequest,
    (speed, interrupted): (&mut Speed, &dyn Fn() -> bool),
    available: Option<u64>,
) -> Result<Cost> {
    let rows = residency::rows(request);
    let hires = crate::pipeline::hires::hires_plan(request, model)?;
    let estimate = memory::Estimate {
        weights: 0,
        working: residency::working_bytes(model, request)?,
    };
    if let Some(free) = available {
        // On a GPU the text encoders make room once the prompts are encoded.
        let free = free + residency::parkable_bytes(model);
        let helps = (false, !request.seamless.is_on());
        memory::check_fits(estimate, (free, memory::MemoryOf::of(&model.device)), helps)?;
    }
    let f = model.vae_factor();
    let pixels = (request.width as usize / f) * (request.height as usize / f);
    let work = rows * pixels;
    let time = if work > CALIBRATE_ABOVE {
        let per_unit = match speed.0 {
            Some(s) => s,
            None => {
                let s = calibrate(model, interrupted).ok_or(Error::Cancelled)?;
                speed.0 = Some(s);
                s
            }
        };
        let calls = request.effective_steps().max(1) as f64;
        let second_pass = match (&hires, &request.hires) {
            (Some(plan), Some(fix)) => {
                let big = (plan.size.0 as usize / f) * (plan.size.1 as usize / f);
                (rows * big) as f64 * f64::from(fix.steps_or(request.steps))
            }
            _ => 0.0,
        };
        Some(Duration::from_secs_f64(
            per_unit * (work as f64 * calls + second_pass),
        ))
    } else {
        None
    };
    Ok(Cost {
        working_bytes: estimate.working,
        time,
    })
}

/// Seconds per row-pixel of one UNet call, timed on a small unconditioned latent after an
/// untimed warm-up call (a GPU compiles its kernels on the first); `None` when interrupted.
fn calibrate(model: &Model, interrupted: &dyn Fn() -> bool) -> Option<f64> {
    let side = CALIBRATION_SIDE;
    let channels = model.unet_config.in_channels;
    let device = &model.device;
    let sample = Tensor::<4>::zeros([1, channels, side, side], device);
    let context = Tensor::<3>::zeros([1, 77, model.unet_config.cross_attention_dim], device);
    let added = model.unet_config.addition.as_ref().map(|a| {
        let pooled = a.input_dim - 6 * a.time_embed_dim;
        crate::models::unet::AddedConditioning {
            text_embeds: Tensor::zeros([1, pooled], device),
            time_ids: vec![0.0; 6],
        }
    });
    let (sample, context) = (model.to_network(sample), model.to_network(context));
    let call = || -> Option<()> {
        let out = model.unet.forward_interruptible(
            sample.clone(),
            &[500.0],
            (&context, added.as_ref()),
            interrupted,
        )?;
        // Wait for the result (lazy backends queue the work).
        let _ = crate::device::tensor_to_vec(model.to_f32(out).narrow(0, 0, 1));
        Some(())
    };
    call()?;
    let start = Instant::now();
    call()?;
    Some(start.elapsed().as_secs_f64() / (side * side) as f64)
}
