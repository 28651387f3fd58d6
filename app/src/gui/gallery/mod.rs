//! The gallery's UI-side state: the output folder's listing, thumbnails made lazily in the
//! background (only for what is on screen, newest request first), and the selected image.

pub mod store;

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use egui::{ColorImage, TextureHandle, TextureOptions};
use inference::metadata::ImageMetadata;

use super::service::{Order, Service};
use super::texture;
use store::{Entry, Rgba, Thumb, ThumbRequest};

/// Thumbnail side in pixels.
pub const THUMB_SIDE: u32 = 160;
/// Thumbnails kept in memory before the ones off screen are dropped.
const MAX_THUMBS: usize = 600;

/// Whether a dropped file is an image the app reads settings from.
pub fn is_image_path(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .is_some_and(|e| ["png", "jpg", "jpeg", "webp"].contains(&e.as_str()))
}

/// The image shown large, with its metadata.
#[derive(Clone)]
pub struct Selected {
    pub path: PathBuf,
    pub texture: Option<TextureHandle>,
    pub metadata: Option<ImageMetadata>,
    pub error: Option<String>,
}

impl Selected {
    /// The metadata as text (A1111's `parameters` as written, else `key: value` lines).
    pub fn parameters_text(&self) -> Option<String> {
        Some(match self.metadata.as_ref()? {
            ImageMetadata::A1111(p) => p.to_text(),
            ImageMetadata::ComfyUi { samplers, texts } => {
                let mut lines: Vec<String> = texts.clone();
                for s in samplers {
                    lines.extend(s.iter().map(|(k, v)| format!("{k}: {v}")));
                }
                lines.join("\n")
            }
            ImageMetadata::Fooocus(fields) => fields
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join("\n"),
        })
    }
}

/// Where one thumbnail is.
pub enum ThumbState {
    Pending,
    Ready(TextureHandle),
    Failed,
}

/// See the module docs.
pub struct Gallery {
    pub dir: Option<PathBuf>,
    pub entries: Vec<Entry>,
    pub scanning: bool,
    pub selected: Option<Selected>,
    /// Thumbnails a row of the grid held when last drawn (the arrow keys Up and Down move by
    /// a row).
    pub columns: usize,
    /// The rows of the grid last drawn.
    pub visible_rows: Range<usize>,
    /// An image just selected, for the grid to scroll into view when next drawn.
    pub reveal: Option<PathBuf>,
    thumbs: HashMap<PathBuf, ThumbState>,
    thumb_service: Service<ThumbRequest, Thumb>,
}

impl Gallery {
    pub fn new(wake: impl Fn() + Send + 'static) -> Self {
        Self {
            dir: None,
            entries: Vec::new(),
            scanning: false,
            selected: None,
            columns: 1,
            visible_rows: 0..0,
            reveal: None,
            thumbs: HashMap::new(),
            thumb_service: Service::spawn("thumbnails", Order::Lifo, wake, store::serve_thumb)
                .unwrap_or_else(|e| panic!("could not start a thread: {e}")),
        }
    }

    /// Lists `dir` (again), through the file thread.
    pub fn show_dir(&mut self, dir: &Path, files: &Service<store::Request, store::Reply>) {
        if self.dir.as_deref() != Some(dir) {
            self.entries.clear();
            self.selected = None;
            self.dir = Some(dir.to_path_buf());
        }
        self.scanning = true;
        files.send(store::Request::Scan {
            dir: dir.to_path_buf(),
        });
    }

    pub fn listed(&mut self, dir: &Path, entries: Vec<Entry>) {
        if self.dir.as_deref() == Some(dir) {
            self.entries = entries;
            self.scanning = false;
        }
    }

    /// A result was saved: it goes first if it is in the listed folder.
    pub fn added(&mut self, path: &Path) {
        if path.parent() == self.dir.as_deref() && !self.entries.iter().any(|e| e.path == path) {
            self.entries.insert(
                0,
                Entry {
                    path: path.to_path_buf(),
                    modified: std::time::SystemTime::now(),
                },
            );
        }
    }

    pub fn removed(&mut self, path: &Path) {
        self.entries.retain(|e| e.path != path);
        self.thumbs.remove(path);
        if self.selected.as_ref().is_some_and(|s| s.path == path) {
            self.selected = None;
        }
    }

    pub fn select(&mut self, path: &Path) {
        self.selected = Some(Selected {
            path: path.to_path_buf(),
            texture: None,
            metadata: None,
            error: None,
        });
        self.reveal = Some(path.to_path_buf());
    }

    /// The image reached from the selected one by `steps` (each a move in the listed order,
    /// stopping at either end; with none selected the first step selects the first image);
    /// `None` when the list is empty or the selected image is not in it.
    pub fn stepped(&self, steps: &[isize]) -> Option<PathBuf> {
        let last = self.entries.len().checked_sub(1)?;
        let (mut index, steps) = match &self.selected {
            Some(selected) => {
                let at = self.entries.iter().position(|e| e.path == selected.path)?;
                (at, steps)
            }
            None => (0, steps.get(1..).unwrap_or_default()),
        };
        for &step in steps {
            index = index.saturating_add_signed(step).min(last);
        }
        self.entries.get(index).map(|e| e.path.clone())
    }

    /// The file thread read an image the gallery asked for.
    pub fn opened(
        &mut self,
        ctx: &egui::Context,
        path: &Path,
        image: Result<Rgba, String>,
        metadata: Option<ImageMetadata>,
    ) {
        let Some(selected) = self.selected.as_mut().filter(|s| s.path == path) else {
            return;
        };
        match image {
            Ok(rgba) => {
                let image = color_image(&rgba);
                selected.texture = Some(texture::load(
                    ctx,
                    "selected",
                    image,
                    TextureOptions::LINEAR,
                ));
            }
            Err(e) => selected.error = Some(e),
        }
        selected.metadata = metadata;
    }

    /// Takes in finished thumbnails.
    pub fn drain(&mut self, ctx: &egui::Context) {
        while let Some(thumb) = self.thumb_service.try_recv() {
            let state = match thumb.image {
                Ok(rgba) => ThumbState::Ready(texture::load(
                    ctx,
                    thumb.path.to_string_lossy(),
                    color_image(&rgba),
                    TextureOptions::LINEAR,
                )),
                Err(_) => ThumbState::Failed,
            };
            self.thumbs.insert(thumb.path, state);
        }
    }

    /// Whether the thumbnail of `path` has been made (asked for by [`Self::thumbnail`]).
    pub fn thumbnail_ready(&self, path: &Path) -> bool {
        matches!(self.thumbs.get(path), Some(ThumbState::Ready(_)))
    }

    /// The thumbnail of an on-screen image, asked for on first sight.
    pub fn thumbnail(&mut self, path: &Path) -> &ThumbState {
        if !self.thumbs.contains_key(path) {
            self.thumbs.insert(path.to_path_buf(), ThumbState::Pending);
            self.thumb_service.send(ThumbRequest {
                path: path.to_path_buf(),
                size: THUMB_SIDE,
            });
        }
        &self.thumbs[path]
    }

    /// Drops thumbnails that are not on screen once too many are held.
    pub fn forget_offscreen(&mut self, on_screen: &[PathBuf]) {
        if self.thumbs.len() > MAX_THUMBS {
            self.thumbs
                .retain(|p, s| matches!(s, ThumbState::Pending) || on_screen.contains(p));
        }
    }
}

fn color_image(rgba: &Rgba) -> ColorImage {
    ColorImage::from_rgba_unmultiplied([rgba.width, rgba.height], &rgba.pixels)
}
