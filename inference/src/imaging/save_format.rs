//! The formats results are saved in (PNG, JPEG, lossless WebP), each with the settings in
//! the place A1111 puts them: PNG text chunks, or an EXIF UserComment.

use serde::{Deserialize, Serialize};

use super::{ImageRgb8, encode_png, exif};
use crate::error::{Error, Result};

/// A JPEG's EXIF lives in one APP1 segment: 65,535 bytes less its length field and the
/// `Exif\0\0` header.
const MAX_JPEG_EXIF: usize = 65_535 - 2 - 6;

/// How a result is written. Stored in settings by its lowercase name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SaveFormat {
    /// Lossless, the settings in a `parameters` text chunk (A1111's default).
    #[default]
    Png,
    /// Lossy at `quality` (1–100; A1111's default is 80), the settings in EXIF.
    Jpeg { quality: u8 },
    /// Lossless WebP (the `image` crate writes no lossy WebP), the settings in EXIF.
    WebP,
}

/// A1111's default JPEG quality (`jpeg_quality`).
pub const DEFAULT_JPEG_QUALITY: u8 = 80;

impl SaveFormat {
    /// The file extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            SaveFormat::Png => "png",
            SaveFormat::Jpeg { .. } => "jpg",
            SaveFormat::WebP => "webp",
        }
    }

    /// The format a file name asks for (`.png`, `.jpg`/`.jpeg`, `.webp`, any case), JPEGs at
    /// `jpeg_quality`.
    pub fn for_path(path: &std::path::Path, jpeg_quality: u8) -> Option<SaveFormat> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "png" => Some(SaveFormat::Png),
            "jpg" | "jpeg" => Some(SaveFormat::Jpeg {
                quality: jpeg_quality,
            }),
            "webp" => Some(SaveFormat::WebP),
            _ => None,
        }
    }
}

/// Refuses a JPEG quality outside 1–100, in words.
pub fn check_jpeg_quality(quality: u8) -> std::result::Result<(), String> {
    if (1..=100).contains(&quality) {
        Ok(())
    } else {
        Err(format!("JPEG quality must be 1 to 100, got {quality}"))
    }
}

/// A result encoded for saving, and the format it really took.
pub struct Encoded {
    pub bytes: Vec<u8>,
    pub format: SaveFormat,
    /// Why the format differs from the one asked for.
    pub problem: Option<String>,
}

/// Encodes `img` as `format` with its text entries: all of them as PNG chunks, or one as
/// an EXIF UserComment, as A1111 keeps one text in a JPEG or WebP: the `parameters`, else
/// the `extras` line (A1111's Extras tab writes only that one; Ember keeps a source's
/// settings, which are what can be made again). Settings too long for a JPEG's EXIF segment
/// are never dropped: the image is a PNG then, and `problem` says so.
pub fn encode_image(img: &ImageRgb8, format: SaveFormat, text: &[(&str, &str)]) -> Result<Encoded> {
    let entry = |name: &str| {
        text.iter()
            .find(|(key, value)| *key == name && !value.is_empty())
            .map(|(_, value)| *value)
    };
    let comment = entry("parameters").or_else(|| entry("extras"));
    let exif = comment
        .map(exif::a1111_exif)
        .transpose()
        .map_err(Error::settings)?;
    let png = |problem: Option<String>| -> Result<Encoded> {
        Ok(Encoded {
            bytes: encode_png(img, text)?,
            format: SaveFormat::Png,
            problem,
        })
    };
    // Only the encoders that need an `image` buffer copy the pixels (192 MB at 64 MP).
    let rgb = || {
        image::RgbImage::from_raw(img.width, img.height, img.pixels.clone())
            .ok_or_else(|| Error::settings("image pixels do not match its size"))
    };
    let mut bytes = Vec::new();
    let encoded = match format {
        SaveFormat::Png => return png(None),
        SaveFormat::Jpeg { quality } => {
            check_jpeg_quality(quality).map_err(Error::settings)?;
            if exif.as_ref().is_some_and(|e| e.len() > MAX_JPEG_EXIF) {
                return png(Some(format!(
                    "its settings ({} characters) are too long for a JPEG's EXIF; saved as PNG",
                    comment.map_or(0, |p| p.chars().count())
                )));
            }
            let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, quality);
            write_with_exif(encoder, exif, &rgb()?)
        }
        SaveFormat::WebP => {
            let encoder = image::codecs::webp::WebPEncoder::new_lossless(&mut bytes);
            write_with_exif(encoder, exif, &rgb()?)
        }
    };
    encoded.map_err(|e| Error::settings(format!("could not encode the image: {e}")))?;
    Ok(Encoded {
        bytes,
        format,
        problem: None,
    })
}

fn write_with_exif(
    mut encoder: impl image::ImageEncoder,
    exif: Option<Vec<u8>>,
    rgb: &image::RgbImage,
) -> image::ImageResult<()> {
    if let Some(exif) = exif {
        encoder
            .set_exif_metadata(exif)
            .map_err(image::ImageError::Unsupported)?;
    }
    encoder.write_image(
        rgb.as_raw(),
        rgb.width(),
        rgb.height(),
        image::ExtendedColorType::Rgb8,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picture() -> ImageRgb8 {
        ImageRgb8 {
            width: 16,
            height: 8,
            pixels: (0..16 * 8 * 3).map(|i| (i * 7 % 256) as u8).collect(),
        }
    }

    fn read_back(bytes: &[u8]) -> Vec<(String, String)> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("image");
        std::fs::write(&path, bytes).unwrap();
        super::super::read_image_text(&path).unwrap()
    }

    #[test]
    fn every_format_keeps_the_settings_and_the_size() {
        let text = "a fox \u{1d11e}\nSteps: 20, Seed: 1";
        let entries = [
            ("parameters", text),
            ("extras", "Postprocess upscale by: 2"),
        ];
        for format in [
            SaveFormat::Png,
            SaveFormat::Jpeg { quality: 90 },
            SaveFormat::WebP,
        ] {
            let encoded = encode_image(&picture(), format, &entries).unwrap();
            assert_eq!(encoded.format, format);
            assert!(encoded.problem.is_none());
            let back = read_back(&encoded.bytes);
            let parameters = back.iter().find(|(k, _)| k == "parameters");
            assert_eq!(
                parameters.map(|(_, v)| v.as_str()),
                Some(text),
                "{format:?}"
            );
            let img = image::load_from_memory(&encoded.bytes).unwrap();
            assert_eq!((img.width(), img.height()), (16, 8), "{format:?}");
        }
        let webp = encode_image(&picture(), SaveFormat::WebP, &[]).unwrap();
        let img = image::load_from_memory(&webp.bytes).unwrap().to_rgb8();
        assert_eq!(img.into_raw(), picture().pixels, "WebP is lossless");
    }

    #[test]
    fn an_upscale_without_settings_keeps_its_extras_line() {
        let extras = "Postprocess upscale by: 4, Postprocess upscaler: x4";
        let webp = encode_image(&picture(), SaveFormat::WebP, &[("extras", extras)]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.webp");
        std::fs::write(&path, &webp.bytes).unwrap();
        let mut decoder = image::ImageReader::open(&path)
            .unwrap()
            .with_guessed_format()
            .unwrap()
            .into_decoder()
            .unwrap();
        let exif = image::ImageDecoder::exif_metadata(&mut decoder)
            .unwrap()
            .unwrap();
        let comment = exif::a1111_user_comment(extras);
        assert!(
            exif.windows(comment.len()).any(|w| w == comment.as_slice()),
            "the extras line is the comment, as A1111's Extras tab writes it"
        );
    }

    #[test]
    fn settings_too_long_for_a_jpeg_make_a_png_and_say_so() {
        let long = "masterpiece, ".repeat(3000);
        let jpeg = SaveFormat::Jpeg { quality: 80 };
        let encoded = encode_image(&picture(), jpeg, &[("parameters", &long)]).unwrap();
        assert_eq!(encoded.format, SaveFormat::Png);
        assert!(encoded.problem.unwrap().contains("too long for a JPEG"));
        assert_eq!(read_back(&encoded.bytes)[0].1, long);
        let bad = encode_image(&picture(), SaveFormat::Jpeg { quality: 0 }, &[]);
        assert!(bad.err().unwrap().to_string().contains("1 to 100"));
    }

    #[test]
    fn names_choose_formats() {
        let of = |name: &str| SaveFormat::for_path(std::path::Path::new(name), 85);
        assert_eq!(of("a.PNG"), Some(SaveFormat::Png));
        assert_eq!(of("a.jpeg"), Some(SaveFormat::Jpeg { quality: 85 }));
        assert_eq!(of("a.jpg"), Some(SaveFormat::Jpeg { quality: 85 }));
        assert_eq!(of("a.webp"), Some(SaveFormat::WebP));
        assert_eq!(of("a.gif"), None);
        assert_eq!(of("a"), None);
    }
}
