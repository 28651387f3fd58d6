//! One upscaling pass over an image in overlapping tiles, so a 4K output never needs the whole
//! network's activations at once. Tiles are blended with weights that ramp linearly across
//! the overlap (ComfyUI's `tiled_scale` feathering), so no seam shows.

use std::ops::ControlFlow;

use super::load::UpscaleModel;
use super::rrdbnet::pixel_unshuffle;
use crate::device::{tensor_from_vec, tensor_to_vec};
use crate::error::{Error, Result};

/// A float image, planar `[3, height, width]`.
pub struct Planar {
    pub width: usize,
    pub height: usize,
    pub data: Vec<f32>,
}

impl Planar {
    /// The `[3, h, w]` crop at `(x, y)`.
    fn crop(&self, (x, y): (usize, usize), (w, h): (usize, usize)) -> Vec<f32> {
        let mut out = Vec::with_capacity(3 * w * h);
        for c in 0..3 {
            for row in y..y + h {
                let start = c * self.width * self.height + row * self.width + x;
                out.extend_from_slice(&self.data[start..start + w]);
            }
        }
        out
    }

    /// Extends the right and bottom edges by repeating the last column / row, so both sides
    /// are multiples of `f` (a pixel-unshuffling model needs them).
    fn padded_to_multiple(&self, f: usize) -> Planar {
        let (w2, h2) = (self.width.div_ceil(f) * f, self.height.div_ceil(f) * f);
        if (w2, h2) == (self.width, self.height) {
            return Planar {
                width: w2,
                height: h2,
                data: self.data.clone(),
            };
        }
        let mut data = Vec::with_capacity(3 * w2 * h2);
        for c in 0..3 {
            for row in 0..h2 {
                let src = c * self.width * self.height + row.min(self.height - 1) * self.width;
                data.extend_from_slice(&self.data[src..src + self.width]);
                let last = self.data[src + self.width - 1];
                data.extend(std::iter::repeat_n(last, w2 - self.width));
            }
        }
        Planar {
            width: w2,
            height: h2,
            data,
        }
    }
}

/// Tile starts along one side of `n` pixels: A1111's `range(0, n - tile, stride) + [n - tile]`,
/// every start a multiple of `align`.
pub fn tile_starts(n: usize, tile: usize, overlap: usize, align: usize) -> Vec<usize> {
    if tile >= n {
        return vec![0];
    }
    let stride = (tile - overlap).max(align) / align * align;
    let mut starts: Vec<usize> = (0..n - tile).step_by(stride).collect();
    starts.push(n - tile);
    starts
}

/// The blending weight of output position `x` in a tile of `len` output pixels: a linear ramp
/// over `ramp` pixels at each side that borders another tile, 1 elsewhere.
fn edge_weight(x: usize, len: usize, ramp: usize, (left, right): (bool, bool)) -> f32 {
    let ramp = ramp.max(1) as f32;
    let mut w = 1f32;
    if left {
        w = w.min((x as f32 + 0.5) / ramp);
    }
    if right {
        w = w.min(((len - x) as f32 - 0.5) / ramp);
    }
    w
}

/// Runs `model` once over `image` (values in [0, 1]) in tiles of `tile` input pixels with
/// `overlap` pixels shared between neighbours. `on_tile(done, total)` may cancel.
///
/// # Shapes
/// - `image`: `[3, h, w]` -> `[3, h * scale, w * scale]` (scale = the model's), not clamped
pub fn run_tiled(
    model: &UpscaleModel,
    image: &Planar,
    (tile, overlap): (usize, usize),
    on_tile: &mut dyn FnMut(usize, usize) -> ControlFlow<()>,
) -> Result<Planar> {
    let f = model.config.unshuffle;
    let padded = image.padded_to_multiple(f);
    let scale = model.scale();
    let tile_w = (tile.min(padded.width) / f * f).max(f);
    let tile_h = (tile.min(padded.height) / f * f).max(f);
    let xs = tile_starts(padded.width, tile_w, overlap, f);
    let ys = tile_starts(padded.height, tile_h, overlap, f);
    let (out_w, out_h) = (padded.width * scale, padded.height * scale);
    let mut sum = vec![0f32; 3 * out_w * out_h];
    let mut weight = vec![0f32; out_w * out_h];
    let total = xs.len() * ys.len();
    let ramp = overlap * scale;
    let mut done = 0;
    for &y in &ys {
        for &x in &xs {
            let mut input = padded.crop((x, y), (tile_w, tile_h));
            let (mut w, mut h) = (tile_w, tile_h);
            if f > 1 {
                input = pixel_unshuffle(&input, 3, (w, h), f);
                (w, h) = (w / f, h / f);
            }
            let channels = 3 * f * f;
            let x_in = tensor_from_vec(input, [1, channels, h, w], &model.device);
            let out = model.network.forward(x_in);
            let [_, _, oh, ow] = out.dims();
            debug_assert_eq!((ow, oh), (tile_w * scale, tile_h * scale));
            let out = tensor_to_vec(out);
            let sides_x = (x > 0, x + tile_w < padded.width);
            let sides_y = (y > 0, y + tile_h < padded.height);
            let wx: Vec<f32> = (0..ow).map(|i| edge_weight(i, ow, ramp, sides_x)).collect();
            for row in 0..oh {
                let wy = edge_weight(row, oh, ramp, sides_y);
                let out_row = y * scale + row;
                for (col, wxc) in wx.iter().enumerate() {
                    let wgt = wy * wxc;
                    let at = out_row * out_w + x * scale + col;
                    weight[at] += wgt;
                    for c in 0..3 {
                        sum[c * out_w * out_h + at] += out[(c * oh + row) * ow + col] * wgt;
                    }
                }
            }
            done += 1;
            if on_tile(done, total).is_break() {
                return Err(Error::Cancelled);
            }
        }
    }
    let (w, h) = (image.width * scale, image.height * scale);
    let mut data = Vec::with_capacity(3 * w * h);
    for c in 0..3 {
        for row in 0..h {
            let start = row * out_w;
            data.extend(
                sum[c * out_w * out_h + start..][..w]
                    .iter()
                    .zip(&weight[start..start + w])
                    .map(|(s, wgt)| s / wgt),
            );
        }
    }
    Ok(Planar {
        width: w,
        height: h,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_the_side_and_end_flush() {
        assert_eq!(tile_starts(100, 256, 32, 1), vec![0]);
        assert_eq!(tile_starts(500, 256, 32, 1), vec![0, 224, 244]);
        assert_eq!(tile_starts(512, 256, 32, 1), vec![0, 224, 256]);
        // Aligned to 2 for an unshuffling model.
        assert_eq!(tile_starts(10, 6, 3, 2), vec![0, 2, 4]);
    }

    #[test]
    fn edge_weights_ramp_only_towards_neighbours() {
        assert_eq!(edge_weight(0, 8, 4, (false, false)), 1.0);
        assert_eq!(edge_weight(0, 8, 4, (true, false)), 0.125);
        assert_eq!(edge_weight(3, 8, 4, (true, false)), 0.875);
        assert_eq!(edge_weight(7, 8, 4, (false, true)), 0.125);
    }
}
