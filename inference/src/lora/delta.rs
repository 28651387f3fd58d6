//! The weight change of each adapter kind, in f32, as A1111's `networks` computes it (the
//! reference tree's README gives the formulas): LoRA / LoCon `up @ (mid) @ down`, LoHa's
//! Hadamard product of two low-rank products (Tucker cores for convolutions), LoKr's
//! Kronecker product, and DoRA's magnitude rescaling.

use burn::store::bridge;
use burn::store::burn_pack::Tensor as PackTensor;
use burn::tensor::{Device, Tensor, TensorData};

use super::file::{Adapter, Factors, KrFactor};
use crate::error::{Error, Result};

/// `data` as a flat f32 tensor on `device`.
pub fn flat_f32(data: &TensorData, device: &Device) -> Result<Tensor<1>> {
    let values = data
        .clone()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .map_err(|e| Error::settings(format!("a LoRA weight is not a float tensor ({e:?})")))?;
    let n = values.len();
    Ok(Tensor::<1>::from_data(TensorData::new(values, [n]), device))
}

fn shape(t: &PackTensor) -> &[usize] {
    t.shape.as_slice()
}

fn rest(s: &[usize]) -> usize {
    s.iter().skip(1).product()
}

/// `(rows, columns)` of a LoKr factor.
fn kr_dims(f: &KrFactor) -> (usize, usize) {
    match f {
        KrFactor::Full(w) => (shape(w)[0], rest(shape(w))),
        KrFactor::Decomposed(a, b) => (shape(a)[0], rest(shape(b))),
    }
}

/// The `(out, in × kernel)` size of the weight an adapter changes, from its factors' shapes
/// (checked against the model before anything is computed).
pub fn target_size(adapter: &Adapter) -> (usize, usize) {
    match &adapter.factors {
        Factors::LoRa { up, down, mid } => {
            let kernel = mid.as_ref().map_or(1, |m| shape(m)[2..].iter().product());
            (shape(up)[0], rest(shape(down)) * kernel)
        }
        Factors::LoHa(h) => match &h.tucker {
            // Tucker stores the `_a` factors transposed: [r, out].
            Some((t1, _)) => (shape(&h.w1.0)[1], shape(&h.w1.1)[1] * rest(&shape(t1)[1..])),
            None => (shape(&h.w1.0)[0], rest(shape(&h.w1.1))),
        },
        Factors::LoKr { w1, w2 } => {
            let ((om, im), (on, rest2)) = (kr_dims(w1), kr_dims(w2));
            (om * on, im * rest2)
        }
    }
}

/// A factor as an f32 matrix `[rows, columns]` (trailing axes flattened).
fn matrix(t: &PackTensor, device: &Device) -> Result<Tensor<2>> {
    let data = bridge::to_data(t)
        .map_err(|e| Error::settings(format!("LoRA tensor `{}`: {e}", t.name)))?;
    let s = shape(t);
    Ok(flat_f32(&data, device)?.reshape([s[0], rest(s)]))
}

/// A plain LoRA's `(up, down)` factors for a linear layer; `None` for other kinds.
fn plain_linear_lora(adapter: &Adapter) -> Option<(&PackTensor, &PackTensor)> {
    match &adapter.factors {
        Factors::LoRa {
            up,
            down,
            mid: None,
        } if shape(up).len() == 2 || rest(&shape(up)[1..]) == 1 => Some((up, down)),
        _ => None,
    }
}

/// A plain LoRA's factors for a linear layer as f32 values.
pub struct LinearFactors {
    /// `[out, rank]`
    pub up: Vec<f32>,
    /// `[rank, in]`
    pub down: Vec<f32>,
    pub rank: usize,
}

/// A plain LoRA's factors for a linear layer; `None` for other kinds and for DoRA.
pub fn plain_linear_factors(adapter: &Adapter) -> Result<Option<LinearFactors>> {
    let Some((up, down)) = plain_linear_lora(adapter).filter(|_| adapter.dora_scale.is_none())
    else {
        return Ok(None);
    };
    let values = |t: &PackTensor| -> Result<Vec<f32>> {
        let data = bridge::to_data(t)
            .map_err(|e| Error::settings(format!("LoRA tensor `{}`: {e}", t.name)))?;
        data.convert::<f32>()
            .try_into_vec::<f32>()
            .map_err(|e| Error::settings(format!("LoRA tensor `{}`: {e:?}", t.name)))
    };
    Ok(Some(LinearFactors {
        up: values(up)?,
        down: values(down)?,
        rank: shape(down)[0],
    }))
}

/// Where a merged weight may be written.
pub enum Destination {
    /// Into the weight's own buffer: nothing needs the loaded value (it can be read from
    /// the file again).
    InPlace,
    /// The loaded weight must stay as it is; this buffer of its size (the previous merge's
    /// result), when there is one, may be written over.
    Reuse(Option<Box<Tensor<1>>>),
}

/// A plain LoRA merged into a linear weight held `[in, out]` (Burn's layout):
/// `w + factor · downᵀ · upᵀ`, written where `destination` says when it can be (see
/// [`kernels::low_rank`]), with no full-size transpose, product or scaling pass (the
/// weights are up to 10 M elements, the factors a few thousand).
fn merge_linear_lora(
    w: Tensor<2>,
    (up, down): (&PackTensor, &PackTensor),
    factor: f32,
    destination: Destination,
    device: &Device,
) -> Result<Tensor<2>> {
    let up = matrix(up, device)?;
    let down = matrix(down, device)?;
    let dims = w.dims();
    let (lhs, rhs) = (down.transpose(), up.transpose());
    Ok(match destination {
        Destination::InPlace => kernels::low_rank::add_product_in_place(w, lhs, rhs, factor),
        Destination::Reuse(reuse) => {
            let reuse = reuse.map(|t| (*t).reshape(dims));
            kernels::low_rank::add_product(w, lhs, rhs, factor, reuse)
        }
    })
}

/// The unscaled change `ΔW` of one adapter, flattened in the weight's (PyTorch) order, for a
/// weight of `(out, in × kernel)` elements with `kernel` positions per input channel.
pub fn delta(adapter: &Adapter, kernel: usize, device: &Device) -> Result<Tensor<1>> {
    let (out, cols) = target_size(adapter);
    let flat = |t: Tensor<2>| t.reshape([out * cols]);
    Ok(match &adapter.factors {
        Factors::LoRa {
            up,
            down,
            mid: None,
        } => flat(matrix(up, device)?.matmul(matrix(down, device)?)),
        Factors::LoRa {
            up,
            down,
            mid: Some(mid),
        } => {
            // ΔW[o,i,k] = Σ_pq up[o,p] mid[p,q,k] down[q,i]
            let (up, down) = (matrix(up, device)?, matrix(down, device)?);
            let q = shape(mid)[1];
            let k = rest(&shape(mid)[1..]);
            let a = up.matmul(matrix(mid, device)?); // [o, q * k]
            let inputs = cols / k;
            let a = a.reshape([out, q, k]).swap_dims(1, 2).reshape([out * k, q]);
            let b = a.matmul(down); // [o * k, i]
            b.reshape([out, k, inputs])
                .swap_dims(1, 2)
                .reshape([out * cols])
        }
        Factors::LoHa(h) => {
            let (w1, w2) = (&h.w1, &h.w2);
            match &h.tucker {
                None => {
                    let one = matrix(&w1.0, device)?.matmul(matrix(&w1.1, device)?);
                    let two = matrix(&w2.0, device)?.matmul(matrix(&w2.1, device)?);
                    flat(one * two)
                }
                Some((t1, t2)) => {
                    let one = tucker_product(t1, &w1.1, &w1.0, out, device)?;
                    let two = tucker_product(t2, &w2.1, &w2.0, out, device)?;
                    one * two
                }
            }
        }
        Factors::LoKr { w1, w2 } => {
            let w1 = kr_matrix(w1, device)?; // [om, im]
            let w2 = kr_matrix(w2, device)?; // [on, in * kernel]
            let [om, im] = w1.dims();
            let [on, rest2] = w2.dims();
            let inputs = rest2 / kernel;
            let a = w1.reshape([om, 1, im, 1, 1]);
            let b = w2.reshape([1, on, 1, inputs, kernel]);
            (a * b).reshape([out * cols])
        }
    })
}

fn kr_matrix(f: &KrFactor, device: &Device) -> Result<Tensor<2>> {
    match f {
        KrFactor::Full(w) => matrix(w, device),
        KrFactor::Decomposed(a, b) => Ok(matrix(a, device)?.matmul(matrix(b, device)?)),
    }
}

/// `einsum('ijkl,jr,ip->prkl', t, b, a)`: a Tucker core `t` `[r, r, kh, kw]` with `b`
/// `[r, in]` and `a` `[r, out]`, flattened as `[out, in, kh, kw]`.
fn tucker_product(
    t: &PackTensor,
    b: &PackTensor,
    a: &PackTensor,
    out: usize,
    device: &Device,
) -> Result<Tensor<1>> {
    let [i, j] = [shape(t)[0], shape(t)[1]];
    let k = rest(&shape(t)[1..]);
    let t = matrix(t, device)?
        .reshape([i, j, k])
        .swap_dims(1, 2)
        .reshape([i * k, j]);
    let b = matrix(b, device)?; // [j, in]
    let inputs = b.dims()[1];
    let tb = t.matmul(b).reshape([i, k * inputs]); // [i, k * in]
    let a = matrix(a, device)?; // [i, out]
    let atb = a.transpose().matmul(tb); // [out, k * in]
    Ok(atb
        .reshape([out, k, inputs])
        .swap_dims(1, 2)
        .reshape([out * inputs * k]))
}

/// A1111's `apply_weight_decompose`: with `V = W + update`, `W' = W + strength × (V × m / n − W)`
/// where `n` holds the norms of V's input columns (over the output and kernel axes). A
/// magnitude `[out, 1]` broadcasts as `m[o] / n[i]`, as in A1111.
pub fn dora(
    w: Tensor<1>,
    update: Tensor<1>,
    magnitude: &PackTensor,
    (out, inputs, kernel): (usize, usize, usize),
    strength: f32,
    device: &Device,
) -> Result<Tensor<1>> {
    let v = (w.clone() + update).reshape([out, inputs, kernel]);
    let norms = v.clone().powi_scalar(2).sum_dim(2).sum_dim(0).sqrt(); // [1, in, 1]
    let m = matrix(magnitude, device)?;
    let m = if m.dims()[0] == 1 {
        m.reshape([1, inputs, 1])
    } else {
        m.reshape([out, 1, 1])
    };
    let scaled = (v * m / norms).reshape([out * inputs * kernel]);
    Ok(w.clone() + (scaled - w).mul_scalar(strength))
}

/// `w` (flat, in the network's layout: Burn's `[in, out]` for a linear layer, PyTorch's for
/// a convolution) with `updates` merged, in f32 as A1111 merges them, written where
/// `destination` says when it can be.
pub fn merge_weight(
    w: Tensor<1>,
    dims: &[usize],
    updates: &[(f32, &Adapter)],
    destination: Destination,
    device: &Device,
) -> Result<Tensor<1>> {
    let n: usize = dims.iter().product();
    let linear = dims.len() == 2;
    // `(out, in, kernel)` in PyTorch's terms.
    let (out, inputs, kernel) = if linear {
        (dims[1], dims[0], 1)
    } else {
        (dims[0], dims[1], dims[2..].iter().product())
    };
    let to_torch = |t: Tensor<1>| {
        if linear {
            t.reshape([inputs, out]).transpose().reshape([n])
        } else {
            t
        }
    };
    let from_torch = |t: Tensor<1>| {
        if linear {
            t.reshape([out, inputs]).transpose().reshape([n])
        } else {
            t
        }
    };
    // A weight in another format is converted into a new buffer, which is this merge's own.
    let converted = w.dtype() != burn::tensor::DType::F32;
    let mut w = w.cast(burn::tensor::DType::F32);
    let mut destination = match destination {
        Destination::Reuse(_) if converted => Destination::InPlace,
        other => other,
    };
    for (strength, adapter) in updates {
        if linear
            && adapter.dora_scale.is_none()
            && let Some(factors) = plain_linear_lora(adapter)
        {
            let factor = adapter.scale() * strength;
            let w2 = w.reshape([inputs, out]);
            let here = std::mem::replace(&mut destination, Destination::InPlace);
            w = merge_linear_lora(w2, factors, factor, here, device)?.reshape([n]);
            continue;
        }
        // Every other kind makes a new tensor, which the next update may write into.
        destination = Destination::InPlace;
        let change = delta(adapter, kernel, device)?.mul_scalar(adapter.scale());
        w = match &adapter.dora_scale {
            Some(m) => from_torch(dora(
                to_torch(w),
                change,
                m,
                (out, inputs, kernel),
                *strength,
                device,
            )?),
            None => w + from_torch(change.mul_scalar(*strength)),
        };
    }
    Ok(w)
}
