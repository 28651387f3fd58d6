//! The app's X/Y/Z plots: a Generate that queues a plot's cells, and each plot's grid
//! drawn, shown and saved once none of its cells is left to make.

use std::collections::HashSet;

use inference::api::GenerateRequest;
use inference::canvas::CanvasJob;
use inference::worker::JobId;

use super::EmberApp;
use crate::gui::display::Shown;
use crate::gui::gallery::store::ToSave;
use crate::gui::session::Level;
use crate::gui::texture;
use crate::plot::{Context, Plot, grid};

impl EmberApp {
    /// Queues one job per cell of `plot`, made from `first` (its seed fixed, so every cell
    /// shares it unless an axis changes it, as in A1111); `false` with a notice when the
    /// plan fails.
    #[must_use]
    pub(super) fn queue_plot(
        &mut self,
        plot: &Plot,
        first: GenerateRequest,
        canvas_job: Option<CanvasJob>,
    ) -> bool {
        // The form's variation seed when its seed extras are on (drawn anew per Generate
        // unless locked); otherwise a Var. strength axis varies towards a new one each time.
        let noise = &self.settings.noise;
        let variation_seed = if noise.extras {
            noise.variation_seed
        } else {
            inference::rng::random_seed()
        };
        let vaes: Vec<std::path::PathBuf> = (self.models.iter())
            .filter(|e| e.kind == crate::gui::models::EntryKind::Vae)
            .map(|e| e.path.clone())
            .collect();
        // A1111's checkpoint list: the models folder's, and Recent.
        let mut checkpoints: Vec<inference::api::PinnedModel> = (self.models.iter())
            .filter(|e| e.kind == crate::gui::models::EntryKind::Model)
            .map(|e| e.path.clone())
            .chain(
                self.settings
                    .recent_models
                    .iter()
                    .filter(|p| p.exists())
                    .cloned(),
            )
            .map(|path| inference::api::PinnedModel {
                config_dir: self.settings.config_dirs.get(&path).cloned(),
                path,
            })
            .collect();
        let mut seen = HashSet::new();
        checkpoints.retain(|c| seen.insert(c.path.clone()));
        let context = Context {
            variation_seed,
            // The form's schedule is a choice of its own (A1111's Schedule type menu).
            schedule_follows_sampler: false,
            vaes: &vaes,
            checkpoints: &checkpoints,
        };
        let planned = plot.plan(&first, context).and_then(|planned| {
            let mut tile = (0, 0);
            for (i, cell) in planned.cells.iter().enumerate() {
                let r = &cell.request;
                if canvas_job.is_some() && (r.width, r.height) != (first.width, first.height) {
                    return Err(
                        "a Size axis changes the image's size, which the canvas keeps; \
                                use it in the Create view"
                            .to_string(),
                    );
                }
                let generated = match &r.hires {
                    Some(fix) => {
                        fix.plan((r.width, r.height), 8, inference::api::MAX_SIDE)
                            .map_err(|e| format!("the image for {}: {e}", planned.cell_label(i)))?
                            .size
                    }
                    None => (r.width, r.height),
                };
                // A canvas image comes back at the canvas's size.
                let (w, h) = canvas_job
                    .as_ref()
                    .map_or(generated, |job| job.finished_size(generated));
                tile = (tile.0.max(w), tile.1.max(h));
            }
            grid::check_size(&planned, tile)?;
            Ok(planned)
        });
        let planned = match planned {
            Ok(planned) => planned,
            Err(e) => {
                self.session
                    .notify(Level::Error, format!("X/Y/Z plot: {e}"));
                return false;
            }
        };
        // Each cell's dynamic prompts from its own seed (after Prompt S/R, as in A1111).
        let mut requests: Vec<GenerateRequest> =
            planned.cells.iter().map(|c| c.request.clone()).collect();
        if !self.resolve_dynamic_prompts(&mut requests) {
            return false;
        }
        let mut jobs = Vec::with_capacity(requests.len());
        for request in requests {
            let id = self.session.enqueue(request);
            if let Some(canvas_job) = &canvas_job {
                self.canvas_jobs.insert(id, canvas_job.clone());
                self.canvas.jobs_from_source.insert(id);
            }
            jobs.push(id);
        }
        self.plots.start(planned, jobs);
        true
    }

    /// Has the grid of each plot none of whose cells is left to make drawn, and shows and
    /// saves those drawn.
    pub(super) fn finish_plots(&mut self) {
        let session = &self.session;
        let waiting: HashSet<JobId> = (session.queue.iter().map(|q| q.id))
            .chain(session.running.as_ref().map(|r| r.id))
            .collect();
        for finished in self.plots.take_finished(&waiting, &self.ctx) {
            let (made, planned) = finished.made;
            let grid = match finished.grid {
                Ok(Some(grid)) => grid,
                Ok(None) => {
                    self.session.notify(
                        Level::Warning,
                        "X/Y/Z plot: none of its images was made, so there is no grid",
                    );
                    continue;
                }
                Err(e) => {
                    self.session
                        .notify(Level::Error, format!("X/Y/Z plot: {e}"));
                    continue;
                }
            };
            if made < planned {
                self.session.notify(
                    Level::Warning,
                    format!(
                        "X/Y/Z plot: {made} of its {planned} images were made; the others are \
                         black in the grid"
                    ),
                );
            }
            let size = [grid.width, grid.height].map(|v| v as usize);
            let image = super::color_image(&grid);
            let shown = texture::load(&self.ctx, "plot-grid", image, egui::TextureOptions::LINEAR);
            self.display.results = vec![Shown::new(shown, size)];
            self.display.results_job = Some(finished.id);
            self.save(ToSave {
                job: finished.id,
                index: 0,
                image: grid,
                parameters: finished.parameters,
                extras: None,
                seed: finished.seed,
                grid: true,
            });
        }
    }
}
