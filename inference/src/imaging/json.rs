//! How images are kept in JSON files (the queue kept across a start-again): the pixels as
//! a base64 PNG, lossless and a fraction of the size of a list of numbers (a 4096² mask is
//! tens of kilobytes, not 50 MB). The list of numbers earlier versions wrote is still read.
//!
//! **Invariant:** what is read back has exactly `width * height` pixels of its kind, or is
//! refused with a message; a damaged file never makes an image of another size.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize, Serializer};

use super::{ImageGray8, ImageRgb8, check_input_size};

/// The JSON object of one image.
#[derive(Serialize, Deserialize)]
pub(super) struct Stored {
    width: u32,
    height: u32,
    /// The pixels as a PNG file, in base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    png: Option<String>,
    /// The pixels as numbers, as earlier versions wrote them (read, never written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pixels: Option<Vec<u8>>,
}

impl Stored {
    fn of(width: u32, height: u32, color: png::ColorType, pixels: &[u8]) -> Result<Self, String> {
        let mut bytes = Vec::new();
        let mut encoder = png::Encoder::new(&mut bytes, width, height);
        encoder.set_color(color);
        encoder.set_depth(png::BitDepth::Eight);
        // Written when the app starts again: speed over the last few percent of size.
        encoder.set_compression(png::Compression::Fast);
        let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
        writer.write_image_data(pixels).map_err(|e| e.to_string())?;
        writer.finish().map_err(|e| e.to_string())?;
        Ok(Stored {
            width,
            height,
            png: Some(STANDARD.encode(bytes)),
            pixels: None,
        })
    }

    /// The image's pixels, checked against its size.
    fn pixels(self, color: png::ColorType) -> Result<(u32, u32, Vec<u8>), String> {
        let (width, height) = (self.width, self.height);
        check_input_size(width, height)?;
        let len = width as usize * height as usize * color.samples();
        let pixels = match (self.png, self.pixels) {
            (Some(text), _) => decode_png(&text, (width, height), color, len)?,
            (None, Some(pixels)) => pixels,
            (None, None) => return Err("an image without pixels".into()),
        };
        if pixels.len() != len {
            return Err(format!(
                "a {width}x{height} image holds {} bytes, not {len}",
                pixels.len()
            ));
        }
        Ok((width, height, pixels))
    }
}

fn decode_png(
    text: &str,
    (width, height): (u32, u32),
    color: png::ColorType,
    len: usize,
) -> Result<Vec<u8>, String> {
    let bytes = STANDARD
        .decode(text)
        .map_err(|e| format!("an image's PNG is not base64 ({e})"))?;
    let limits = png::Limits {
        bytes: len.saturating_mul(2).saturating_add(1 << 20),
    };
    let bad = |e: png::DecodingError| format!("an image's PNG cannot be read ({e})");
    let mut reader = png::Decoder::new_with_limits(std::io::Cursor::new(bytes), limits)
        .read_info()
        .map_err(bad)?;
    let info = reader.info();
    if (info.width, info.height, info.color_type, info.bit_depth)
        != (width, height, color, png::BitDepth::Eight)
    {
        return Err(format!(
            "an image's PNG is {}x{} {:?} {:?}, not the {width}x{height} {color:?} 8-bit it is kept as",
            info.width, info.height, info.color_type, info.bit_depth
        ));
    }
    let mut pixels = vec![0; len];
    reader.next_frame(&mut pixels).map_err(bad)?;
    Ok(pixels)
}

impl Serialize for ImageRgb8 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Stored::of(self.width, self.height, png::ColorType::Rgb, &self.pixels)
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

impl TryFrom<Stored> for ImageRgb8 {
    type Error = String;
    fn try_from(stored: Stored) -> Result<Self, String> {
        let (width, height, pixels) = stored.pixels(png::ColorType::Rgb)?;
        Ok(ImageRgb8 {
            width,
            height,
            pixels,
        })
    }
}

impl Serialize for ImageGray8 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Stored::of(
            self.width,
            self.height,
            png::ColorType::Grayscale,
            &self.pixels,
        )
        .map_err(serde::ser::Error::custom)?
        .serialize(s)
    }
}

impl TryFrom<Stored> for ImageGray8 {
    type Error = String;
    fn try_from(stored: Stored) -> Result<Self, String> {
        let (width, height, pixels) = stored.pixels(png::ColorType::Grayscale)?;
        Ok(ImageGray8 {
            width,
            height,
            pixels,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rgb(width: u32, height: u32) -> ImageRgb8 {
        let pixels = (0..width * height * 3)
            .map(|i| (i * 7 % 256) as u8)
            .collect();
        ImageRgb8 {
            width,
            height,
            pixels,
        }
    }

    #[test]
    fn images_come_back_exactly_and_small() {
        let image = rgb(5, 3);
        let json = serde_json::to_string(&image).unwrap();
        assert!(json.contains("\"png\":"), "{json}");
        assert_eq!(serde_json::from_str::<ImageRgb8>(&json).unwrap(), image);
        // A large flat mask is kept in a few kilobytes, not a list of a million numbers.
        let mask = ImageGray8 {
            width: 1024,
            height: 1024,
            pixels: vec![255; 1 << 20],
        };
        let json = serde_json::to_string(&mask).unwrap();
        assert!(json.len() < 20_000, "{} bytes", json.len());
        assert_eq!(serde_json::from_str::<ImageGray8>(&json).unwrap(), mask);
    }

    #[test]
    fn the_number_lists_of_earlier_versions_are_read() {
        let old = r#"{"width": 2, "height": 1, "pixels": [0, 1, 2, 253, 254, 255]}"#;
        let image: ImageRgb8 = serde_json::from_str(old).unwrap();
        assert_eq!(image.pixels, [0, 1, 2, 253, 254, 255]);
    }

    #[test]
    fn pixels_that_do_not_fit_the_size_are_refused() {
        let gray = serde_json::to_string(&ImageGray8 {
            width: 5,
            height: 3,
            pixels: vec![9; 15],
        })
        .unwrap();
        for (json, says) in [
            (
                r#"{"width": 2, "height": 1, "pixels": [0, 1, 2]}"#,
                "holds 3 bytes, not 6",
            ),
            (r#"{"width": 2, "height": 1}"#, "without pixels"),
            (
                r#"{"width": 2, "height": 1, "png": "not base64!"}"#,
                "not base64",
            ),
            (
                r#"{"width": 2, "height": 1, "png": "aGVsbG8="}"#,
                "cannot be read",
            ),
            (r#"{"width": 0, "height": 1, "pixels": []}"#, "no pixels"),
            // A grayscale PNG where a colour image was kept.
            (&gray, "Grayscale"),
        ] {
            let error = serde_json::from_str::<ImageRgb8>(json)
                .unwrap_err()
                .to_string();
            assert!(error.contains(says), "{json}: {error}");
        }
    }
}
