//! The app taking in what the worker and its services sent since the last frame, within
//! [`DRAIN_BUDGET`]: job events, the newest preview, file, model and download replies.

use std::time::Instant;

use egui::TextureOptions;
use inference::worker::{JobId, ModelRole, ResultImage};

use super::{DRAIN_BUDGET, EmberApp, color_image};
use crate::gui::display::Shown;
use crate::gui::gallery::{self, store::ToSave};
use crate::gui::shared_device::DeviceNote;
use crate::gui::texture;

impl EmberApp {
    /// Takes in worker events, the newest preview and file replies, for at most
    /// [`DRAIN_BUDGET`]; what is left waits for the next frame (which is requested).
    pub(super) fn drain(&mut self) {
        let start = Instant::now();
        while start.elapsed() < DRAIN_BUDGET {
            let Some(event) = self.worker.try_event() else {
                break;
            };
            // Only a model that loaded joins Recent and is loaded at the next start.
            if let inference::worker::Event::ModelLoaded {
                summary,
                role: ModelRole::Main,
                ..
            } = &event
            {
                self.settings.remember_model(&summary.path);
                let native = summary.native_size.0.min(summary.native_size.1);
                if let Some((w, h)) = self.settings.follow_model_size(native) {
                    let text = format!(
                        "size {}×{} for {}'s native {native} px (was {w}×{h})",
                        self.settings.width, self.settings.height, summary.name
                    );
                    self.session.notify(crate::gui::session::Level::Info, text);
                }
            }
            if let inference::worker::Event::GpuLost { error, .. } = &event {
                self.device = DeviceNote::after_gpu_lost(error);
            }
            // A new job shows its own preview, never the last one's (a job started again on
            // the CPU after a lost GPU, or the next after a cancelled or failed one).
            if let inference::worker::Event::JobStarted { .. } = &event {
                self.display.preview = None;
                self.display.preview_step = 0;
            }
            if let Some(finished) = self.session.apply(event, Instant::now()) {
                self.show_results(finished.id, finished.images);
                self.look_up_model_hashes();
            }
        }
        self.forget_ended_canvas_jobs();
        self.finish_plots();
        if start.elapsed() >= DRAIN_BUDGET {
            self.ctx.request_repaint();
        }
        if let Some(preview) = self.worker.take_preview()
            && self
                .session
                .running
                .as_ref()
                .is_some_and(|r| r.id == preview.job)
        {
            self.display.preview_step = preview.step;
            let image = color_image(&preview.image);
            match &mut self.display.preview {
                Some(shown) => texture::set(shown, &self.ctx, image, TextureOptions::LINEAR),
                None => {
                    self.display.preview = Some(texture::load(
                        &self.ctx,
                        "preview",
                        image,
                        TextureOptions::LINEAR,
                    ));
                }
            }
        }
        while let Some(reply) = self.files.try_recv() {
            self.on_file_reply(reply);
        }
        while let Some(reply) = self.models_service.try_recv() {
            self.on_models_reply(reply);
        }
        self.gallery.drain(&self.ctx);
        self.drain_downloads();
        for picked in self.dialogs.drain() {
            self.perform(picked);
        }
    }

    /// Shows a finished job's images and sends each to be saved at once.
    fn show_results(&mut self, id: JobId, mut images: Vec<ResultImage>) {
        if let Some(job) = self.canvas_jobs.remove(&id) {
            self.finish_canvas(id, &job, &mut images);
        }
        self.display.preview = None;
        self.display.results.clear();
        self.display.results_job = Some(id);
        for (i, result) in images.into_iter().enumerate() {
            let shown = texture::load(
                &self.ctx,
                format!("result-{i}"),
                color_image(&result.image),
                TextureOptions::LINEAR,
            );
            let size = [result.image.width, result.image.height].map(|v| v as usize);
            let mut shown = Shown::new(shown, size);
            if i == 0 {
                self.plots.result(id, &result.image, &result.parameters);
            }
            let parameters = inference::metadata::Parameters::parse(&result.parameters);
            shown.seamless = inference::metadata::seamless(&parameters);
            self.display.results.push(shown);
            self.save(ToSave {
                job: id,
                index: i,
                image: result.image,
                parameters: result.parameters,
                extras: result.extras,
                seed: result.seed,
                grid: false,
            });
        }
    }

    /// Sends an image to be saved in the output folder (its fallback when that cannot be
    /// written); one that neither takes comes back and is kept ([`EmberApp::unsaved`]).
    pub(super) fn save(&mut self, item: ToSave) {
        self.saves_in_flight += 1;
        self.files.send(gallery::store::Request::Save {
            dir: self.output_dir(),
            fallback_dir: self.paths.fallback_output.clone(),
            format: self.settings.saving.format(),
            item: Box::new(item),
        });
    }

    /// Sends every image kept unsaved to be saved again (the output folder may have changed,
    /// or space been freed).
    pub(super) fn save_again(&mut self) {
        for item in std::mem::take(&mut self.unsaved) {
            self.save(item);
        }
    }
}
