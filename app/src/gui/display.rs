//! What the Generate view's central area shows: the live preview and the last results with
//! the paths they were saved at.

use std::path::{Path, PathBuf};

use egui::TextureHandle;
use inference::api::Seamless;
use inference::worker::JobId;

/// What the central area shows in the Generate view.
#[derive(Default)]
pub struct Display {
    /// The newest live preview (latent size, upscaled by the texture sampler).
    pub preview: Option<TextureHandle>,
    pub preview_step: usize,
    /// The last finished images, with their saved paths once known.
    pub results: Vec<Shown>,
    /// The job `results` came from.
    pub results_job: Option<JobId>,
}

/// A finished image as shown.
pub struct Shown {
    /// Fitted within the GPU's largest texture ([`crate::gui::texture`]).
    pub texture: TextureHandle,
    /// The image's own width and height (its texture may be smaller).
    pub size: [usize; 2],
    /// Where it was saved, once known.
    pub path: Option<PathBuf>,
    /// The edges that meet, as its parameters say: "Show tiled" repeats it along them.
    pub seamless: Seamless,
}

impl Shown {
    /// A result not saved yet.
    pub fn new(texture: TextureHandle, size: [usize; 2]) -> Self {
        Self {
            texture,
            size,
            path: None,
            seamless: Seamless::Off,
        }
    }
}

impl Display {
    /// Labels image `index` of `job` with the path it was saved at; a reply for a job no
    /// longer shown labels nothing. Returns whether it labelled an image.
    pub fn saved(&mut self, job: JobId, index: usize, path: &Path) -> bool {
        if self.results_job != Some(job) {
            return false;
        }
        match self.results.get_mut(index) {
            Some(shown) => {
                shown.path = Some(path.to_path_buf());
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(ctx: &egui::Context, name: &str) -> Shown {
        let image = egui::ColorImage::example();
        let size = image.size;
        Shown::new(
            ctx.load_texture(name, image, egui::TextureOptions::LINEAR),
            size,
        )
    }

    #[test]
    fn a_save_reply_labels_its_own_jobs_image_only() {
        let ctx = egui::Context::default();
        let mut display = Display {
            results: vec![shown(&ctx, "a"), shown(&ctx, "b")],
            results_job: Some(JobId(2)),
            ..Display::default()
        };
        // A late reply for the previous job labels nothing.
        assert!(!display.saved(JobId(1), 0, Path::new("old.png")));
        assert!(display.results.iter().all(|s| s.path.is_none()));
        // Replies may come in any order; each labels its own index.
        assert!(display.saved(JobId(2), 1, Path::new("second.png")));
        assert!(display.saved(JobId(2), 0, Path::new("first.png")));
        let paths: Vec<_> = display.results.iter().map(|s| s.path.clone()).collect();
        assert_eq!(
            paths,
            [
                Some(PathBuf::from("first.png")),
                Some(PathBuf::from("second.png"))
            ]
        );
        assert!(!display.saved(JobId(2), 5, Path::new("none.png")));
    }
}
