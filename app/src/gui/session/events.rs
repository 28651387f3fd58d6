//! What each worker event does to the session ([`Session::apply`] dispatches): a model's
//! load progress, success or failure, a lost GPU, a job's progress and speed, and a job's
//! failure (or its restart on the CPU after the GPU was lost).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use inference::api::Stage;
use inference::worker::{JobId, ModelRole, ModelSummary, ModelToReload};

use super::{Level, ModelState, QueuedJob, Session, Topic, Work};

impl Session {
    /// The load of `path` into `role` is at `step` of `total` (a newer load ignores it).
    pub(super) fn load_progress(
        &mut self,
        path: &Path,
        role: ModelRole,
        step: usize,
        total: usize,
    ) {
        if let ModelState::Loading {
            path: p,
            step: s,
            total: t,
            ..
        } = self.slot(role)
            && *p == path
        {
            (*s, *t) = (step, total);
        }
    }

    pub(super) fn model_loaded(
        &mut self,
        summary: Box<ModelSummary>,
        role: ModelRole,
        elapsed: Duration,
    ) {
        let what = match role {
            ModelRole::Main => "loaded",
            ModelRole::Refiner => "loaded the refiner",
        };
        let text = format!(
            "{what} {} ({}) in {:.1} s",
            summary.name,
            summary.family,
            elapsed.as_secs_f32()
        );
        *self.slot(role) = ModelState::Ready(summary);
        self.succeeded(Topic::Load);
        self.notify_about(Topic::Load, Level::Info, text);
    }

    /// A load failed (or was `cancelled`); the slot keeps the model it had (`kept`), if
    /// any.
    pub(super) fn model_failed(
        &mut self,
        path: PathBuf,
        role: ModelRole,
        error: &str,
        kept: Option<Box<ModelSummary>>,
        needs_config: bool,
        cancelled: bool,
    ) {
        // A load replaced by a newer one fails quietly; the newer one is shown. That includes
        // a cancelled load of the same file asked for again: the slot's load is not the
        // cancelled one.
        let slot = self.slot(role);
        let current = matches!(slot, ModelState::Loading { path: p, cancel, .. }
            if *p == path && (cancel.is_cancelled() || !cancelled));
        if !current {
            return;
        }
        let still = kept
            .as_ref()
            .map(|m| format!("; {} is still loaded", m.name))
            .unwrap_or_default();
        *slot = kept.map_or(ModelState::Empty, ModelState::Ready);
        if role == ModelRole::Main {
            self.not_loaded(&path, error, cancelled);
        }
        let text = load_error(&path, error, &still);
        if needs_config {
            self.needs_config = Some((path, role));
        }
        self.notify_about(Topic::Load, Level::Error, text);
    }

    /// A main model that did not load is no longer the one chosen, and the plot cells for
    /// it are left out (each would load it again).
    fn not_loaded(&mut self, path: &Path, error: &str, cancelled: bool) {
        if self.chosen.as_ref().is_some_and(|c| c.path == path) {
            self.chosen = None;
        }
        let before = self.queue.len();
        self.queue.retain(|job| {
            !matches!(&job.work, Work::Generate(r)
                if r.checkpoint.as_ref().is_some_and(|c| c.path == path))
        });
        let left_out = before - self.queue.len();
        if left_out > 0 {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let why = if cancelled {
                "its load was cancelled"
            } else {
                error
            };
            self.notify(
                Level::Error,
                format!("X/Y/Z plot: the {left_out} image(s) for {name} are left out ({why})"),
            );
        }
    }

    /// The worker moved to the CPU: the models it had are loaded again there, first.
    pub(super) fn gpu_was_lost(&mut self, error: String, reload: Vec<ModelToReload>) {
        // Until dismissed: it explains why everything is slower from now on.
        self.notify(Level::Error, error.clone());
        self.gpu_lost = Some(error);
        for model in reload {
            // Another model asked for meanwhile loads (on the CPU) instead.
            let chosen_meanwhile = matches!(self.slot(model.role),
                ModelState::Loading { path, cancel, .. } if *path != model.path && !cancel.is_cancelled());
            if chosen_meanwhile {
                continue;
            }
            let load = self.start_load(model.role, &model.path, model.config_dir);
            self.reloads.push_back(load);
        }
    }

    /// The running job `job` is at `stage`; denoising and upscaling count `(step, total)`,
    /// and denoising measures its speed from its first reported step.
    pub(super) fn progress(
        &mut self,
        job: JobId,
        stage: Stage,
        (step, total): (usize, usize),
        now: Instant,
    ) {
        let Some(running) = self.running.as_mut().filter(|r| r.id == job) else {
            return;
        };
        running.stage = Some(stage);
        if stage == Stage::Upscaling {
            (running.step, running.total) = (step, total);
        }
        if stage == Stage::Denoising {
            (running.step, running.total) = (step, total);
            match running.denoise_start {
                None => running.denoise_start = Some((now, step)),
                Some((t0, s0)) if step > s0 => {
                    let secs = now.duration_since(t0).as_secs_f64();
                    if secs > 0.0 {
                        running.its = Some((step - s0) as f64 / secs);
                    }
                }
                Some(_) => {}
            }
        }
    }

    /// The worker serves no more: the image being made waits again at the head of the
    /// queue (kept with the others for the next start when Ember quits), and the message
    /// stays until then.
    pub(super) fn worker_stopped(&mut self, error: String) {
        if let Some(lost) = self.running.take().filter(|job| !job.cancelling) {
            self.queue.push_front(QueuedJob {
                id: lost.id,
                work: lost.work,
            });
        }
        // A load asked for will not happen either.
        for slot in [&mut self.model, &mut self.refiner] {
            if matches!(slot, ModelState::Loading { .. }) {
                *slot = ModelState::Empty;
            }
        }
        self.notify(Level::Error, stopped_text(&error));
        self.stopped = Some(error);
    }

    pub(super) fn job_failed(&mut self, job: JobId, error: String) {
        let upscale = self
            .running
            .as_ref()
            .is_some_and(|r| r.id == job && matches!(r.work, Work::Upscale(_)));
        // `GpuLost` comes just before its job's failure: what it said is needed once, and
        // the job starts over first on the device the engine moved to.
        if self.gpu_lost.take().as_ref() == Some(&error) {
            let wanted = (self.running.as_ref()).is_some_and(|r| r.id == job && !r.cancelling);
            if wanted && let Some(lost) = self.running.take() {
                self.queue.push_front(QueuedJob {
                    id: job,
                    work: lost.work,
                });
                self.notify(Level::Info, "The image being made starts over on the CPU.");
            } else {
                self.end_job(job);
            }
            return;
        }
        self.end_job(job);
        let what = if upscale { "upscaling" } else { "generation" };
        let mut text = format!("{what} failed: {error}");
        // The next image would fail alike: one error, not one a second.
        if std::mem::take(&mut self.forever) {
            text.push_str(" (Generate forever stopped)");
        }
        self.notify_about(Topic::Generate, Level::Error, text);
    }
}

/// The notice for a failed load, naming the file once (the loader's errors often name it).
fn load_error(path: &Path, error: &str, still: &str) -> String {
    let shown = path.display().to_string();
    if error.contains(&shown) {
        format!("could not load the model: {error}{still}")
    } else {
        let name = path
            .file_name()
            .map_or(shown.clone(), |n| n.to_string_lossy().into());
        format!("could not load {name}: {error}{still}")
    }
}

/// What a stopped worker means for the user: what failed, and what to do.
pub(super) fn stopped_text(error: &str) -> String {
    format!(
        "Ember's engine stopped after an internal error ({error}); nothing more can be made \
         in this window. Quit and start Ember again: the images waiting are kept for it."
    )
}
