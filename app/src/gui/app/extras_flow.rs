//! The Extras view's side of the app: reading the image to upscale, choosing the model, and
//! queuing the upscale (it runs on the worker like a generation and is saved like one).

use std::path::Path;

use egui::TextureOptions;
use inference::metadata::ImageMetadata;

use super::{EmberApp, color_image};
use crate::gui::action::{ExtrasAction, View};
use crate::gui::extras::ExtrasSource;
use crate::gui::gallery::store::{Request, Rgba};
use crate::gui::session::Level;

impl EmberApp {
    /// Does what an Extras action asks.
    pub(super) fn perform_extras(&mut self, action: ExtrasAction) {
        match action {
            ExtrasAction::OpenImage(path) => {
                self.view = View::Extras;
                self.extras_incoming = Some(path.clone());
                self.files.send(Request::Open { path });
            }
            ExtrasAction::SetUpscaler(path) => self.settings.extras.upscaler = Some(path),
            ExtrasAction::Upscale if self.session.refuse_when_stopped() => {}
            ExtrasAction::Upscale => {
                match self.settings.extras.request(self.extras.source.as_ref()) {
                    Ok(request) => {
                        let job = self.session.enqueue_upscale(request);
                        self.extras.job = Some(job);
                    }
                    Err(e) => self.session.notify(Level::Error, e),
                }
            }
        }
    }

    /// A file read for the Extras view arrived; `false` when `path` was not the one asked
    /// for.
    pub(super) fn extras_file_opened(
        &mut self,
        path: &Path,
        image: &Result<Rgba, String>,
        metadata: Option<&ImageMetadata>,
    ) -> bool {
        if self.extras_incoming.as_deref() != Some(path) {
            return false;
        }
        self.extras_incoming = None;
        match image {
            Ok(rgba) => {
                let image = super::canvas_flow::to_rgb(rgba);
                self.extras.texture = Some(crate::gui::texture::load(
                    &self.ctx,
                    "extras-source",
                    color_image(&image),
                    TextureOptions::LINEAR,
                ));
                let parameters = match metadata {
                    Some(ImageMetadata::A1111(p)) => Some(p.to_text()),
                    _ => None,
                };
                self.extras.source = Some(ExtrasSource {
                    path: path.to_path_buf(),
                    image,
                    parameters,
                });
                self.extras.job = None;
            }
            Err(e) => self.session.notify(Level::Error, e.clone()),
        }
        true
    }
}
