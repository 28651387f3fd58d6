//! Writing a result file for `ember generate` and `ember upscale`: atomically, in the format
//! `--out` names, never over a file it was not asked to replace.

use std::path::Path;

use inference::imaging::{self, ImageRgb8, SaveFormat, write_atomic};

/// Writes `image` atomically as `format` and prints its path. Settings too long for a
/// JPEG make a PNG beside it instead (`x.png` for `x.jpg`, or `x-1.png`… where that name is
/// taken: never over another file), with a warning naming it: never an image without its
/// settings, never a lost image.
pub(super) fn write_image(
    path: &Path,
    image: &ImageRgb8,
    format: SaveFormat,
    text: &[(&str, &str)],
) -> Result<(), String> {
    let err = |e: inference::Error| e.to_string();
    let encoded = imaging::encode_image(image, format, text).map_err(err)?;
    if encoded.format == format {
        write_atomic(path, &encoded.bytes).map_err(err)?;
        println!("{}", path.display());
        return Ok(());
    }
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let extension = encoded.format.extension();
    let mut n = 0;
    loop {
        let name = match n {
            0 => format!("{stem}.{extension}"),
            n => format!("{stem}-{n}.{extension}"),
        };
        let beside = path.with_file_name(name);
        if !beside.exists() && imaging::write_new(&beside, &encoded.bytes).map_err(err)? {
            let problem = encoded.problem.as_deref().unwrap_or_default();
            eprintln!(
                "warning: {problem}: written to {} instead of {}",
                beside.display(),
                path.display()
            );
            println!("{}", beside.display());
            return Ok(());
        }
        n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_too_long_for_a_jpeg_make_a_png_beside_it_never_over_a_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.png"), b"someone's").unwrap();
        let image = ImageRgb8 {
            width: 8,
            height: 8,
            pixels: vec![7; 8 * 8 * 3],
        };
        let long = "masterpiece, ".repeat(3000);
        let out = dir.path().join("x.jpg");
        let jpeg = SaveFormat::Jpeg { quality: 80 };
        write_image(&out, &image, jpeg, &[("parameters", &long)]).unwrap();
        assert!(!out.exists(), "no JPEG without its settings");
        assert_eq!(
            std::fs::read(dir.path().join("x.png")).unwrap(),
            b"someone's"
        );
        let text = imaging::read_image_text(&dir.path().join("x-1.png")).unwrap();
        assert_eq!(text[0].1, long);
    }
}
