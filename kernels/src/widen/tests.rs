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

fn matrix(values: Vec<f32>, dims: [usize; 2]) -> Tensor<2> {
    Tensor::from_data(TensorData::new(values, dims), &Device::flex())
}

fn pseudo_random(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 1000)
        .map(|v| v as f32 / 500.0 - 1.0)
        .collect()
}

#[test]
fn a_low_rank_update_is_added_in_either_orientation_as_burn_computes_it() {
    for [rows, cols] in SHAPES {
        for rank in [0, 1, 4, 32] {
            let values = pseudo_random(rows * cols, 1);
            let halves: Vec<half::f16> = values.iter().map(|&v| half::f16::from_f32(v)).collect();
            let exact: Vec<f32> = halves.iter().map(|h| h.to_f32()).collect();
            let (up, down) = (pseudo_random(rows * rank, 2), pseudo_random(rank * cols, 3));
            let update = LowRank {
                up: &up,
                down: &down,
                rank,
                scale: 0.375,
            };
            let merged = matrix(exact, [rows, cols])
                + matrix(up.clone(), [rows, rank])
                    .matmul(matrix(down.clone(), [rank, cols]))
                    .mul_scalar(0.375);
            for transpose in [false, true] {
                let expected = if transpose {
                    merged.clone().transpose()
                } else {
                    merged.clone()
                };
                let mut dst = vec![f32::NAN; rows * cols];
                widen_add_into(&halves, &mut dst, [rows, cols], transpose, Some(&update));
                let ours = matrix(dst, expected.dims());
                let diff = (ours - expected).abs().max().into_scalar::<f32>();
                // Sums of `rank` products of values below 1 in another order.
                assert!(
                    diff <= 1e-6 * rank.max(1) as f32,
                    "{rows}x{cols} rank {rank} transposed {transpose}: {diff}"
                );
            }
        }
    }
}

#[test]
fn the_avx_tile_transpose_matches_the_plain_one() {
    let tile: [Row; TILE] = std::array::from_fn(|r| std::array::from_fn(|c| (r * TILE + c) as f32));
    let plain = transpose_tile(None, tile);
    for (c, column) in plain.iter().enumerate() {
        for (r, &v) in column.iter().enumerate() {
            assert_eq!(v, tile[r][c]);
        }
    }
    // On a CPU without AVX2 both are the plain transpose.
    assert_eq!(transpose_tile(shuffles(), tile), plain);
}

/// Changing a LoRA's strength reads the weight again with the product added as it goes;
/// the first merge adds it to the loaded weight. Both must give the same weights, bit for
/// bit, or the same LoRA set would make another image after a change and back.
#[test]
fn a_merge_made_while_reading_equals_one_made_after_it_bit_for_bit() {
    for ([rows, cols], rank) in [([320, 320], 8), ([1280, 5120], 32), ([77, 640], 128)] {
        let values = pseudo_random(rows * cols, 4);
        let halves: Vec<half::f16> = values.iter().map(|&v| half::f16::from_f32(v)).collect();
        let (up, down) = (pseudo_random(rows * rank, 5), pseudo_random(rank * cols, 6));
        let update = LowRank {
            up: &up,
            down: &down,
            rank,
            scale: 0.8,
        };
        let mut fused = vec![0f32; rows * cols];
        widen_add_into(&halves, &mut fused, [rows, cols], true, Some(&update));
        let mut after = vec![0f32; rows * cols];
        widen_into(&halves, &mut after, [rows, cols], true);
        // As the first merge adds it: `downᵀ @ upᵀ` onto the `[in, out]` weight.
        let down_t = transposed(&down, [rank, cols]);
        let up_t = transposed(&up, [rows, rank]);
        crate::low_rank::add_product_into(
            &mut after,
            None,
            &down_t,
            &up_t,
            [cols, rows, rank],
            0.8,
        );
        assert_eq!(bits(&fused), bits(&after), "{rows}x{cols} rank {rank}");
    }
}
