//! Linear layers on the CPU: the bias written into the output first and the product
//! accumulated onto it by one `gemm` call over every row of the batch, on all cores.
//!
//! Burn's `Linear` multiplies, then adds the bias in a second pass over the output; for the
//! UNet's feed-forward layers (an output of 2 × 4096 × 5120 floats at SDXL's 64×64 level)
//! that pass costs about a tenth of the product.

use burn::nn::Linear;
use burn::tensor::{DType, Device, Tensor, TensorData};
use rayon::prelude::*;

use crate::gemm::{Gemm, gemm_f32_parallel};
use crate::{reference, with_host_slice};

/// A [`Linear`] module's forward pass. On the CPU [`linear_rows`] (f16 and bf16 tensors cast
/// to float32 for it and the result cast back); elsewhere the module's own `forward`
/// ([`reference::linear`]).
///
/// # Shapes
/// - `x`: `[..., d_input]` -> `[..., d_output]`
pub fn linear<const D: usize>(x: Tensor<D>, linear: &Linear) -> Tensor<D> {
    let weight = linear.weight.val();
    let bias = linear.bias.as_ref().map(|b| b.val());
    let dtype = x.dtype();
    let same_type = weight.dtype() == dtype && bias.as_ref().is_none_or(|b| b.dtype() == dtype);
    let float = matches!(dtype, DType::F32 | DType::F16 | DType::BF16);
    let dims = x.dims();
    let [d_input, d_output] = weight.dims();
    if !(float && same_type && x.device() == Device::flex()) || D == 0 || dims[D - 1] != d_input {
        return reference::linear(x, linear);
    }
    let rows = dims[..D - 1].iter().product::<usize>();
    if rows == 0 || d_output == 0 {
        return reference::linear(x, linear);
    }
    let f32 = |t: Tensor<2>| t.cast(DType::F32);
    let (x, weight, bias) = (
        x.cast(DType::F32),
        f32(weight),
        bias.map(|b| b.cast(DType::F32)),
    );
    let device = x.device();
    let output = with_host_slice(x, |input| {
        with_host_slice(weight, |weight| match bias {
            Some(bias) => with_host_slice(bias, |bias| {
                linear_rows(input, weight, Some(bias), [rows, d_input, d_output])
            }),
            None => linear_rows(input, weight, None, [rows, d_input, d_output]),
        })
    });
    let mut out_dims = dims;
    out_dims[D - 1] = d_output;
    Tensor::<D>::from_data(TensorData::new(output, out_dims), &device).cast(dtype)
}

/// `input (rows x d_input) @ weight (d_input x d_output) + bias`, row-major.
///
/// # Panics
/// If a slice's length does not match the sizes.
pub fn linear_rows(
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    [rows, d_input, d_output]: [usize; 3],
) -> Vec<f32> {
    assert_eq!(input.len(), rows * d_input, "linear: input length");
    assert_eq!(weight.len(), d_input * d_output, "linear: weight length");
    let mut output = vec![0f32; rows * d_output];
    if let Some(bias) = bias {
        assert_eq!(bias.len(), d_output, "linear: bias length");
        output.par_chunks_mut(d_output * 64).for_each(|block| {
            block
                .chunks_exact_mut(d_output)
                .for_each(|row| row.copy_from_slice(bias))
        });
    }
    gemm_f32_parallel(Gemm {
        m: rows,
        n: d_output,
        k: d_input,
        dst: &mut output,
        dst_row_stride: d_output,
        accumulate: bias.is_some(),
        lhs: input,
        lhs_row_stride: d_input,
        lhs_col_stride: 1,
        rhs: weight,
        rhs_row_stride: d_output,
        rhs_col_stride: 1,
        scale: 1.0,
    });
    output
}

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use burn::nn::LinearConfig;
    use burn::tensor::Distribution;

    use super::*;
    use crate::test_support::rel_diff;

    fn module(d_input: usize, d_output: usize, bias: bool) -> Linear {
        LinearConfig::new(d_input, d_output)
            .with_bias(bias)
            .init(&Device::flex())
    }

    fn random<const D: usize>(dims: [usize; D]) -> Tensor<D> {
        Tensor::random(dims, Distribution::Normal(0.0, 1.0), &Device::flex())
    }

    #[test]
    fn matches_burns_linear_for_any_leading_dimensions() {
        for (d_input, d_output, bias) in [(64, 96, true), (7, 3, false), (1, 5, true)] {
            let layer = module(d_input, d_output, bias);
            let x2 = random([13, d_input]);
            let x3 = random([2, 9, d_input]);
            let x4 = random([2, 3, 5, d_input]);
            let diffs = [
                rel_diff(linear(x2.clone(), &layer), reference::linear(x2, &layer)),
                rel_diff(linear(x3.clone(), &layer), reference::linear(x3, &layer)),
                rel_diff(linear(x4.clone(), &layer), reference::linear(x4, &layer)),
            ];
            assert!(
                diffs.iter().all(|&d| d < 1e-5),
                "{d_input}->{d_output}: {diffs:?}"
            );
        }
    }

    #[test]
    fn an_input_that_is_a_view_is_read_in_its_logical_order() {
        let layer = module(6, 4, true);
        let x = random([2, 6, 5]).swap_dims(1, 2);
        let diff = rel_diff(linear(x.clone(), &layer), reference::linear(x, &layer));
        assert!(diff < 1e-5, "{diff}");
    }

    #[test]
    fn half_precision_runs_in_float32_and_is_rounded_once() {
        for (dtype, tolerance) in [(DType::BF16, 4e-3), (DType::F16, 5e-4)] {
            let mut layer = module(24, 16, true);
            layer.weight = Param::from_tensor(layer.weight.val().cast(dtype));
            layer.bias = layer.bias.map(|b| Param::from_tensor(b.val().cast(dtype)));
            let x = random([2, 5, 24]).cast(dtype);
            let ours = linear(x.clone(), &layer);
            assert_eq!(ours.dtype(), dtype);
            let mut widened = layer.clone();
            widened.weight = Param::from_tensor(layer.weight.val().cast(DType::F32));
            widened.bias = layer
                .bias
                .map(|b| Param::from_tensor(b.val().cast(DType::F32)));
            let exact = reference::linear(x.cast(DType::F32), &widened);
            let diff = rel_diff(ours.cast(DType::F32), exact);
            assert!(diff < tolerance, "{dtype:?}: {diff}");
        }
    }
}
