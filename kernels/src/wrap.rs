//! Seamless tiling: convolutions that pad circularly on chosen axes (torch's
//! `padding_mode="circular"`) while the code inside [`with_wrap`] runs.
//!
//! A1111's "Tiling" makes an image tile by switching every `Conv2d` of the UNet and the VAE
//! to circular padding for one generation: the left edge then sees the right edge as its
//! neighbour, and the image continues across its borders. Here the pipeline runs the UNet
//! and the VAE inside [`with_wrap`] and [`crate::conv2d`] reads the setting, so the models'
//! forward passes carry no argument that only their padding reads. Like torch's `no_grad`
//! it belongs to the thread: the thread that runs the models is the one that set it, and
//! tests running side by side do not see each other's.

use std::cell::Cell;

use burn::nn::PaddingConfig2d;
use burn::nn::conv::Conv2d;
use burn::tensor::Tensor;

/// Which axes of an image wrap around.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wrap {
    /// Left and right edges meet (the image tiles side by side).
    pub x: bool,
    /// Top and bottom edges meet (the image tiles one above another).
    pub y: bool,
}

impl Wrap {
    pub const NONE: Wrap = Wrap { x: false, y: false };
    pub const BOTH: Wrap = Wrap { x: true, y: true };

    /// Whether any axis wraps.
    pub fn any(self) -> bool {
        self.x || self.y
    }
}

thread_local! {
    static CURRENT: Cell<Wrap> = const { Cell::new(Wrap::NONE) };
}

/// Runs `f` with the convolutions on this thread wrapping `wrap`'s axes; the setting before
/// comes back afterwards, also when `f` panics.
pub fn with_wrap<T>(wrap: Wrap, f: impl FnOnce() -> T) -> T {
    struct Restore(Wrap);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|current| current.set(self.0));
        }
    }
    let _restore = Restore(CURRENT.with(|current| current.replace(wrap)));
    f()
}

/// The axes this thread's convolutions wrap now.
pub fn current() -> Wrap {
    CURRENT.with(Cell::get)
}

/// `x` padded circularly by `vertical` rows above and below and `horizontal` columns left
/// and right: row `-1` is the last row, as torch's `F.pad(mode="circular")` (which also
/// allows a padding larger than the side, wrapping more than once).
///
/// # Shapes
/// - `x`: `[batch, channels, h, w]` -> `[batch, channels, h + 2·vertical, w + 2·horizontal]`
pub fn circular_pad(x: Tensor<4>, [vertical, horizontal]: [usize; 2]) -> Tensor<4> {
    let x = wrap_dim(x, 2, vertical);
    wrap_dim(x, 3, horizontal)
}

/// `x` extended by `pad` entries at both ends of `dim`, taken from the other end.
fn wrap_dim(x: Tensor<4>, dim: usize, pad: usize) -> Tensor<4> {
    let n = x.dims()[dim];
    if pad == 0 || n == 0 {
        return x;
    }
    if pad <= n {
        let before = x.clone().narrow(dim, n - pad, pad);
        let after = x.clone().narrow(dim, 0, pad);
        return Tensor::cat(vec![before, x, after], dim);
    }
    // More padding than entries: enough whole copies on each side, then the window.
    let copies = pad.div_ceil(n);
    let repeated = x.repeat_dim(dim, 2 * copies + 1);
    repeated.narrow(dim, copies * n - pad, n + 2 * pad)
}

/// `conv` on `x` with the padding circular where `wrap` asks: `x` is padded circularly
/// first, and `conv` runs with that padding taken off, or, where the CPU's Winograd path
/// takes it (which is written for its one pixel of zeros), with its padding kept and the
/// output's border (computed from those zeros) cut off: about 6% more work on a 64×64
/// latent instead of the im2col path's twice the multiplications.
///
/// Only an axis padded alike on both sides wraps. torch's own convolution padding is always
/// symmetric; the one asymmetric convolution in these models (the VAE encoder's
/// downsampler, padded right and bottom) stands for diffusers' and A1111's `F.pad` with
/// zeros before an unpadded convolution, which circular padding leaves alone.
pub(crate) fn convolve(x: Tensor<4>, conv: &Conv2d, wrap: Wrap) -> Tensor<4> {
    let PaddingConfig2d::Explicit(top, left, bottom, right) = conv.padding else {
        return crate::conv::convolve(x, conv);
    };
    let wrap_y = wrap.y && top == bottom && top > 0;
    let wrap_x = wrap.x && left == right && left > 0;
    if !(wrap_x || wrap_y) {
        return crate::conv::convolve(x, conv);
    }
    let vertical = if wrap_y { top } else { 0 };
    let horizontal = if wrap_x { left } else { 0 };
    if crate::conv::takes_winograd(&x, conv) {
        let [_, _, h, w] = x.dims();
        let y = crate::conv::convolve(circular_pad(x, [vertical, horizontal]), conv);
        return y.narrow(2, vertical, h).narrow(3, horizontal, w);
    }
    let mut unpadded = conv.clone();
    unpadded.padding = PaddingConfig2d::Explicit(
        top - vertical,
        left - horizontal,
        bottom - vertical,
        right - horizontal,
    );
    crate::conv::convolve(circular_pad(x, [vertical, horizontal]), &unpadded)
}

#[cfg(test)]
mod tests {
    use burn::nn::conv::Conv2dConfig;
    use burn::tensor::{Device, Distribution, TensorData};

    use super::*;
    use crate::test_support::rel_diff;

    fn random(dims: [usize; 4]) -> Tensor<4> {
        Tensor::random(dims, Distribution::Normal(0.0, 1.0), &Device::flex())
    }

    fn conv(c: [usize; 2], k: usize, stride: usize, padding: PaddingConfig2d) -> Conv2d {
        Conv2dConfig::new(c, [k, k])
            .with_stride([stride, stride])
            .with_padding(padding)
            .init(&Device::flex())
    }

    #[test]
    fn circular_padding_takes_rows_and_columns_from_the_other_side() {
        // A 2x3 image 0..6, padded by one row and two columns.
        let x = Tensor::<4>::from_data(
            TensorData::new((0..6).map(|v| v as f32).collect(), [1, 1, 2, 3]),
            &Device::flex(),
        );
        let padded = circular_pad(x.clone(), [1, 2])
            .into_data()
            .try_to_vec::<f32>()
            .unwrap();
        #[rustfmt::skip]
        let expected = [
            4., 5., 3., 4., 5., 3., 4.,
            1., 2., 0., 1., 2., 0., 1.,
            4., 5., 3., 4., 5., 3., 4.,
            1., 2., 0., 1., 2., 0., 1.,
        ];
        assert_eq!(padded, expected);
        // More padding than columns wraps more than once (torch allows it since 2.1).
        let wide = circular_pad(x, [0, 4])
            .into_data()
            .try_to_vec::<f32>()
            .unwrap();
        let row0: Vec<f32> = (0..11).map(|j| ((j + 3 * 3 - 4) % 3) as f32).collect();
        assert_eq!(&wide[..11], &row0[..]);
    }

    /// A convolution of a periodic image is circular: the image tiled 3x3 and convolved
    /// with zero padding holds, in its middle copy, what the wrapped convolution gives.
    #[test]
    fn wrapped_convolutions_equal_the_middle_of_a_tiled_image() {
        for (i, (dims, k, stride, pad)) in [
            ([2, 3, 6, 8], 3, 1, 1),
            ([1, 4, 8, 6], 3, 2, 1),
            ([1, 16, 10, 12], 3, 1, 1), // the CPU's Winograd size
            ([1, 2, 1, 1], 3, 1, 1),    // padding as large as the side
            ([1, 2, 5, 4], 5, 1, 2),
        ]
        .into_iter()
        .enumerate()
        {
            let [_, c, h, w] = dims;
            let layer = conv(
                [c, c.max(5)],
                k,
                stride,
                PaddingConfig2d::Explicit(pad, pad, pad, pad),
            );
            let x = random(dims);
            // The Winograd case keeps its padding and cuts the output's border instead.
            assert_eq!(crate::conv::takes_winograd(&x, &layer), i == 2, "case {i}");
            let wrapped = with_wrap(Wrap::BOTH, || crate::conv2d(x.clone(), &layer));
            let rows = Tensor::cat(vec![x.clone(), x.clone(), x.clone()], 2);
            let tiled = Tensor::cat(vec![rows.clone(), rows.clone(), rows], 3);
            let [_, _, oh, ow] = wrapped.dims();
            let reference = crate::reference::conv2d(tiled, &layer)
                .narrow(2, h / stride, oh)
                .narrow(3, w / stride, ow);
            let error = rel_diff(wrapped, reference);
            assert!(error < 1e-5, "case {i}: {error}");
        }
    }

    /// The UNet's and VAE's upsampler (nearest 2x, then a padded 3x3) wraps the upscaled
    /// image, on every backend (GPU backends otherwise fold the two into 2x2 kernels).
    #[test]
    fn the_upsamplers_convolution_wraps_too() {
        let layer = conv([3, 4], 3, 1, PaddingConfig2d::Explicit(1, 1, 1, 1));
        let x = random([1, 3, 4, 5]);
        let ours = with_wrap(Wrap::BOTH, || {
            crate::upsample_conv(x.clone(), &layer, [8, 10])
        });
        let rows = Tensor::cat(vec![x.clone(), x.clone(), x.clone()], 2);
        let tiled = Tensor::cat(vec![rows.clone(), rows.clone(), rows], 3);
        let reference = crate::reference::upsample_conv(tiled, &layer, [24, 30])
            .narrow(2, 8, 8)
            .narrow(3, 10, 10);
        assert!(rel_diff(ours, reference) < 1e-5);
    }

    /// On wgpu (lavapipe in CI) the wrapped convolution and upsampler give the CPU's values.
    #[cfg(feature = "wgpu")]
    #[test]
    fn wrapped_convolutions_run_on_wgpu() {
        use burn::module::Module;
        let gpu = crate::gpu::tests::wgpu();
        let layer = conv([8, 8], 3, 1, PaddingConfig2d::Explicit(1, 1, 1, 1));
        let x = random([1, 8, 6, 10]);
        let on = |device: &Device| {
            let (x, layer) = (x.clone().to_device(device), layer.clone().to_device(device));
            with_wrap(Wrap { x: true, y: false }, || {
                let y = crate::conv2d(x.clone(), &layer);
                let up = crate::upsample_conv(x, &layer, [12, 20]);
                (y.to_device(&Device::flex()), up.to_device(&Device::flex()))
            })
        };
        let (cpu, gpu) = (on(&Device::flex()), on(&gpu));
        assert!(rel_diff(gpu.0, cpu.0) < 1e-5);
        assert!(rel_diff(gpu.1, cpu.1) < 1e-5);
    }

    #[test]
    fn one_axis_wraps_and_the_other_keeps_its_zeros() {
        let layer = conv([3, 4], 3, 1, PaddingConfig2d::Explicit(1, 1, 1, 1));
        let x = random([1, 3, 5, 7]);
        let only_x = Wrap { x: true, y: false };
        let ours = with_wrap(only_x, || crate::conv2d(x.clone(), &layer));
        // Tiled side by side, zero-padded above and below.
        let tiled = Tensor::cat(vec![x.clone(), x.clone(), x.clone()], 3);
        let reference = crate::reference::conv2d(tiled, &layer).narrow(3, 7, 7);
        assert!(rel_diff(ours.clone(), reference) < 1e-5);
        let plain = crate::conv2d(x, &layer);
        assert!(rel_diff(ours, plain) > 1e-3, "the x axis wrapped");
    }

    #[test]
    fn unpadded_and_one_sided_convolutions_are_left_alone_and_the_setting_ends() {
        let x = random([1, 4, 6, 6]);
        // The VAE encoder's downsampler (zeros right and bottom) and a pointwise convolution.
        for layer in [
            conv([4, 4], 3, 2, PaddingConfig2d::Explicit(0, 0, 1, 1)),
            conv([4, 4], 1, 1, PaddingConfig2d::Valid),
        ] {
            let wrapped = with_wrap(Wrap::BOTH, || crate::conv2d(x.clone(), &layer));
            assert!(rel_diff(wrapped, crate::conv2d(x.clone(), &layer)) == 0.0);
        }
        assert_eq!(current(), Wrap::NONE);
        let panicked = std::panic::catch_unwind(|| with_wrap(Wrap::BOTH, || panic!("inside")));
        assert!(panicked.is_err());
        assert_eq!(current(), Wrap::NONE, "restored after a panic");
        let nested = with_wrap(Wrap::BOTH, || {
            with_wrap(Wrap::NONE, current) == Wrap::NONE && current() == Wrap::BOTH
        });
        assert!(nested);
    }
}
