//! The canvas mode's runtime state: the source image, the mask being painted with its undo
//! history (one snapshot per stroke), the brush, the view (zoom and pan) and the textures
//! that show them. Painting is pure image work ([`brush`]); nothing here touches files.

pub mod brush;

use std::collections::HashSet;

use egui::{Color32, ColorImage, TextureHandle, TextureOptions};
use inference::canvas::{self as ops, Extension};
use inference::imaging::{ImageGray8, ImageRgb8};
use inference::worker::JobId;

use super::texture;
use brush::Brush;

/// Strokes that can be undone, at most...
const HISTORY: usize = 64;
/// ...and at most this many bytes of mask snapshots (64 masks of a 4096² canvas would
/// be 1 GiB); the oldest go first, the last stroke can always be undone.
const HISTORY_BYTES: usize = 128 << 20;

/// See the module docs.
#[derive(Default)]
pub struct CanvasState {
    /// The image being worked on; `None` until one is loaded.
    pub source: Option<ImageRgb8>,
    /// The mask at the source's size (255 = repaint).
    pub mask: Option<ImageGray8>,
    undo: Vec<ImageGray8>,
    redo: Vec<ImageGray8>,
    pub brush: Brush,
    /// 1 = fit the panel; the view scales by this and shifts by `pan` (screen points).
    pub zoom: f32,
    pub pan: egui::Vec2,
    /// The last pointer position of the stroke in progress (image pixels).
    stroke_at: Option<(f32, f32)>,
    source_texture: Option<TextureHandle>,
    overlay_texture: Option<TextureHandle>,
    overlay_dirty: bool,
    /// The last inpainting result: (composited, raw generation at the canvas size).
    pub result: Option<(ImageRgb8, ImageRgb8)>,
    pub result_texture: Option<TextureHandle>,
    /// Show the raw generation instead of the composite.
    pub show_raw: bool,
    /// The size canvas jobs generate at (Create's size is its own): the image's, rounded
    /// down to multiples of 8, unless changed in the form.
    pub size: (u32, u32),
    /// What to do next, after an edit whose effect waits for Generate (outpainting).
    pub hint: Option<String>,
    /// The jobs made from the image on the canvas now: only their results become its
    /// result (one made from an image since replaced or outpainted is saved, not shown
    /// here, where Outpaint would go on from it).
    pub jobs_from_source: HashSet<JobId>,
}

impl CanvasState {
    /// Starts over with `image` and an empty mask.
    pub fn set_source(&mut self, image: ImageRgb8) {
        self.mask = Some(ImageGray8 {
            width: image.width,
            height: image.height,
            pixels: vec![0; (image.width * image.height) as usize],
        });
        self.size = ops::generation_size(image.width, image.height);
        self.source = Some(image);
        self.jobs_from_source.clear();
        self.undo.clear();
        self.redo.clear();
        self.source_texture = None;
        self.overlay_dirty = true;
        self.hint = None;
        self.zoom = 1.0;
        self.pan = egui::Vec2::ZERO;
    }

    /// Whether any pixel is masked.
    pub fn has_mask(&self) -> bool {
        self.mask
            .as_ref()
            .is_some_and(|m| m.pixels.iter().any(|&v| v > 0))
    }

    pub fn can_undo(&self) -> bool {
        !self.undo.is_empty()
    }

    pub fn can_redo(&self) -> bool {
        !self.redo.is_empty()
    }

    /// Remembers the mask before a change.
    fn checkpoint(&mut self) {
        if let Some(mask) = &self.mask {
            self.undo.push(mask.clone());
            let bytes = |undo: &[ImageGray8]| undo.iter().map(|m| m.pixels.len()).sum::<usize>();
            while self.undo.len() > 1
                && (self.undo.len() > HISTORY || bytes(&self.undo) > HISTORY_BYTES)
            {
                self.undo.remove(0);
            }
            self.redo.clear();
        }
    }

    /// Starts a stroke at `at` (image pixels).
    pub fn begin_stroke(&mut self, at: (f32, f32)) {
        self.checkpoint();
        if let Some(mask) = &mut self.mask {
            brush::stamp(mask, at, self.brush);
            self.stroke_at = Some(at);
            self.overlay_dirty = true;
        }
    }

    /// Continues the stroke to `at`, filling the path from the last position.
    pub fn stroke_to(&mut self, at: (f32, f32)) {
        let Some(from) = self.stroke_at else {
            return self.begin_stroke(at);
        };
        if let Some(mask) = &mut self.mask {
            brush::stroke(mask, from, at, self.brush);
            self.stroke_at = Some(at);
            self.overlay_dirty = true;
        }
    }

    pub fn end_stroke(&mut self) {
        self.stroke_at = None;
    }

    pub fn undo(&mut self) {
        if let (Some(previous), Some(mask)) = (self.undo.pop(), self.mask.as_mut()) {
            self.redo.push(std::mem::replace(mask, previous));
            self.overlay_dirty = true;
        }
    }

    pub fn redo(&mut self) {
        if let (Some(next), Some(mask)) = (self.redo.pop(), self.mask.as_mut()) {
            self.undo.push(std::mem::replace(mask, next));
            self.overlay_dirty = true;
        }
    }

    pub fn clear_mask(&mut self) {
        self.checkpoint();
        if let Some(mask) = &mut self.mask {
            mask.pixels.fill(0);
            self.overlay_dirty = true;
        }
    }

    pub fn invert_mask(&mut self) {
        self.checkpoint();
        if let Some(mask) = &mut self.mask {
            *mask = ops::invert(mask);
            self.overlay_dirty = true;
        }
    }

    /// Uses `mask` (any size; resized to the source) as the mask, undoably.
    pub fn load_mask(&mut self, mask: ImageGray8) {
        let Some(source) = &self.source else {
            return;
        };
        let size = (source.width, source.height);
        let resized = if (mask.width, mask.height) == size {
            mask
        } else {
            let img = image::GrayImage::from_raw(mask.width, mask.height, mask.pixels)
                .expect("buffer matches size");
            let img = image::imageops::resize(
                &img,
                size.0,
                size.1,
                image::imageops::FilterType::Lanczos3,
            );
            ImageGray8 {
                width: size.0,
                height: size.1,
                pixels: img.into_raw(),
            }
        };
        self.checkpoint();
        self.mask = Some(resized);
        self.overlay_dirty = true;
    }

    /// Grows the canvas for outpainting: the new area is stretched from the edges and
    /// masked; what was painted stays painted. Clears the undo history (sizes change). A
    /// canvas that would grow past the images Ember reads is left as it is, and the hint says why
    /// (its jobs could not be kept across a start-again, nor its image opened again).
    pub fn outpaint(&mut self, ext: Extension) {
        let (Some(source), Some(mask)) = (&self.source, &self.mask) else {
            return;
        };
        let at = ops::outpaint_placement((source.width, source.height), ext);
        let grows_to = (
            source
                .width
                .saturating_add(at.left)
                .saturating_add(at.right),
            source.height.saturating_add(at.up).saturating_add(at.down),
        );
        if inference::imaging::check_input_size(grows_to.0, grows_to.1).is_err() {
            self.hint = Some(format!(
                "The canvas stays {}×{}: grown it would be {}×{}, past the largest image \
                 Ember reads ({} pixels a side).",
                source.width,
                source.height,
                grows_to.0,
                grows_to.1,
                inference::imaging::MAX_INPUT_SIDE
            ));
            return;
        }
        let (grown, mut combined) = ops::outpaint(source, ext);
        // The old mask goes where the source went.
        let (w, old_w) = (grown.width as usize, mask.width as usize);
        for y in 0..mask.height as usize {
            for x in 0..old_w {
                let v = &mut combined.pixels[(y + at.up as usize) * w + x + at.left as usize];
                *v = (*v).max(mask.pixels[y * old_w + x]);
            }
        }
        self.size = ops::generation_size(grown.width, grown.height);
        self.hint = Some(format!(
            "The canvas is now {}×{}; the new border is masked. Press Generate to fill it.",
            grown.width, grown.height
        ));
        self.source = Some(grown);
        self.jobs_from_source.clear();
        self.mask = Some(combined);
        self.undo.clear();
        self.redo.clear();
        self.source_texture = None;
        self.overlay_dirty = true;
    }

    /// The source image's own width and height, in the pixels the mask is painted in (its
    /// texture may be smaller: [`texture`]).
    pub fn source_size(&self) -> Option<egui::Vec2> {
        let source = self.source.as_ref()?;
        Some(egui::vec2(source.width as f32, source.height as f32))
    }

    /// The source and mask textures, made or refreshed for this frame.
    pub fn textures(
        &mut self,
        ctx: &egui::Context,
        opacity: f32,
    ) -> Option<(TextureHandle, TextureHandle)> {
        let source = self.source.as_ref()?;
        if self.source_texture.is_none() {
            self.source_texture = Some(texture::load(
                ctx,
                "canvas-source",
                super::app::color_image(source),
                TextureOptions::LINEAR,
            ));
        }
        if self.overlay_dirty || self.overlay_texture.is_none() {
            let mask = self.mask.as_ref()?;
            let overlay = overlay_image(mask, opacity);
            match &mut self.overlay_texture {
                Some(t) => texture::set(t, ctx, overlay, TextureOptions::NEAREST),
                None => {
                    let overlay =
                        texture::load(ctx, "canvas-mask", overlay, TextureOptions::NEAREST);
                    self.overlay_texture = Some(overlay);
                }
            }
            self.overlay_dirty = false;
        }
        Some((self.source_texture.clone()?, self.overlay_texture.clone()?))
    }

    /// The overlay must be redrawn (its opacity changed).
    pub fn refresh_overlay(&mut self) {
        self.overlay_dirty = true;
    }
}

/// The mask as a translucent red layer.
fn overlay_image(mask: &ImageGray8, opacity: f32) -> ColorImage {
    let pixels = mask
        .pixels
        .iter()
        .map(|&v| {
            let a = (f32::from(v) * opacity.clamp(0.0, 1.0)).round() as u8;
            Color32::from_rgba_unmultiplied(255, 40, 40, a)
        })
        .collect();
    ColorImage {
        size: [mask.width as usize, mask.height as usize],
        pixels,
        source_size: egui::Vec2::new(mask.width as f32, mask.height as f32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undo_history_is_bounded_by_bytes() {
        let mut canvas = CanvasState::default();
        canvas.set_source(ImageRgb8 {
            width: 2048,
            height: 2048,
            pixels: vec![0; 2048 * 2048 * 3],
        });
        for _ in 0..HISTORY {
            canvas.checkpoint();
        }
        let per_mask = 2048 * 2048;
        assert_eq!(canvas.undo.len(), HISTORY_BYTES / per_mask);
        assert!(canvas.can_undo());
    }

    #[test]
    fn outpainting_stops_at_the_largest_image_ember_reads() {
        let side = inference::imaging::MAX_INPUT_SIDE;
        let mut canvas = CanvasState::default();
        canvas.set_source(ImageRgb8 {
            width: side - 64,
            height: 8,
            pixels: vec![9; (side as usize - 64) * 8 * 3],
        });
        let wider = |left| Extension {
            left,
            ..Extension::default()
        };
        canvas.outpaint(wider(64));
        assert_eq!(
            canvas.source.as_ref().unwrap().width,
            side,
            "up to the limit"
        );
        canvas.outpaint(wider(64));
        let (source, mask) = (
            canvas.source.as_ref().unwrap(),
            canvas.mask.as_ref().unwrap(),
        );
        assert_eq!((source.width, mask.width), (side, side), "not past it");
        let hint = canvas.hint.clone().unwrap_or_default();
        assert!(
            hint.starts_with(&format!(
                "The canvas stays {side}×8: grown it would be {}×8, past the largest image \
                 Ember reads ({side} pixels a side).",
                side + 64
            )),
            "{hint}"
        );
    }
}
