//! The mean of a float32 tensor as PyTorch's CPU kernel computes it (`cascade_sum` in
//! `aten/src/ATen/native/cpu/SumKernel.cpp` with 8-lane vectors, then a float32 division),
//! bit for bit. A1111's "Original" emphasis divides by such means of whole chunks, whose true
//! value can be tiny next to their terms: a sum in another order differs in the fifth digit,
//! and the conditioning with it.

const LANES: usize = 8;
/// Vectors summed side by side (`ilp_factor`).
const ILP: usize = 4;
/// Levels of partial sums (`num_levels`).
const LEVELS: usize = 4;

type Lanes = [f32; LANES];

fn add(a: &mut Lanes, b: &Lanes) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += *y;
    }
}

fn ceil_log2(n: usize) -> usize {
    if n <= 1 {
        0
    } else {
        (usize::BITS - (n - 1).leading_zeros()) as usize
    }
}

/// `multi_row_sum`: `rows` rows of `ILP` vectors, summed per column through levels of
/// partial sums.
fn multi_row_sum(vectors: &[Lanes], rows: usize) -> [Lanes; ILP] {
    let power = (ceil_log2(rows) / LEVELS).max(4);
    let step = 1usize << power;
    let mask = step - 1;
    let mut acc = [[[0f32; LANES]; ILP]; LEVELS];
    let mut i = 0;
    while i + step <= rows {
        for _ in 0..step {
            for k in 0..ILP {
                add(&mut acc[0][k], &vectors[i * ILP + k]);
            }
            i += 1;
        }
        for j in 1..LEVELS {
            let (lower, upper) = acc.split_at_mut(j);
            for (high, low) in upper[0].iter_mut().zip(lower[j - 1].iter_mut()) {
                add(high, low);
                *low = [0.0; LANES];
            }
            if i & (mask << (j * power)) != 0 {
                break;
            }
        }
    }
    while i < rows {
        for k in 0..ILP {
            add(&mut acc[0][k], &vectors[i * ILP + k]);
        }
        i += 1;
    }
    let (first, rest) = acc.split_at_mut(1);
    for level in rest.iter() {
        for (total, partial) in first[0].iter_mut().zip(level) {
            add(total, partial);
        }
    }
    acc[0]
}

/// PyTorch's float32 sum of contiguous `values`.
pub fn torch_sum(values: &[f32]) -> f32 {
    let whole = values.len() / LANES;
    let vectors: Vec<Lanes> = values[..whole * LANES]
        .chunks_exact(LANES)
        .map(|c| c.try_into().expect("LANES values"))
        .collect();
    let rows = whole / ILP;
    let mut partial = multi_row_sum(&vectors, rows);
    for vector in &vectors[rows * ILP..] {
        add(&mut partial[0], vector);
    }
    for k in 1..ILP {
        let column = partial[k];
        add(&mut partial[0], &column);
    }
    let mut total = 0f32;
    for &v in &values[whole * LANES..] {
        total += v;
    }
    for lane in partial[0] {
        total += lane;
    }
    total
}

/// PyTorch's float32 `mean()` of contiguous `values` (their sum, divided in float32).
pub fn torch_mean(values: &[f32]) -> f32 {
    torch_sum(values) / values.len().max(1) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_small_inputs_exactly_and_large_ones_closely() {
        assert_eq!(torch_sum(&[]), 0.0);
        assert_eq!(torch_sum(&[1.5, 2.0, -0.5]), 3.0);
        let values: Vec<f32> = (0..10_000)
            .map(|i| ((i * 7919) % 1000) as f32 / 7.0)
            .collect();
        let exact: f64 = values.iter().map(|&v| f64::from(v)).sum();
        let ours = f64::from(torch_sum(&values));
        assert!((ours - exact).abs() / exact < 1e-6, "{ours} vs {exact}");
    }
}
