//! Painting a mask: round stamps with a soft edge, and strokes that interpolate between
//! pointer positions so fast movements leave no gaps.

use inference::imaging::ImageGray8;

/// The brush: diameter in image pixels, hardness in [0, 1] (1 = a hard edge), and whether
/// it erases.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Brush {
    pub size: f32,
    pub hardness: f32,
    pub erase: bool,
}

impl Default for Brush {
    fn default() -> Self {
        Self {
            size: 48.0,
            hardness: 0.7,
            erase: false,
        }
    }
}

/// Coverage of a point at distance `d` from the centre of a brush of radius `r`: 1 inside
/// `r * hardness`, falling smoothly to 0 at `r`.
fn coverage(d: f32, r: f32, hardness: f32) -> f32 {
    let inner = r * hardness.clamp(0.0, 1.0);
    if d <= inner {
        1.0
    } else if d >= r {
        0.0
    } else {
        let t = (d - inner) / (r - inner);
        // Smoothstep falloff.
        1.0 - t * t * (3.0 - 2.0 * t)
    }
}

/// One stamp at `(cx, cy)` (image pixels): painting raises the mask towards 255, erasing
/// lowers it towards 0, each by the brush's coverage (never past what is there).
pub fn stamp(mask: &mut ImageGray8, (cx, cy): (f32, f32), brush: Brush) {
    let r = (brush.size / 2.0).max(0.5);
    let (w, h) = (mask.width as i64, mask.height as i64);
    let (x0, x1) = ((cx - r).floor() as i64, (cx + r).ceil() as i64);
    let (y0, y1) = ((cy - r).floor() as i64, (cy + r).ceil() as i64);
    for y in y0.max(0)..y1.min(h) {
        for x in x0.max(0)..x1.min(w) {
            let d = ((x as f32 + 0.5 - cx).powi(2) + (y as f32 + 0.5 - cy).powi(2)).sqrt();
            let c = coverage(d, r, brush.hardness);
            if c <= 0.0 {
                continue;
            }
            let v = &mut mask.pixels[(y * w + x) as usize];
            let level = (c * 255.0).round() as u8;
            *v = if brush.erase {
                (*v).min(255 - level)
            } else {
                (*v).max(level)
            };
        }
    }
}

/// Stamps from `from` to `to` every quarter radius (at least every pixel), `to` included.
pub fn stroke(mask: &mut ImageGray8, from: (f32, f32), to: (f32, f32), brush: Brush) {
    let spacing = (brush.size / 8.0).max(1.0);
    let (dx, dy) = (to.0 - from.0, to.1 - from.1);
    let steps = ((dx * dx + dy * dy).sqrt() / spacing).ceil().max(1.0) as usize;
    for i in 1..=steps {
        let t = i as f32 / steps as f32;
        stamp(mask, (from.0 + dx * t, from.1 + dy * t), brush);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank(w: u32, h: u32) -> ImageGray8 {
        ImageGray8 {
            width: w,
            height: h,
            pixels: vec![0; (w * h) as usize],
        }
    }

    #[test]
    fn a_fast_stroke_leaves_no_gaps() {
        let mut mask = blank(200, 40);
        let brush = Brush {
            size: 10.0,
            hardness: 1.0,
            erase: false,
        };
        stamp(&mut mask, (5.0, 20.0), brush);
        stroke(&mut mask, (5.0, 20.0), (195.0, 20.0), brush);
        for x in 5..195 {
            assert_eq!(mask.pixels[20 * 200 + x], 255, "gap at x = {x}");
        }
        assert_eq!(mask.pixels[2 * 200 + 100], 0, "painted outside the brush");
    }

    #[test]
    fn the_eraser_clears_and_soft_edges_fall_off() {
        let mut mask = blank(64, 64);
        let soft = Brush {
            size: 40.0,
            hardness: 0.0,
            erase: false,
        };
        stamp(&mut mask, (32.0, 32.0), soft);
        let (centre, edge) = (mask.pixels[32 * 64 + 32], mask.pixels[32 * 64 + 49]);
        assert!(centre > 240 && edge > 0 && edge < centre, "{centre} {edge}");
        stamp(
            &mut mask,
            (32.0, 32.0),
            Brush {
                size: 60.0,
                hardness: 1.0,
                erase: true,
            },
        );
        assert!(mask.pixels.iter().all(|&v| v == 0));
    }
}
