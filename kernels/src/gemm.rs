//! A safe front to the `gemm` crate's f32 matrix product over strided slices, the bounds
//! checked before the one unsafe call.

/// `dst = (accumulate ? dst : 0) + scale * lhs @ rhs` for row-major `dst` (`m x n`);
/// `lhs` is `m x k` and `rhs` is `k x n` with the given strides.
pub(crate) struct Gemm<'a> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub dst: &'a mut [f32],
    pub dst_row_stride: usize,
    pub accumulate: bool,
    pub lhs: &'a [f32],
    pub lhs_row_stride: usize,
    pub lhs_col_stride: usize,
    pub rhs: &'a [f32],
    pub rhs_row_stride: usize,
    pub rhs_col_stride: usize,
    pub scale: f32,
}

/// Checks that every index a strided `rows x cols` matrix reaches lies inside `len`.
fn fits(len: usize, rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> bool {
    rows == 0 || cols == 0 || (rows - 1) * row_stride + (cols - 1) * col_stride < len
}

/// [`Gemm`] on the calling thread.
pub(crate) fn gemm_f32(g: Gemm<'_>) {
    gemm_with(g, gemm::Parallelism::None);
}

/// [`Gemm`] split over the rayon pool (for one large product, not inside a parallel loop).
pub(crate) fn gemm_f32_parallel(g: Gemm<'_>) {
    gemm_with(g, gemm::Parallelism::Rayon(0));
}

fn gemm_with(g: Gemm<'_>, parallelism: gemm::Parallelism) {
    assert!(
        fits(g.dst.len(), g.m, g.n, g.dst_row_stride, 1),
        "gemm: destination too small"
    );
    assert!(
        fits(g.lhs.len(), g.m, g.k, g.lhs_row_stride, g.lhs_col_stride),
        "gemm: lhs too small"
    );
    assert!(
        fits(g.rhs.len(), g.k, g.n, g.rhs_row_stride, g.rhs_col_stride),
        "gemm: rhs too small"
    );
    let i = |x: usize| x as isize;
    // SAFETY: the asserts above guarantee every element the strided matrices address lies
    // inside its slice; `dst` is borrowed mutably and does not alias `lhs` or `rhs`.
    #[allow(unsafe_code)]
    unsafe {
        gemm::gemm(
            g.m,
            g.n,
            g.k,
            g.dst.as_mut_ptr(),
            1,
            i(g.dst_row_stride),
            g.accumulate,
            g.lhs.as_ptr(),
            i(g.lhs_col_stride),
            i(g.lhs_row_stride),
            g.rhs.as_ptr(),
            i(g.rhs_col_stride),
            i(g.rhs_row_stride),
            1.0,
            g.scale,
            false,
            false,
            false,
            parallelism,
        );
    }
}
