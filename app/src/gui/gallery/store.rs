//! The gallery's file work, done on background threads: saving results (numbered
//! `00042-<seed>.png` or `.jpg`/`.webp`, written atomically, with A1111 metadata), listing
//! the output folder,
//! reading images, their metadata and thumbnails, and moving images to the trash.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use inference::imaging::{self, ImageRgb8, SaveFormat};
use inference::metadata::{self, ImageMetadata};
use inference::worker::JobId;

/// Extensions the gallery lists.
const IMAGE_EXTENSIONS: [&str; 4] = ["png", "jpg", "jpeg", "webp"];

/// Pixels as the UI uploads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rgba {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
}

/// One image in the output folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub path: PathBuf,
    pub modified: SystemTime,
}

/// A finished image and what its file says of it: sent to be saved, and handed back whole
/// when it could not be, so that it is never lost (the app keeps it to save again).
#[derive(Clone, Debug)]
pub struct ToSave {
    /// Image `index` of job `job`: the reply names them, so it labels that image only.
    pub job: JobId,
    pub index: usize,
    pub image: ImageRgb8,
    pub parameters: String,
    /// A1111's `extras` text (an upscale's).
    pub extras: Option<String>,
    pub seed: u64,
    /// An X/Y/Z plot's grid: named `NNNNN-xyz_grid-SEED` (A1111's `xyz_grid` prefix).
    pub grid: bool,
}

impl ToSave {
    /// What its file name holds after the number: the seed, after `xyz_grid-` for a grid.
    fn name_tail(&self) -> String {
        if self.grid {
            format!("xyz_grid-{}", self.seed)
        } else {
            self.seed.to_string()
        }
    }
}

/// File work the UI asks for (served in order).
#[derive(Debug)]
pub enum Request {
    /// Save one result; falls back to `fallback_dir` when `dir` cannot be written.
    Save {
        dir: PathBuf,
        fallback_dir: PathBuf,
        /// The settings' file format when the image was sent.
        format: SaveFormat,
        item: Box<ToSave>,
    },
    /// List the images in a folder, newest first.
    Scan { dir: PathBuf },
    /// Read an image whole with its metadata (the gallery's large view, dropped PNGs).
    Open { path: PathBuf },
    /// Move an image to the trash.
    Delete { path: PathBuf },
}

/// What the file thread answers.
#[derive(Debug)]
pub enum Reply {
    Saved {
        job: JobId,
        index: usize,
        path: PathBuf,
        /// Set when the output folder failed and the fallback was used.
        problem: Option<String>,
    },
    /// Neither folder could be written: the image comes back, to be kept until saved.
    SaveFailed {
        error: String,
        unsaved: Box<ToSave>,
    },
    Scanned {
        dir: PathBuf,
        entries: Vec<Entry>,
    },
    Opened {
        path: PathBuf,
        image: Result<Rgba, String>,
        metadata: Option<ImageMetadata>,
    },
    Deleted {
        path: PathBuf,
        result: Result<(), String>,
    },
}

/// Serves one request (runs on the gallery thread).
pub fn serve(request: Request, reply: &dyn Fn(Reply)) {
    reply(match request {
        Request::Save {
            dir,
            fallback_dir,
            format,
            item,
        } => {
            let (job, index) = (item.job, item.index);
            let text = (item.parameters.as_str(), item.extras.as_deref());
            match save_numbered(&dir, &item.image, text, &item.name_tail(), format) {
                Ok((path, problem)) => Reply::Saved {
                    job,
                    index,
                    path,
                    problem,
                },
                Err(first) => {
                    match save_numbered(&fallback_dir, &item.image, text, &item.name_tail(), format)
                    {
                        Ok((path, problem)) => Reply::Saved {
                            job,
                            index,
                            problem: Some(
                                [format!(
                                    "could not save in {} ({first}); saved in {} instead",
                                    dir.display(),
                                    fallback_dir.display()
                                )]
                                .into_iter()
                                .chain(problem)
                                .collect::<Vec<_>>()
                                .join("; "),
                            ),
                            path,
                        },
                        Err(second) => Reply::SaveFailed {
                            error: format!("could not save the image: {first}; {second}"),
                            unsaved: item,
                        },
                    }
                }
            }
        }
        Request::Scan { dir } => Reply::Scanned {
            entries: scan(&dir),
            dir,
        },
        Request::Open { path } => Reply::Opened {
            image: read_rgba(&path, None),
            metadata: imaging::read_image_text(&path)
                .ok()
                .and_then(|chunks| metadata::from_text_chunks(&chunks)),
            path,
        },
        Request::Delete { path } => Reply::Deleted {
            result: trash::delete(&path).map_err(|e| {
                format!(
                    "could not move {} to the trash: {e}; it was not deleted",
                    path.display()
                )
            }),
            path,
        },
    });
}

/// A thumbnail request and its answer (served newest first on their own thread).
#[derive(Debug)]
pub struct ThumbRequest {
    pub path: PathBuf,
    pub size: u32,
}

#[derive(Debug)]
pub struct Thumb {
    pub path: PathBuf,
    pub image: Result<Rgba, String>,
}

/// Makes one thumbnail (runs on the thumbnail thread).
pub fn serve_thumb(request: ThumbRequest, reply: &dyn Fn(Thumb)) {
    reply(Thumb {
        image: read_rgba(&request.path, Some(request.size)),
        path: request.path,
    });
}

/// The number A1111-style names start with (`00042-123.png` -> 42).
fn index_of(name: &str) -> Option<u64> {
    let digits: String = name.chars().take_while(char::is_ascii_digit).collect();
    (digits.len() >= 5 && name[digits.len()..].starts_with('-'))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The next free number in `dir`: one past the highest `NNNNN-` name there.
pub fn next_index(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| index_of(&e.file_name().to_string_lossy()))
        .max()
        .map_or(0, |n| n + 1)
}

/// Writes `image` as `dir/NNNNN-<tail>.<ext>` in `format` (`tail`: the seed, or a plot
/// grid's `xyz_grid-<seed>`), with its `parameters` (when not
/// empty) and `extras` texts, never replacing an existing file; returns the path, and why
/// the format is not the one asked for (settings too long for a JPEG make a PNG).
pub fn save_numbered(
    dir: &Path,
    image: &ImageRgb8,
    (parameters, extras): (&str, Option<&str>),
    tail: &str,
    format: SaveFormat,
) -> Result<(PathBuf, Option<String>), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut text = Vec::new();
    if !parameters.is_empty() {
        text.push(("parameters", parameters));
    }
    if let Some(extras) = extras {
        text.push(("extras", extras));
    }
    let encoded = imaging::encode_image(image, format, &text).map_err(|e| e.to_string())?;
    let extension = encoded.format.extension();
    let mut index = next_index(dir);
    loop {
        let path = dir.join(format!("{index:05}-{tail}.{extension}"));
        // Never over an existing image, even one another process saved meanwhile.
        if !path.exists() && imaging::write_new(&path, &encoded.bytes).map_err(|e| e.to_string())? {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let problem = encoded.problem.map(|p| format!("{name}: {p}"));
            return Ok((path, problem));
        }
        index += 1;
    }
}

/// The images in `dir`, newest first (an unreadable folder lists nothing).
pub fn scan(dir: &Path) -> Vec<Entry> {
    let mut entries: Vec<Entry> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let path = e.path();
            let ext = path
                .extension()
                .and_then(|x| x.to_str())
                .map(str::to_ascii_lowercase);
            ext.is_some_and(|x| IMAGE_EXTENSIONS.contains(&x.as_str()))
                && e.file_type().is_ok_and(|t| t.is_file())
        })
        .map(|e| Entry {
            modified: e
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH),
            path: e.path(),
        })
        .collect();
    entries.sort_by(|a, b| b.modified.cmp(&a.modified).then(b.path.cmp(&a.path)));
    entries
}

/// Decodes an image (fitted into `max_side` when given) as RGBA.
pub fn read_rgba(path: &Path, max_side: Option<u32>) -> Result<Rgba, String> {
    let decoded = image::ImageReader::open(path)
        .and_then(|r| r.with_guessed_format())
        .map_err(|e| format!("{}: {e}", path.display()))?
        .decode()
        .map_err(|e| format!("{} is not a readable image: {e}", path.display()))?;
    let decoded = match max_side {
        Some(side) => decoded.thumbnail(side, side),
        None => decoded,
    };
    let rgba = decoded.to_rgba8();
    Ok(Rgba {
        width: rgba.width() as usize,
        height: rgba.height() as usize,
        pixels: rgba.into_raw(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> ImageRgb8 {
        ImageRgb8 {
            width: 2,
            height: 1,
            pixels: vec![255, 0, 0, 0, 0, 255],
        }
    }

    #[test]
    fn names_are_numbered_after_the_highest_existing_one() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(next_index(dir.path()), 0);
        std::fs::write(dir.path().join("00041-7.png"), b"x").unwrap();
        std::fs::write(dir.path().join("notes-00099.txt"), b"x").unwrap();
        std::fs::write(dir.path().join("123-5.png"), b"x").unwrap();
        let png = SaveFormat::Png;
        let (path, _) =
            save_numbered(dir.path(), &tiny(), ("a cat\nSteps: 20", None), "1234", png).unwrap();
        assert_eq!(path.file_name().unwrap(), "00042-1234.png");
        let (again, _) =
            save_numbered(dir.path(), &tiny(), ("a cat\nSteps: 20", None), "1234", png).unwrap();
        assert_eq!(again.file_name().unwrap(), "00043-1234.png");
        let text = imaging::read_png_text(&path).unwrap();
        assert_eq!(text, [("parameters".into(), "a cat\nSteps: 20".into())]);
    }

    #[test]
    fn jpeg_and_webp_saves_take_their_extension_and_keep_the_settings() {
        let dir = tempfile::tempdir().unwrap();
        let jpeg = SaveFormat::Jpeg { quality: 90 };
        let (a, _) =
            save_numbered(dir.path(), &tiny(), ("a cat\nSteps: 20", None), "5", jpeg).unwrap();
        let (b, _) =
            save_numbered(dir.path(), &tiny(), ("a dog", None), "6", SaveFormat::WebP).unwrap();
        assert_eq!(a.file_name().unwrap(), "00000-5.jpg");
        assert_eq!(
            b.file_name().unwrap(),
            "00001-6.webp",
            "one numbering for every format"
        );
        let text = imaging::read_image_text(&a).unwrap();
        assert_eq!(text, [("parameters".into(), "a cat\nSteps: 20".into())]);
        assert_eq!(scan(dir.path()).len(), 2, "the gallery lists both");
    }

    /// The reply to saving [`to_save`] into `dir` (falling back to `fallback`).
    fn save_reply(dir: PathBuf, fallback_dir: PathBuf) -> Reply {
        let (tx, rx) = crossbeam_channel::unbounded();
        let item = Box::new(to_save());
        serve(
            Request::Save {
                dir,
                fallback_dir,
                format: SaveFormat::Png,
                item,
            },
            &|r| tx.send(r).unwrap(),
        );
        rx.try_recv().unwrap()
    }

    #[test]
    fn an_unwritable_folder_falls_back_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let not_a_dir = dir.path().join("file");
        std::fs::write(&not_a_dir, b"x").unwrap();
        match save_reply(not_a_dir.join("out"), dir.path().join("fallback")) {
            Reply::Saved {
                job,
                index,
                path,
                problem,
            } => {
                assert_eq!(
                    (job, index),
                    (JobId(7), 1),
                    "the reply names its job and image"
                );
                assert!(path.starts_with(dir.path().join("fallback")));
                assert!(problem.unwrap().contains("could not save in"));
            }
            other => panic!("{other:?}"),
        }
    }

    fn to_save() -> ToSave {
        ToSave {
            job: JobId(7),
            index: 1,
            image: tiny(),
            parameters: "p".into(),
            extras: None,
            seed: 5,
            grid: false,
        }
    }

    #[test]
    fn an_image_neither_folder_takes_comes_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let not_a_dir = dir.path().join("file");
        std::fs::write(&not_a_dir, b"x").unwrap();
        match save_reply(not_a_dir.join("out"), not_a_dir.join("fallback")) {
            Reply::SaveFailed { error, unsaved } => {
                assert!(error.contains("could not save the image"), "{error}");
                let sent = to_save();
                assert_eq!(
                    (unsaved.job, unsaved.index, &unsaved.image, unsaved.seed),
                    (sent.job, sent.index, &sent.image, sent.seed)
                );
                assert_eq!(unsaved.parameters, sent.parameters);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn scan_lists_images_newest_first_and_thumbnails_fit() {
        let dir = tempfile::tempdir().unwrap();
        let (a, _) = save_numbered(dir.path(), &tiny(), ("p", None), "1", SaveFormat::Png).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (b, _) = save_numbered(dir.path(), &tiny(), ("p", None), "2", SaveFormat::Png).unwrap();
        std::fs::write(dir.path().join("readme.txt"), b"x").unwrap();
        let listed: Vec<_> = scan(dir.path()).into_iter().map(|e| e.path).collect();
        assert_eq!(listed, [b.clone(), a]);
        let thumb = read_rgba(&b, Some(1)).unwrap();
        assert_eq!((thumb.width, thumb.height), (1, 1));
        let broken = dir.path().join("broken.png");
        std::fs::write(&broken, b"\x89PNG\r\n\x1a\nnot really").unwrap();
        assert!(read_rgba(&broken, Some(8)).is_err());
    }
}
