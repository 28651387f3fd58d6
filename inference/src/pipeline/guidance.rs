//! Classifier-free guidance and the model-output conventions: how a UNet call becomes the
//! `denoise(x, sigma) -> x0` that samplers see.

use burn::tensor::Tensor;

use crate::schedule::diffusers::Prediction;

/// `uncond + scale * (cond - uncond)` on the raw model output, as diffusers does.
///
/// # Shapes
/// - `out`: `[2 * batch, c, h, w]`, the unconditional half first (diffusers' order)
/// - returns `[batch, c, h, w]`
pub fn guide(out: Tensor<4>, scale: f32) -> Tensor<4> {
    let batch = out.dims()[0] / 2;
    let uncond = out.clone().narrow(0, 0, batch);
    let cond = out.narrow(0, batch, batch);
    uncond.clone() + (cond - uncond).mul_scalar(scale)
}

/// The UNet input for a sample at noise level `sigma`: `x / sqrt(sigma^2 + 1)`.
pub fn scale_model_input(x: Tensor<4>, sigma: f32) -> Tensor<4> {
    x.div_scalar((sigma * sigma + 1.0).sqrt())
}

/// The clean-sample prediction from the model output at noise level `sigma`.
///
/// - epsilon: `x - sigma * eps`
/// - v: `v * (-sigma / sqrt(sigma^2 + 1)) + x / (sigma^2 + 1)`
pub fn denoised(
    x: &Tensor<4>,
    model_out: Tensor<4>,
    sigma: f32,
    prediction: Prediction,
) -> Tensor<4> {
    match prediction {
        Prediction::Epsilon => x.clone() - model_out.mul_scalar(sigma),
        Prediction::V => {
            let c_out = -sigma / (sigma * sigma + 1.0).sqrt();
            model_out.mul_scalar(c_out) + x.clone().div_scalar(sigma * sigma + 1.0)
        }
    }
}
