//! Tests of the widening transpose against `half`'s conversions and Burn's transpose.

use burn::tensor::{Device, Tensor, TensorData};

use super::*;

const SHAPES: [[usize; 2]; 10] = [
    [1, 7],
    [7, 1],
    [3, 5],
    [64, 64],
    [70, 200],
    [321, 67],
    [8, 8],
    [17, 9],
    [40, 1000],
    [2560, 24],
];

fn transposed(values: &[f32], [rows, cols]: [usize; 2]) -> Vec<f32> {
    Tensor::<2>::from_data(
        TensorData::new(values.to_vec(), [rows, cols]),
        &Device::flex(),
    )
    .transpose()
    .into_data()
    .convert::<f32>()
    .try_into_vec::<f32>()
    .unwrap()
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn every_half_value_widens_as_half_widens_it() {
    let all: Vec<u16> = (0..=u16::MAX).collect();
    let f16s: Vec<half::f16> = all.iter().map(|&b| half::f16::from_bits(b)).collect();
    let bf16s: Vec<half::bf16> = all.iter().map(|&b| half::bf16::from_bits(b)).collect();
    let mut ours = vec![0f32; all.len()];
    widen_into(&f16s, &mut ours, [1, all.len()], false);
    let theirs: Vec<f32> = f16s.iter().map(|h| h.to_f32()).collect();
    assert_eq!(bits(&ours), bits(&theirs), "f16");
    widen_into(&bf16s, &mut ours, [1, all.len()], false);
    let theirs: Vec<f32> = bf16s.iter().map(|h| h.to_f32()).collect();
    assert_eq!(bits(&ours), bits(&theirs), "bf16");
}

#[test]
fn matches_burns_transpose_for_every_shape_and_format() {
    for [rows, cols] in SHAPES {
        let values: Vec<f32> = (0..rows * cols).map(|i| i as f32 * 0.5 - 3.0).collect();
        let mut dst = vec![0f32; rows * cols];
        widen_into(&values, &mut dst, [rows, cols], true);
        assert_eq!(dst, transposed(&values, [rows, cols]), "{rows}x{cols} f32");
        let halves: Vec<half::f16> = values.iter().map(|&v| half::f16::from_f32(v)).collect();
        let exact: Vec<f32> = halves.iter().map(|h| h.to_f32()).collect();
        widen_into(&halves, &mut dst, [rows, cols], true);
        assert_eq!(dst, transposed(&exact, [rows, cols]), "{rows}x{cols} f16");
        widen_into(&halves, &mut dst, [rows, cols], false);
        assert_eq!(dst, exact, "{rows}x{cols} f16 in order");
        let brains: Vec<half::bf16> = values.iter().map(|&v| half::bf16::from_f32(v)).collect();
        let exact: Vec<f32> = brains.iter().map(|h| h.to_f32()).collect();
        widen_into(&brains, &mut dst, [rows, cols], true);
        assert_eq!(dst, transposed(&exact, [rows, cols]), "{rows}x{cols} bf16");
    }
}
