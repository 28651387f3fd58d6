//! Images in and out: decoding with limits, the pixel <-> [-1, 1] conversions diffusers
//! uses, masks, PNG files with text metadata written atomically, and the generation
//! settings any image carries (PNG text chunks, JPEG/WebP EXIF).

use std::io::Write;
use std::path::{Path, PathBuf};

use image::ImageReader;
use image::imageops::FilterType;

use crate::error::{Error, Result};

/// Largest width or height of an input image (a 16k image is already 1 GiB as float32).
pub const MAX_INPUT_SIDE: u32 = 16_384;
/// Largest decoding allocation for an input image.
const MAX_DECODE_BYTES: u64 = 1 << 30;

pub mod exif;
mod json;
mod save_format;

pub use save_format::{
    DEFAULT_JPEG_QUALITY, Encoded, SaveFormat, check_jpeg_quality, encode_image,
};

/// An 8-bit RGB image (plain data, row-major, 3 bytes per pixel). In JSON its pixels are a
/// base64 PNG.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "json::Stored")]
pub struct ImageRgb8 {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

/// An 8-bit single-channel image (a mask: white = repaint).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "json::Stored")]
pub struct ImageGray8 {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

/// The limits every input image meets, from a file or the clipboard: at most
/// [`MAX_INPUT_SIDE`] pixels a side and 1 GiB decoded as RGBA. `Err` says what is wrong.
pub fn check_input_size(width: u32, height: u32) -> std::result::Result<(), String> {
    let bytes = u64::from(width) * u64::from(height) * 4;
    if width == 0 || height == 0 {
        return Err(format!("image is {width}x{height}: it has no pixels"));
    }
    if width > MAX_INPUT_SIDE || height > MAX_INPUT_SIDE || bytes > MAX_DECODE_BYTES {
        return Err(format!(
            "image is {width}x{height}; Ember reads images up to {MAX_INPUT_SIDE} pixels a side"
        ));
    }
    Ok(())
}

fn decode(path: &Path) -> Result<image::DynamicImage> {
    let bad = |message: String| Error::invalid_image(path, message);
    let open = || -> Result<_> {
        ImageReader::open(path)
            .map_err(|e| Error::io(path, e))?
            .with_guessed_format()
            .map_err(|e| Error::io(path, e))
    };
    let probe = open()?;
    if probe.format().is_none() {
        return Err(bad(
            "not a readable image (Ember reads PNG, JPEG, WebP and BMP)".into(),
        ));
    }
    // Refuse huge images from their header, before any pixel memory is allocated.
    let (w, h) = probe
        .into_dimensions()
        .map_err(|e| bad(format!("not a readable image ({e})")))?;
    check_input_size(w, h).map_err(bad)?;
    let mut reader = open()?;
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_INPUT_SIDE);
    limits.max_image_height = Some(MAX_INPUT_SIDE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    reader
        .decode()
        .map_err(|e| bad(format!("corrupt or unsupported image ({e})")))
}

/// RGBA pixels made RGB as A1111's ControlNet extension does (`HWC3`): transparent pixels
/// over white, `color * a + 255 * (1 - a)` truncated.
pub fn rgba_over_white(width: u32, height: u32, rgba: &[u8]) -> ImageRgb8 {
    let pixels = rgba
        .chunks_exact(4)
        .flat_map(|p| {
            let a = f32::from(p[3]) / 255.0;
            [0, 1, 2].map(|c| (f32::from(p[c]) * a + 255.0 * (1.0 - a)).clamp(0.0, 255.0) as u8)
        })
        .collect();
    ImageRgb8 {
        width,
        height,
        pixels,
    }
}

/// Reads an image for a ControlNet: any transparency over white ([`rgba_over_white`]).
pub fn load_rgb_over_white(path: &Path) -> Result<ImageRgb8> {
    let rgba = decode(path)?.to_rgba8();
    let (width, height) = rgba.dimensions();
    Ok(rgba_over_white(width, height, rgba.as_raw()))
}

/// Reads an RGB image (any alpha is dropped), resized to `size` with Lanczos if it differs.
pub fn load_rgb(path: &Path, size: Option<(u32, u32)>) -> Result<ImageRgb8> {
    let mut img = decode(path)?.to_rgb8();
    if let Some((w, h)) = size.filter(|&(w, h)| (w, h) != img.dimensions()) {
        img = image::imageops::resize(&img, w, h, FilterType::Lanczos3);
    }
    let (width, height) = img.dimensions();
    Ok(ImageRgb8 {
        width,
        height,
        pixels: img.into_raw(),
    })
}

/// PIL's `convert("L")`: ITU-R 601-2 luma in 16-bit fixed point.
pub fn luminance([r, g, b]: [u8; 3]) -> u8 {
    ((u32::from(r) * 19595 + u32::from(g) * 38470 + u32::from(b) * 7471 + 0x8000) >> 16) as u8
}

/// Reads a mask as grayscale (PIL's `convert("L")` weights), resized to `size` if it differs.
pub fn load_mask(path: &Path, size: Option<(u32, u32)>) -> Result<ImageGray8> {
    let img = decode(path)?;
    let gray = match img {
        image::DynamicImage::ImageLuma8(g) => g,
        other => {
            let rgb = other.to_rgb8();
            let (w, h) = rgb.dimensions();
            let pixels = rgb.pixels().map(|p| luminance(p.0)).collect();
            image::GrayImage::from_raw(w, h, pixels).expect("buffer matches dimensions")
        }
    };
    let gray = match size.filter(|&(w, h)| (w, h) != gray.dimensions()) {
        Some((w, h)) => image::imageops::resize(&gray, w, h, FilterType::Lanczos3),
        None => gray,
    };
    let (width, height) = gray.dimensions();
    Ok(ImageGray8 {
        width,
        height,
        pixels: gray.into_raw(),
    })
}

/// `[3, h, w]` planar float32 in [-1, 1]: `2 * (v / 255) - 1`, as diffusers' image processor.
pub fn to_planar_signed(img: &ImageRgb8) -> Vec<f32> {
    let n = (img.width * img.height) as usize;
    let mut out = vec![0f32; 3 * n];
    for (i, px) in img.pixels.chunks_exact(3).enumerate() {
        for c in 0..3 {
            out[c * n + i] = 2.0 * (f32::from(px[c]) / 255.0) - 1.0;
        }
    }
    out
}

/// A mask binarised as diffusers does: `v / 255 >= 0.5` is 1 (repaint), else 0.
pub fn binarize(mask: &ImageGray8) -> Vec<f32> {
    mask.pixels
        .iter()
        .map(|&v| {
            if f32::from(v) / 255.0 >= 0.5 {
                1.0
            } else {
                0.0
            }
        })
        .collect()
}

/// Nearest-neighbour downscale of a `[h, w]` plane to `[h2, w2]` (torch `interpolate`,
/// mode `nearest`: source index `floor(dst * in / out)`).
pub fn resize_nearest(plane: &[f32], (w, h): (usize, usize), (w2, h2): (usize, usize)) -> Vec<f32> {
    let mut out = Vec::with_capacity(w2 * h2);
    for y in 0..h2 {
        let sy = ((y as f64 * h as f64 / h2 as f64).floor() as usize).min(h - 1);
        for x in 0..w2 {
            let sx = ((x as f64 * w as f64 / w2 as f64).floor() as usize).min(w - 1);
            out.push(plane[sy * w + sx]);
        }
    }
    out
}

/// Decoded `[3, h, w]` planar values (roughly [-1, 1]) to 8-bit RGB:
/// `round(clamp(x / 2 + 0.5, 0, 1) * 255)`, rounding half to even like numpy.
pub fn from_planar_signed(planar: &[f32], width: u32, height: u32) -> ImageRgb8 {
    let n = (width * height) as usize;
    let mut pixels = Vec::with_capacity(3 * n);
    for i in 0..n {
        for c in 0..3 {
            let v = (planar[c * n + i] / 2.0 + 0.5).clamp(0.0, 1.0);
            pixels.push((v * 255.0).round_ties_even() as u8);
        }
    }
    ImageRgb8 {
        width,
        height,
        pixels,
    }
}

/// Encodes an RGB PNG with `tEXt`/`iTXt` chunks (`iTXt` where the text is not Latin-1).
pub fn encode_png(img: &ImageRgb8, text: &[(&str, &str)]) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut bytes, img.width, img.height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let to_err = |e: png::EncodingError| Error::settings(format!("PNG encoding failed: {e}"));
        for (key, value) in text {
            let latin1 = value.chars().all(|c| (c as u32) < 256);
            if latin1 {
                encoder
                    .add_text_chunk(key.to_string(), value.to_string())
                    .map_err(to_err)?;
            } else {
                encoder
                    .add_itxt_chunk(key.to_string(), value.to_string())
                    .map_err(to_err)?;
            }
        }
        let mut writer = encoder.write_header().map_err(to_err)?;
        writer.write_image_data(&img.pixels).map_err(to_err)?;
        writer.finish().map_err(to_err)?;
    }
    Ok(bytes)
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder, flushed, then
/// renamed over the target. A crash never leaves a half-written file at `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let (dir, tmp) = temporary_beside(path, "tmp")?;
    let result = (|| {
        write_synced(&tmp, bytes)?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    sync_dir(dir);
    Ok(())
}

/// [`write_atomic`] for a file that must not replace another: `Ok(false)`, and nothing
/// written, when `path` exists, even when another process (a second Ember, another tool)
/// made it since the caller looked. The finished file is linked in place, which fails if
/// the name is taken; where the filesystem has no links (FAT) it is renamed after a check.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<bool> {
    let (dir, tmp) = temporary_beside(path, "new.tmp")?;
    let result = (|| {
        write_synced(&tmp, bytes)?;
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(_) if path.exists() => Ok(false),
            Err(_) => std::fs::rename(&tmp, path).map(|()| true),
        }
    })();
    let _ = std::fs::remove_file(&tmp);
    let written = result.map_err(|e| Error::io(path, e))?;
    if written {
        sync_dir(dir);
    }
    Ok(written)
}

/// The folder of `path` and a hidden temporary name in it (`.NAME.PID.SUFFIX`): a rename
/// within one folder is atomic, across filesystems it is not.
fn temporary_beside<'a>(path: &'a Path, suffix: &str) -> Result<(&'a Path, PathBuf)> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| Error::settings(format!("{} is not a file path", path.display())))?;
    let tmp = dir.join(format!(
        ".{}.{}.{suffix}",
        name.to_string_lossy(),
        std::process::id()
    ));
    Ok((dir, tmp))
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Makes a new name in `dir` durable (a power cut right after a save keeps the file), where
/// the system allows it; a folder that cannot be synced loses nothing already written.
fn sync_dir(dir: &Path) {
    if cfg!(unix)
        && let Ok(folder) = std::fs::File::open(dir)
    {
        let _ = folder.sync_all();
    }
}

/// Whether `path` starts as a PNG, JPEG or WebP file does, the formats that carry settings
/// (its name aside; BMP's two-byte mark could begin a safetensors header's length).
pub fn is_image_file(path: &Path) -> bool {
    let mut head = Vec::with_capacity(16);
    std::fs::File::open(path)
        .and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, 16), &mut head))
        .is_ok()
        && matches!(
            image::guess_format(&head),
            Ok(image::ImageFormat::Png | image::ImageFormat::Jpeg | image::ImageFormat::WebP)
        )
}

/// The text an image carries about how it was made, as PNG text-chunk entries (key, text):
/// the entries of its EXIF (a PNG's `eXIf`, a JPEG's or WebP's; see [`exif::text_entries`]),
/// then a PNG's text chunks. A format without either (BMP) has none.
pub fn read_image_text(path: &Path) -> Result<Vec<(String, String)>> {
    let reader = ImageReader::open(path)
        .map_err(|e| Error::io(path, e))?
        .with_guessed_format()
        .map_err(|e| Error::io(path, e))?;
    let readable = "not a readable image (Ember reads PNG, JPEG, WebP and BMP)";
    match reader.format() {
        Some(image::ImageFormat::Png) => read_png_text(path),
        Some(_) => {
            let mut decoder = reader
                .into_decoder()
                .map_err(|e| Error::invalid_image(path, format!("{readable}: {e}")))?;
            // A broken EXIF block loses the settings, never the image.
            let raw = image::ImageDecoder::exif_metadata(&mut decoder).unwrap_or_default();
            Ok(raw.map(|raw| exif::text_entries(&raw)).unwrap_or_default())
        }
        None => Err(Error::invalid_image(path, readable)),
    }
}

/// The entries of a PNG file's `eXIf` chunk, then its text chunks (`tEXt`, `zTXt`, `iTXt`)
/// in file order.
pub fn read_png_text(path: &Path) -> Result<Vec<(String, String)>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_ignore_text_chunk(false);
    let reader = decoder
        .read_info()
        .map_err(|e| Error::invalid_image(path, format!("not a readable PNG ({e})")))?;
    let info = reader.info();
    let mut out: Vec<(String, String)> = info
        .uncompressed_latin1_text
        .iter()
        .map(|c| (c.keyword.clone(), c.text.clone()))
        .collect();
    for chunk in &info.compressed_latin1_text {
        if let Ok(text) = chunk.get_text() {
            out.push((chunk.keyword.clone(), text));
        }
    }
    for chunk in &info.utf8_text {
        if let Ok(text) = chunk.get_text() {
            out.push((chunk.keyword.clone(), text));
        }
    }
    // First, as A1111 reads them: an EXIF comment wins over a `parameters` chunk.
    if let Some(raw) = &info.exif_metadata {
        out.splice(0..0, exif::text_entries(raw));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_never_replaces_one_made_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00001-7.png");
        assert!(write_new(&path, b"first").unwrap());
        // Another writer took the name: nothing is written, and it says so.
        assert!(!write_new(&path, b"second").unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(left.len(), 1, "no temporary file is left");
        let e = write_new(&dir.path().join("missing/x.png"), b"x").unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
    }
}
