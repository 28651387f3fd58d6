//! How results are saved: PNG (A1111's default), JPEG at a quality, or lossless WebP; the
//! settings go into each as A1111 writes them.

use inference::imaging::{DEFAULT_JPEG_QUALITY, SaveFormat};
use serde::{Deserialize, Serialize};

/// The file kinds the Output folder section offers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    #[default]
    Png,
    Jpeg,
    WebP,
}

impl FileKind {
    pub const ALL: [FileKind; 3] = [FileKind::Png, FileKind::Jpeg, FileKind::WebP];

    pub fn label(self) -> &'static str {
        match self {
            FileKind::Png => "PNG",
            FileKind::Jpeg => "JPEG",
            FileKind::WebP => "WebP (lossless)",
        }
    }
}

/// What the form holds; the quality is kept while another kind is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SaveSettings {
    pub kind: FileKind,
    /// 1–100 (a file's value outside that is brought into it).
    pub jpeg_quality: u8,
}

impl Default for SaveSettings {
    fn default() -> Self {
        Self {
            kind: FileKind::Png,
            jpeg_quality: DEFAULT_JPEG_QUALITY,
        }
    }
}

impl SaveSettings {
    pub fn format(&self) -> SaveFormat {
        match self.kind {
            FileKind::Png => SaveFormat::Png,
            FileKind::Jpeg => SaveFormat::Jpeg {
                quality: self.jpeg_quality.clamp(1, 100),
            },
            FileKind::WebP => SaveFormat::WebP,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_names_kinds_in_lowercase_and_a_bad_quality_is_brought_into_range() {
        let s: SaveSettings =
            serde_json::from_str(r#"{"kind": "jpeg", "jpeg_quality": 0}"#).unwrap();
        assert_eq!(s.format(), SaveFormat::Jpeg { quality: 1 });
        let s: SaveSettings = serde_json::from_str(r#"{"kind": "webp"}"#).unwrap();
        assert_eq!(
            (s.format(), s.jpeg_quality),
            (SaveFormat::WebP, DEFAULT_JPEG_QUALITY)
        );
        assert_eq!(SaveSettings::default().format(), SaveFormat::Png);
    }
}
