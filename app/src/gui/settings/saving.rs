//! How results are saved: PNG (A1111's default), JPEG at a quality, or lossless WebP; the
//! settings go into each as A1111 writes them.

use inference::imaging::{DEFAULT_JPEG_QUALITY, SaveFormat};
use serde::{Deserialize, Serialize};

/// The file kinds the Output folder section offers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FileKind {
    #[default]
    Png,
    Jpeg,
    WebP,
}

impl FileKind {
    pub const ALL: [FileKind; 3] = [FileKind::Png, FileKind::Jpeg, FileKind::WebP];

    /// The name the settings file stores.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Png => "png",
            FileKind::Jpeg => "jpeg",
            FileKind::WebP => "webp",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            FileKind::Png => "PNG",
            FileKind::Jpeg => "JPEG",
            FileKind::WebP => "WebP (lossless)",
        }
    }
}

impl super::Named for FileKind {
    fn name(self) -> &'static str {
        FileKind::name(self)
    }
    fn from_name(name: &str) -> Option<Self> {
        FileKind::ALL.into_iter().find(|k| k.name() == name)
    }
    const FALLBACK: Self = FileKind::Png;
}

/// What the form holds; the quality is kept while another kind is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SaveSettings {
    /// Stored as png, jpeg or webp (another name, a newer version's, reads as png).
    #[serde(with = "super::by_name")]
    pub kind: FileKind,
    /// 1–100 (a file's value outside that, or not a number, is brought into it).
    #[serde(deserialize_with = "quality_in_range")]
    pub jpeg_quality: u8,
}

/// Any number read as a quality in 1–100, so that one odd value never costs the whole file.
fn quality_in_range<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    Ok(match value.as_f64() {
        Some(q) if q.is_finite() => q.round().clamp(1.0, 100.0) as u8,
        _ => DEFAULT_JPEG_QUALITY,
    })
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
    fn kinds_are_stored_by_name_and_odd_values_never_fail_the_file() {
        let read = |json: &str| serde_json::from_str::<SaveSettings>(json).unwrap();
        let s = read(r#"{"kind": "jpeg", "jpeg_quality": 0}"#);
        assert_eq!(s.format(), SaveFormat::Jpeg { quality: 1 });
        let s = read(r#"{"kind": "webp"}"#);
        assert_eq!(
            (s.format(), s.jpeg_quality),
            (SaveFormat::WebP, DEFAULT_JPEG_QUALITY)
        );
        let s = read(r#"{"kind": "avif", "jpeg_quality": 300}"#);
        assert_eq!(
            (s.kind, s.jpeg_quality),
            (FileKind::Png, 100),
            "a newer file loads"
        );
        assert_eq!(
            read(r#"{"jpeg_quality": "high"}"#).jpeg_quality,
            DEFAULT_JPEG_QUALITY
        );
        let kept = SaveSettings {
            kind: FileKind::Jpeg,
            jpeg_quality: 91,
        };
        assert_eq!(read(&serde_json::to_string(&kept).unwrap()), kept);
        assert_eq!(SaveSettings::default().format(), SaveFormat::Png);
    }
}
