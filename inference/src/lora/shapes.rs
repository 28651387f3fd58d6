//! Whether an adapter's factors multiply out, checked when the file is read and against the
//! weight it changes before anything is computed: [`super::delta`] indexes, multiplies and
//! reshapes them without checks, and a damaged or hand-made file must be an error naming
//! the tensor, never a panic (which would cost the worker its loaded model).

use burn::store::burn_pack::Tensor as PackTensor;

use super::file::{Factors, KrFactor};

fn shape(t: &PackTensor) -> &[usize] {
    t.shape.as_slice()
}

/// Product of every axis after the first (1 for a vector).
fn rest(s: &[usize]) -> usize {
    s.iter().skip(1).product()
}

/// `t` has at least two axes, none of them empty.
fn matrix_like(t: &PackTensor) -> Result<(), String> {
    let s = shape(t);
    if s.len() < 2 || s.contains(&0) {
        return Err(format!("`{}` has shape {s:?}, not a matrix", t.name));
    }
    Ok(())
}

/// `t`'s axes after the first two are all 1 (`[out, r, 1, 1]`): a matrix as PyTorch keeps
/// one for a 1×1 convolution.
fn flat_after_two(t: &PackTensor) -> Result<(), String> {
    let s = shape(t);
    if s.len() > 2 && s[2..].iter().any(|&v| v != 1) {
        return Err(format!(
            "`{}` has shape {s:?}, where only its first two axes may exceed 1",
            t.name
        ));
    }
    Ok(())
}

fn chain(a: &PackTensor, b: &PackTensor) -> Result<(), String> {
    if rest(shape(a)) != shape(b)[0] {
        return Err(format!(
            "`{}` {:?} and `{}` {:?} do not multiply",
            a.name,
            shape(a),
            b.name,
            shape(b)
        ));
    }
    Ok(())
}

/// Why `factors` do not make one weight change, if they do not.
pub fn check(factors: &Factors) -> Result<(), String> {
    match factors {
        Factors::LoRa { up, down, mid } => {
            matrix_like(up)?;
            matrix_like(down)?;
            match mid {
                None => chain(up, down),
                Some(mid) => {
                    matrix_like(mid)?;
                    chain(up, mid)?;
                    if shape(mid)[1] != shape(down)[0] {
                        return Err(format!(
                            "`{}` {:?} and `{}` {:?} have different ranks",
                            mid.name,
                            shape(mid),
                            down.name,
                            shape(down)
                        ));
                    }
                    Ok(())
                }
            }
        }
        Factors::LoHa(h) => {
            let pairs = [&h.w1, &h.w2];
            for (a, b) in pairs {
                matrix_like(a)?;
                matrix_like(b)?;
            }
            let sizes: Vec<(usize, usize)> = match &h.tucker {
                None => {
                    for (a, b) in pairs {
                        chain(a, b)?;
                    }
                    pairs
                        .iter()
                        .map(|(a, b)| (shape(a)[0], rest(shape(b))))
                        .collect()
                }
                // A Tucker core `[r, r, kh, kw]` between `b` `[r, in]` and `a` `[r, out]`.
                Some((t1, t2)) => {
                    let mut sizes = Vec::new();
                    for (t, (a, b)) in [(t1, &h.w1), (t2, &h.w2)] {
                        matrix_like(t)?;
                        flat_after_two(a)?;
                        flat_after_two(b)?;
                        let ranks = (shape(t)[0], shape(t)[1]);
                        if ranks != (shape(a)[0], shape(b)[0]) {
                            return Err(format!(
                                "`{}` {:?} does not fit `{}` {:?} and `{}` {:?}",
                                t.name,
                                shape(t),
                                a.name,
                                shape(a),
                                b.name,
                                shape(b)
                            ));
                        }
                        sizes.push((shape(a)[1], shape(b)[1] * rest(&shape(t)[1..])));
                    }
                    sizes
                }
            };
            // The two products are multiplied element by element: no broadcasting.
            if sizes[0] != sizes[1] {
                return Err(format!(
                    "`{}` and `{}` make changes of different sizes ({:?} and {:?})",
                    h.w1.0.name, h.w2.0.name, sizes[0], sizes[1]
                ));
            }
            Ok(())
        }
        Factors::LoKr { w1, w2 } => {
            for factor in [w1, w2] {
                match factor {
                    KrFactor::Full(w) => matrix_like(w)?,
                    KrFactor::Decomposed(a, b) => {
                        matrix_like(a)?;
                        matrix_like(b)?;
                        chain(a, b)?;
                    }
                }
            }
            Ok(())
        }
    }
}

/// Why an adapter whose change is `(out, cols)` in size does not fit a weight of `inputs`
/// input channels and `kernel` positions (`cols = inputs × kernel`), if it does not: a
/// LoKr's second factor must hold whole kernels, and DoRA's magnitude must have one value
/// per output or per input channel.
pub fn check_against(
    factors: &Factors,
    dora_scale: Option<&PackTensor>,
    (out, inputs, kernel): (usize, usize, usize),
) -> Result<(), String> {
    if let Factors::LoKr { w2, .. } = factors {
        let (name, columns) = match w2 {
            KrFactor::Full(w) => (&w.name, rest(shape(w))),
            KrFactor::Decomposed(_, b) => (&b.name, rest(shape(b))),
        };
        if kernel == 0 || columns % kernel != 0 {
            return Err(format!(
                "`{name}` has {columns} columns, not whole kernels of {kernel}"
            ));
        }
    }
    if let Some(m) = dora_scale {
        let s = shape(m);
        let n: usize = s.iter().product();
        // As `delta::dora` reads it: a first axis of 1 holds the inputs' values.
        let fits = match s.first() {
            None => false,
            Some(1) => n == inputs,
            Some(_) => n == out,
        };
        if !fits {
            return Err(format!(
                "`{}` has shape {s:?}: DoRA's magnitude has one value per output ({out}) or \
                 input ({inputs}) channel",
                m.name
            ));
        }
    }
    Ok(())
}
