//! What the kernels' tests share: how far a result is from the reference's.

use burn::tensor::Tensor;

/// Largest difference relative to the reference's largest magnitude (at least 1).
pub fn rel_diff<const D: usize>(ours: Tensor<D>, reference: Tensor<D>) -> f32 {
    assert_eq!(ours.dims(), reference.dims());
    let scale = reference.clone().abs().max().into_scalar::<f32>().max(1.0);
    (ours - reference).abs().max().into_scalar::<f32>() / scale
}
