//! Whether Burn's implicit-GEMM convolution (on the matrix units) takes a problem, found by
//! running it on the first call of each shape.
//!
//! Why: Burn's convolution autotune on wgpu offers its direct kernel beside the implicit-GEMM
//! ones, and keeps the direct one, quietly, wherever the implicit GEMMs cannot launch. The
//! direct kernel sums half-precision products in half precision with no tiling. Seen on
//! Mesa's lavapipe with cooperative matrices (Mesa 26): every 3×3 convolution of an SD 1.5
//! UNet in f16 was refused by all three implicit GEMMs (a shared-memory budget, 16-byte
//! stride alignment) and ran the direct kernel, and the f16 image moved 6 levels from the
//! f32 one instead of 1. Refused problems take Ember's im2col product instead, which sums
//! in f32 on the same matrix units.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use burn::backend::Wgpu;
use burn::tensor::Tensor;
use burn::tensor::ops::ConvOptions;
use burn_cubecl::kernel::conv::{ConvStrategy, conv_forward};

use crate::conv::ConvShape;

/// What Burn's implicit GEMM does with one convolution problem.
pub enum Verdict {
    /// It took the problem on this, its first call: here is the result. Later calls run
    /// Burn's autotuned convolution, which then has its implicit GEMMs to choose from.
    TakenNow(Box<Tensor<4>>),
    /// It took the problem on an earlier call: run Burn's convolution.
    Taken,
    /// It cannot take it here (no matrix units for the tensor's type, asymmetric padding, or
    /// Burn's setup refused it).
    Refused,
}

/// The verdicts found so far, by device, float type and shape.
type Verdicts = HashMap<(String, burn::tensor::DType, ConvShape), bool>;
static VERDICTS: Mutex<Option<Verdicts>> = Mutex::new(None);

/// Burn's [`Verdict`] on convolving `x` with `weight` (`[c_out, c_in, kh, kw]`) plus `bias`
/// over `shape`, running it once per problem to find out.
///
/// # Shapes
/// - `x`: `[batch, c_in, h, w]`; a taken result `[batch, c_out, out_h, out_w]`
pub fn verdict(
    x: &Tensor<4>,
    weight: &Tensor<4>,
    bias: Option<&Tensor<1>>,
    shape: ConvShape,
) -> Verdict {
    let [top, left, bottom, right] = shape.padding;
    if top != bottom || left != right || !super::has_matrix_units_for(x) {
        return Verdict::Refused;
    }
    let key = (format!("{:?}", x.device()), x.dtype(), shape);
    let known =
        |verdicts: &mut Option<Verdicts>| verdicts.get_or_insert_default().get(&key).copied();
    // Not held while the probe runs: a convolution can take seconds on a slow device.
    match known(&mut VERDICTS.lock().unwrap_or_else(PoisonError::into_inner)) {
        Some(true) => return Verdict::Taken,
        Some(false) => return Verdict::Refused,
        None => {}
    }
    let result = implicit_gemm(
        x,
        weight,
        bias,
        ConvOptions::new(shape.stride, [top, left], [1, 1], 1),
    );
    let mut verdicts = VERDICTS.lock().unwrap_or_else(PoisonError::into_inner);
    verdicts
        .get_or_insert_default()
        .insert(key, result.is_some());
    match result {
        Some(y) => Verdict::TakenNow(Box::new(y)),
        None => Verdict::Refused,
    }
}

/// Burn's implicit-GEMM convolution on the matrix units (its synchronous cooperative-matrix
/// kernel, f32 sums); `None` where its setup refuses the problem.
fn implicit_gemm(
    x: &Tensor<4>,
    weight: &Tensor<4>,
    bias: Option<&Tensor<1>>,
    options: ConvOptions<2>,
) -> Option<Tensor<4>> {
    let input = x.clone().try_into_primitive::<Wgpu>().ok()?;
    let weight = weight.clone().try_into_primitive::<Wgpu>().ok()?;
    let bias = match bias {
        Some(b) => Some(b.clone().try_into_primitive::<Wgpu>().ok()?),
        None => None,
    };
    let output =
        conv_forward::<2>(input, weight, bias, options, ConvStrategy::ImplicitGemm).ok()?;
    Some(Tensor::from_primitive::<Wgpu>(output))
}
