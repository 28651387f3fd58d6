//! The app's X/Y/Z plots: a Generate that queues a plot's cells, and each plot's grid
//! drawn, shown and saved once none of its cells is left to make.

use inference::api::GenerateRequest;
use inference::canvas::CanvasJob;

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
        let context = Context {
            variation_seed: self.settings.noise.variation_seed,
            // The form's schedule is a choice of its own (A1111's Schedule type menu).
            schedule_follows_sampler: false,
        };
        let planned = plot.plan(&first, context).and_then(|planned| {
            let sizes = planned.cells.iter().map(|c| {
                let r = &c.request;
                if canvas_job.is_some() && (r.width, r.height) != (first.width, first.height) {
                    return Err(
                        "a Size axis changes the image's size, which the canvas keeps; \
                                use it in the Create view"
                            .to_string(),
                    );
                }
                let planned_size = r.hires.as_ref().and_then(|fix| {
                    fix.plan((r.width, r.height), 8, inference::api::MAX_SIDE)
                        .ok()
                });
                Ok(planned_size.map_or((r.width, r.height), |p| p.size))
            });
            let mut tile = (0, 0);
            for size in sizes {
                let (w, h) = size?;
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
        let mut jobs = Vec::with_capacity(planned.cells.len());
        for cell in &planned.cells {
            let id = self.session.enqueue(cell.request.clone());
            if let Some(canvas_job) = &canvas_job {
                self.canvas_jobs.insert(id, canvas_job.clone());
                self.canvas.jobs_from_source.insert(id);
            }
            jobs.push(id);
        }
        self.plots.start(planned, jobs);
        true
    }

    /// Draws, shows and saves the grid of each plot none of whose cells is left to make.
    pub(super) fn finish_plots(&mut self) {
        let session = &self.session;
        let waiting = |id| {
            session.running.as_ref().is_some_and(|r| r.id == id)
                || session.queue.iter().any(|q| q.id == id)
        };
        for finished in self.plots.take_finished(waiting) {
            let (made, planned) = finished.made;
            let Some(grid) = finished.grid else {
                self.session.notify(
                    Level::Warning,
                    "X/Y/Z plot: none of its images was made, so there is no grid",
                );
                continue;
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
