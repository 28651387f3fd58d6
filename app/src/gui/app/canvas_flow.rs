//! The canvas mode's side of the app: loading sources and masks, outpainting, turning the
//! canvas into engine jobs (through `inference::canvas::prepare`) and putting the results
//! back onto the source (`finish`) before they are saved.

use std::path::{Path, PathBuf};

use inference::api::GenerateRequest;
use inference::canvas::{self, CanvasJob, CanvasOptions, Extension, InpaintArea, InpaintOptions};
use inference::imaging::{ImageGray8, ImageRgb8};
use inference::worker::{JobId, ResultImage};

use super::EmberApp;
use crate::gui::action::{CanvasAction, View};
use crate::gui::gallery::store::{Request, Rgba};
use crate::gui::session::Level;

/// A file being read for the canvas (as the source, or as the mask) or for a ControlNet
/// unit.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    Source(PathBuf),
    Mask(PathBuf),
    Control(usize, PathBuf),
}

impl EmberApp {
    /// Does what a canvas action asks.
    pub(super) fn perform_canvas(&mut self, action: CanvasAction) {
        match action {
            CanvasAction::OpenImage(path) | CanvasAction::SendTo(path) => {
                self.view = View::Canvas;
                self.incoming.push(Incoming::Source(path.clone()));
                self.files.send(Request::Open { path });
            }
            CanvasAction::PasteImage => self.dialogs.paste_image(),
            CanvasAction::ImagePasted(image) => {
                self.view = View::Canvas;
                self.use_as_source(*image);
            }
            CanvasAction::OpenMask(path) => {
                self.incoming.push(Incoming::Mask(path.clone()));
                self.files.send(Request::Open { path });
            }
            CanvasAction::Outpaint {
                left,
                right,
                up,
                down,
            } => {
                // Outpainting goes on from the result just shown, not the image before it.
                if let Some((shown, _)) = self.canvas.result.take() {
                    self.use_as_source(shown);
                }
                let n = self.settings.canvas.outpaint_pixels;
                let pick = |on: bool| if on { n } else { 0 };
                self.canvas.outpaint(Extension {
                    left: pick(left),
                    right: pick(right),
                    up: pick(up),
                    down: pick(down),
                });
            }
        }
    }

    /// A file read for the canvas arrived; `false` when `path` was not one.
    pub(super) fn canvas_file_opened(&mut self, path: &Path, image: &Result<Rgba, String>) -> bool {
        let Some(i) = self.incoming.iter().position(|f| {
            matches!(f, Incoming::Source(p) | Incoming::Mask(p) | Incoming::Control(_, p)
                    if p == path)
        }) else {
            return false;
        };
        let incoming = self.incoming.remove(i);
        if let Incoming::Control(unit, _) = incoming {
            self.control_file_opened(unit, path, image);
            return true;
        }
        let rgba = match image {
            Ok(rgba) => rgba,
            Err(e) => {
                self.session.notify(Level::Error, e.clone());
                return true;
            }
        };
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        match incoming {
            // As a pasted image: a canvas larger than Ember reads could not be kept in the
            // queue file (its jobs' paste-back holds it), nor opened again.
            Incoming::Source(_) => {
                let (width, height) = (rgba.width as u32, rgba.height as u32);
                match inference::imaging::check_input_size(width, height) {
                    Ok(()) => self.use_as_source(to_rgb(rgba)),
                    Err(e) => self
                        .session
                        .notify(Level::Error, format!("{name} cannot go on the canvas: {e}")),
                }
            }
            Incoming::Mask(_) => {
                self.canvas.load_mask(to_gray(rgba));
                self.session
                    .notify(Level::Info, format!("mask loaded from {name}"));
            }
            Incoming::Control(..) => {} // handed to the ControlNet units above
        }
        true
    }

    /// Puts `image` on the canvas, which generates at its size (rounded down to multiples
    /// of 8).
    fn use_as_source(&mut self, image: ImageRgb8) {
        self.canvas.set_source(image);
        self.canvas.result = None;
        self.canvas.result_texture = None;
    }

    /// The request and finishing data for a canvas generation from `base` (the form's
    /// settings): img2img with the canvas image, or inpainting where a mask is painted.
    pub(super) fn canvas_request(
        &self,
        mut base: GenerateRequest,
    ) -> Result<(GenerateRequest, CanvasJob), String> {
        let source = self
            .canvas
            .source
            .as_ref()
            .ok_or("open or drop an image on the canvas first")?;
        let s = &self.settings.canvas;
        let size = self.canvas.size;
        (base.width, base.height) = size;
        base.strength = s.strength.clamp(0.0, 1.0);
        let options = CanvasOptions {
            inpaint: InpaintOptions {
                mask_blur: s.mask_blur,
                area: if s.only_masked {
                    InpaintArea::OnlyMasked { padding: s.padding }
                } else {
                    InpaintArea::Whole
                },
                masked_content: s.masked_content,
            },
            fit: s.resize_mode,
            composite: s.composite,
        };
        let mask = self.canvas.mask.as_ref().filter(|_| self.canvas.has_mask());
        let job = canvas::canvas_job(source, mask, size, &options).map_err(|e| e.to_string())?;
        base.init_image = Some(job.init.clone());
        base.mask = job.mask.clone();
        base.masked_content = job.masked_content;
        base.validate_settings().map_err(|e| e.to_string())?;
        Ok((base, job))
    }

    /// Puts a canvas job's images back onto its source and notes its settings; keeps the
    /// last result (composited and raw) for the canvas view when the job was made from the
    /// image on the canvas now.
    pub(super) fn finish_canvas(&mut self, id: JobId, job: &CanvasJob, images: &mut [ResultImage]) {
        let on_canvas = self.canvas.jobs_from_source.remove(&id);
        for result in images.iter_mut() {
            let shown = job.finish(&result.image);
            if on_canvas {
                self.canvas.result = Some((shown.clone(), job.finish_raw(&result.image)));
                self.canvas.result_texture = None;
            }
            result.image = shown;
            result.parameters = format!("{}, {}", result.parameters, job.fields_text());
        }
    }

    /// Lets go of the canvas jobs that will not finish (failed, cancelled, cleared from the
    /// queue): each holds its image and mask.
    pub(super) fn forget_ended_canvas_jobs(&mut self) {
        let session = &self.session;
        let waiting = |id: &JobId| {
            session.running.as_ref().is_some_and(|r| r.id == *id)
                || session.queue.iter().any(|q| q.id == *id)
        };
        self.canvas_jobs.retain(|id, _| waiting(id));
        self.canvas.jobs_from_source.retain(waiting);
    }
}

pub(super) fn to_rgb(rgba: &Rgba) -> ImageRgb8 {
    ImageRgb8 {
        width: rgba.width as u32,
        height: rgba.height as u32,
        pixels: rgba
            .pixels
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .collect(),
    }
}

/// Luminance (PIL's "L" weights), as masks are read elsewhere.
fn to_gray(rgba: &Rgba) -> ImageGray8 {
    ImageGray8 {
        width: rgba.width as u32,
        height: rgba.height as u32,
        pixels: rgba
            .pixels
            .chunks_exact(4)
            .map(|p| inference::imaging::luminance([p[0], p[1], p[2]]))
            .collect(),
    }
}
