//! Grid labels drawn into pixels: the Ubuntu font egui bundles, laid out left to right
//! (skrifa's metrics and outlines) and filled with vello_cpu's anti-aliased rasterizer.

use skrifa::instance::{LocationRef, Size};
use skrifa::outline::{DrawSettings, OutlinePen};
use skrifa::{FontRef, MetadataProvider};
use vello_cpu::kurbo::{Affine, BezPath};
use vello_cpu::{Pixmap, RenderContext, Resources};

/// The labels' font.
fn font() -> FontRef<'static> {
    FontRef::new(epaint_default_fonts::UBUNTU_LIGHT).expect("egui's bundled font reads")
}

/// Text at one size: its width and line height in pixels, and its coverage.
pub struct Font {
    size: f32,
}

impl Font {
    pub fn new(size: f32) -> Self {
        Self {
            size: size.max(1.0),
        }
    }

    pub fn size(&self) -> f32 {
        self.size
    }

    /// The advance width of `text` in pixels.
    pub fn width(&self, text: &str) -> f32 {
        let font = font();
        let charmap = font.charmap();
        let metrics = font.glyph_metrics(Size::new(self.size), LocationRef::default());
        text.chars()
            .map(|c| {
                let glyph = charmap.map(c).unwrap_or_default();
                metrics.advance_width(glyph).unwrap_or(0.0)
            })
            .sum()
    }

    /// Ascent to descent, the height a line takes.
    pub fn line_height(&self) -> f32 {
        let m = font().metrics(Size::new(self.size), LocationRef::default());
        m.ascent - m.descent
    }

    /// Draws `text` in `color` with the middle of its line at `(cx, cy)` (PIL's anchor
    /// "mm", as A1111 draws grid labels) onto `rgb` (`width` pixels a row).
    pub fn draw_centred(
        &self,
        text: &str,
        (cx, cy): (f32, f32),
        color: [u8; 3],
        (rgb, width): (&mut [u8], u32),
    ) {
        let font = font();
        let m = font.metrics(Size::new(self.size), LocationRef::default());
        let (w, h) = (
            self.width(text).ceil() as u32 + 2,
            self.line_height().ceil() as u32 + 2,
        );
        let (Ok(pw), Ok(ph)) = (u16::try_from(w), u16::try_from(h)) else {
            return;
        };
        let mut path = BezPath::new();
        let charmap = font.charmap();
        let metrics = font.glyph_metrics(Size::new(self.size), LocationRef::default());
        let outlines = font.outline_glyphs();
        let mut x = 1.0;
        for c in text.chars() {
            let glyph = charmap.map(c).unwrap_or_default();
            if let Some(outline) = outlines.get(glyph) {
                let mut pen = Pen {
                    path: &mut path,
                    origin: (x, 1.0 + m.ascent),
                };
                let settings = DrawSettings::unhinted(Size::new(self.size), LocationRef::default());
                // A glyph that cannot be drawn is left out; the rest of the label stays.
                let _ = outline.draw(settings, &mut pen);
            }
            x += metrics.advance_width(glyph).unwrap_or(0.0);
        }
        let mut ctx = RenderContext::new(pw, ph);
        ctx.set_paint(vello_cpu::color::palette::css::BLACK);
        ctx.set_transform(Affine::IDENTITY);
        ctx.fill_path(&path);
        ctx.flush();
        let mut pixmap = Pixmap::new(pw, ph);
        ctx.render(&mut pixmap, &mut Resources::new());
        let left = (cx - w as f32 / 2.0).round() as i64;
        let top = (cy - h as f32 / 2.0).round() as i64;
        let rows = rgb.len() as i64 / (3 * i64::from(width));
        for (i, px) in pixmap.data().iter().enumerate() {
            let (px_x, px_y) = (
                left + (i as i64 % i64::from(w)),
                top + (i as i64 / i64::from(w)),
            );
            if px.a == 0 || px_x < 0 || px_y < 0 || px_x >= i64::from(width) || px_y >= rows {
                continue;
            }
            let at = 3 * (px_y as usize * width as usize + px_x as usize);
            let alpha = u16::from(px.a);
            for (channel, ink) in rgb[at..at + 3].iter_mut().zip(color) {
                let blended = (u16::from(ink) * alpha + u16::from(*channel) * (255 - alpha)) / 255;
                *channel = blended as u8;
            }
        }
    }
}

/// Builds the path of one glyph, font units scaled already; y grows down in the picture.
struct Pen<'a> {
    path: &'a mut BezPath,
    origin: (f32, f32),
}

impl Pen<'_> {
    fn at(&self, x: f32, y: f32) -> (f64, f64) {
        (f64::from(self.origin.0 + x), f64::from(self.origin.1 - y))
    }
}

impl OutlinePen for Pen<'_> {
    fn move_to(&mut self, x: f32, y: f32) {
        let p = self.at(x, y);
        self.path.move_to(p);
    }
    fn line_to(&mut self, x: f32, y: f32) {
        let p = self.at(x, y);
        self.path.line_to(p);
    }
    fn quad_to(&mut self, cx0: f32, cy0: f32, x: f32, y: f32) {
        let (c, p) = (self.at(cx0, cy0), self.at(x, y));
        self.path.quad_to(c, p);
    }
    fn curve_to(&mut self, cx0: f32, cy0: f32, cx1: f32, cy1: f32, x: f32, y: f32) {
        let (c0, c1, p) = (self.at(cx0, cy0), self.at(cx1, cy1), self.at(x, y));
        self.path.curve_to(c0, c1, p);
    }
    fn close(&mut self) {
        self.path.close_path();
    }
}
