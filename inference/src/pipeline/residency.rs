//! What a generation keeps on a GPU short of memory: its text encoders wait in the
//! computer's memory while the UNet and the VAE run (A1111's `--medvram` and ComfyUI's
//! offloading do the same), and come back for the next prompt.

use burn::module::Module;

use crate::api::GenerateRequest;
use crate::error::Result;
use crate::memory::{self, MemoryOf};
use crate::model::Model;

/// The working memory `request` needs on `model` at its peak (weights aside): the UNet's
/// activations, or the VAE's on the whole image or a tile. A hires fix peaks in its second
/// pass, one image at a time.
pub fn working_bytes(model: &Model, request: &GenerateRequest) -> Result<u64> {
    let rows = rows(request);
    let (size, peak_rows) = match crate::pipeline::hires::hires_plan(request, model)? {
        Some(plan) => (plan.size, rows / request.batch.max(1) as usize),
        None => ((request.width, request.height), rows),
    };
    // Attention in tiles (the CPU kernel, fused attention elsewhere): no full matrices.
    let estimate = memory::estimate(
        0,
        0,
        &model.unet_config,
        &model.vae_config,
        size,
        peak_rows,
        (false, request.vae_tiling),
    );
    Ok(estimate.working)
}

/// UNet rows per call: the batch, doubled by classifier-free guidance (the pipeline's rule,
/// less the CFG++ samplers' unguided-but-doubled case, which this underestimates).
pub fn rows(request: &GenerateRequest) -> usize {
    let guided = request.cfg_scale > 1.0;
    request.batch as usize * if guided { 2 } else { 1 }
}

/// The bytes of GPU memory parking `model`'s text encoders would free (0 on the CPU, where
/// there is nothing to gain).
pub fn parkable_bytes(model: &Model) -> u64 {
    if MemoryOf::of(&model.device) == MemoryOf::Host {
        return 0;
    }
    let parameters: usize = model
        .encoders
        .iter()
        .filter(|e| !e.is_parked())
        .map(|e| e.network().num_params())
        .sum();
    parameters as u64 * model.precision.bytes() as u64
}

/// Parks the text encoders of `models` (already used for this generation's prompts) when
/// their GPU has less than `working` bytes free; returns whether it did.
pub fn park_encoders_if_short(models: &[&Model], working: u64, available: Option<u64>) -> bool {
    let on_gpu = models
        .first()
        .is_some_and(|m| MemoryOf::of(&m.device) == MemoryOf::Gpu);
    let short = available.is_some_and(|free| free < working);
    if !(on_gpu && short) {
        return false;
    }
    for encoder in models.iter().flat_map(|m| &m.encoders) {
        encoder.park();
    }
    true
}
