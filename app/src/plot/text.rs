//! Grid labels drawn into pixels: the Ubuntu font egui bundles, and for characters it lacks
//! (Japanese, Chinese, Arabic…) the system's font for them, as the window finds it; laid out
//! left to right (skrifa's metrics and outlines) and filled with vello_cpu's anti-aliased
//! rasterizer.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use egui::epaint::text::{FallbackRequest, FontData, FontFamily, FontProvider};
use egui_system_font_provider::SystemFontProvider;
use skrifa::instance::{LocationRef, Size};
use skrifa::outline::{DrawSettings, OutlinePen};
use skrifa::{FontRef, GlyphId, MetadataProvider};
use vello_cpu::kurbo::{Affine, BezPath};
use vello_cpu::{Pixmap, RenderContext, Resources};

/// The labels' font.
fn font() -> FontRef<'static> {
    FontRef::new(epaint_default_fonts::UBUNTU_LIGHT).expect("egui's bundled font reads")
}

/// The font and glyph for `c`: Ubuntu's where it has one, else the system font the OS's
/// fallback gives (looked up once per character, each font kept for the process), else
/// Ubuntu's missing-glyph box.
fn glyph(c: char) -> (FontRef<'static>, GlyphId) {
    let ubuntu = font();
    if let Some(g) = ubuntu.charmap().map(c) {
        return (ubuntu, g);
    }
    fallback(c)
        .and_then(|data| {
            let font = FontRef::from_index((*data.font).as_ref(), data.index).ok()?;
            let g = font.charmap().map(c)?;
            Some((font, g))
        })
        .unwrap_or((ubuntu, GlyphId::NOTDEF))
}

/// The system font for a character the bundled one lacks. Enumerating the system's fonts
/// takes a moment, so it happens only when a label needs it.
fn fallback(c: char) -> Option<&'static FontData> {
    static SYSTEM: LazyLock<SystemFontProvider> = LazyLock::new(SystemFontProvider::new);
    /// Each character's font, and each font by name (leaked once: a few per process).
    type Found = (
        HashMap<char, Option<&'static FontData>>,
        HashMap<String, &'static FontData>,
    );
    static FOUND: LazyLock<Mutex<Found>> = LazyLock::new(Mutex::default);
    let mut found = FOUND.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = found.0.get(&c) {
        return *known;
    }
    let mut buffer = [0u8; 4];
    let request = FallbackRequest {
        cluster: c.encode_utf8(&mut buffer),
        family: &FontFamily::Proportional,
    };
    let data = SYSTEM.font_for(&request).map(|insert| {
        *found
            .1
            .entry(insert.name)
            .or_insert_with(|| Box::leak(Box::new(insert.data)))
    });
    found.0.insert(c, data);
    data
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
        text.chars().map(|c| self.advance(glyph(c))).sum()
    }

    fn advance(&self, (font, g): (FontRef<'_>, GlyphId)) -> f32 {
        font.glyph_metrics(Size::new(self.size), LocationRef::default())
            .advance_width(g)
            .unwrap_or(0.0)
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
        let mut x = 1.0;
        for c in text.chars() {
            let (face, g) = glyph(c);
            if let Some(outline) = face.outline_glyphs().get(g) {
                let mut pen = Pen {
                    path: &mut path,
                    origin: (x, 1.0 + m.ascent),
                };
                let settings = DrawSettings::unhinted(Size::new(self.size), LocationRef::default());
                // A glyph that cannot be drawn is left out; the rest of the label stays.
                let _ = outline.draw(settings, &mut pen);
            }
            x += self.advance((face, g));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_the_bundled_font_lacks_come_from_the_systems_fonts() {
        let (_, a) = glyph('a');
        assert_ne!(a, GlyphId::NOTDEF, "Latin is the bundled font's");
        // `./test.sh` installs Droid Sans Fallback where the machine has no CJK font.
        for c in ['日', '本', '語'] {
            let (face, g) = glyph(c);
            assert_ne!(
                g,
                GlyphId::NOTDEF,
                "no system font draws {c:?} (install fonts-droid-fallback or fonts-noto-cjk)"
            );
            assert!(
                face.outline_glyphs().get(g).is_some(),
                "{c:?} has an outline"
            );
        }
        let font = Font::new(24.0);
        // Ideographs are square: about a font size each.
        assert!(
            font.width("日本") > 1.5 * font.size(),
            "{}",
            font.width("日本")
        );
        let (width, height) = (80u32, 40u32);
        let mut rgb = vec![255u8; (3 * width * height) as usize];
        font.draw_centred("日本", (40.0, 20.0), [0, 0, 0], (&mut rgb, width));
        let ink = rgb.iter().filter(|&&v| v < 128).count();
        assert!(ink > 100, "the label left {ink} dark values");
    }
}
