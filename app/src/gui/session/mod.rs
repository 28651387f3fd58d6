//! The app's runtime state (never persisted): the model's state, the running job with its
//! progress and speed, the visible queue, and notices. It turns worker [`Event`]s into state
//! and decides which [`Command`] to send next; it draws nothing, so it is tested directly.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use inference::api::{GenerateRequest, PinnedModel};
use inference::upscale::UpscaleRequest;
use inference::worker::{CancelToken, Command, Event, JobId, ModelRole, ModelSummary, ResultImage};

mod events;
mod jobs;
mod notices;

pub use jobs::{QueuedJob, RunningJob, Work};
pub use notices::{INFO_LIFETIME, Level, Notice, Topic, WARNING_LIFETIME};

/// Where the model is.
#[derive(Clone, Debug)]
pub enum ModelState {
    Empty,
    Loading {
        path: PathBuf,
        step: usize,
        total: usize,
        cancel: CancelToken,
    },
    Ready(Box<ModelSummary>),
}

/// A finished job, for the app to show and save.
#[derive(Debug)]
pub struct Finished {
    pub id: JobId,
    pub images: Vec<ResultImage>,
    pub elapsed: Duration,
}

/// See the module docs.
#[derive(Debug)]
pub struct Session {
    pub model: ModelState,
    /// The refiner slot (an SDXL refiner the main model hands over to).
    pub refiner: ModelState,
    /// A checkpoint that failed to load for want of a config folder (the model panel
    /// offers to choose one).
    pub needs_config: Option<(PathBuf, ModelRole)>,
    pub queue: VecDeque<QueuedJob>,
    pub running: Option<RunningJob>,
    pub notices: Vec<Notice>,
    /// Show every notice rather than the newest few.
    pub all_notices: bool,
    /// Models to load again on the CPU after the GPU was lost, sent before any job.
    reloads: VecDeque<Command>,
    /// What the GPU's loss was reported as: the failed job says the same, once is enough.
    gpu_lost: Option<String>,
    /// Why the worker stopped serving ([`Event::Stopped`]): nothing more is sent to it.
    pub stopped: Option<String>,
    /// A1111's Generate forever: Generate is clicked again whenever nothing is left to make,
    /// until asked to stop, Cancel all, a failed image, or the window closing.
    pub forever: bool,
    /// The main model the user chose: the jobs for no model in particular are made with
    /// it, and it comes back once a plot's Checkpoint name axis has had others loaded.
    /// `None` = whichever is loaded.
    chosen: Option<PinnedModel>,
    next_id: u64,
    next_notice: u64,
}

impl Default for Session {
    fn default() -> Self {
        Self {
            model: ModelState::Empty,
            refiner: ModelState::Empty,
            needs_config: None,
            queue: VecDeque::new(),
            running: None,
            notices: Vec::new(),
            all_notices: false,
            reloads: VecDeque::new(),
            gpu_lost: None,
            stopped: None,
            forever: false,
            chosen: None,
            next_id: 1,
            next_notice: 1,
        }
    }
}

impl Session {
    /// The loaded model, if one is ready.
    pub fn model(&self) -> Option<&ModelSummary> {
        match &self.model {
            ModelState::Ready(summary) => Some(summary.as_ref()),
            _ => None,
        }
    }

    /// Says why nothing new can be made when the worker has stopped; `true` then.
    pub fn refuse_when_stopped(&mut self) -> bool {
        let Some(error) = &self.stopped else {
            return false;
        };
        let text = events::stopped_text(error);
        self.notify(Level::Error, text);
        true
    }

    /// The main model loaded, or being loaded (which will replace the loaded one); `None`
    /// while a cancelled load ends (the model it leaves is not known yet).
    pub fn model_path(&self) -> Option<&Path> {
        match &self.model {
            ModelState::Ready(summary) => Some(&summary.path),
            ModelState::Loading { path, cancel, .. } if !cancel.is_cancelled() => Some(path),
            _ => None,
        }
    }

    /// The loaded refiner, if one is ready.
    pub fn refiner(&self) -> Option<&ModelSummary> {
        match &self.refiner {
            ModelState::Ready(summary) => Some(summary.as_ref()),
            _ => None,
        }
    }

    fn slot(&mut self, role: ModelRole) -> &mut ModelState {
        match role {
            ModelRole::Main => &mut self.model,
            ModelRole::Refiner => &mut self.refiner,
        }
    }

    /// Whether `path` is being loaded into `role`'s slot (the worker will load it: the load
    /// was not cancelled).
    pub fn is_loading(&self, role: ModelRole, path: &Path) -> bool {
        let slot = match role {
            ModelRole::Main => &self.model,
            ModelRole::Refiner => &self.refiner,
        };
        matches!(slot, ModelState::Loading { path: p, cancel, .. } if p == path && !cancel.is_cancelled())
    }

    /// Starts loading `path` into a slot, with the architecture in `config_dir` when given
    /// (the worker keeps the slot's old model until the new one has loaded); the main
    /// model becomes the one chosen.
    #[must_use]
    pub fn load_into(
        &mut self,
        role: ModelRole,
        path: &Path,
        config_dir: Option<PathBuf>,
    ) -> Command {
        if role == ModelRole::Main {
            self.chosen = Some(PinnedModel {
                path: path.to_path_buf(),
                config_dir: config_dir.clone(),
            });
        }
        self.start_load(role, path, config_dir)
    }

    /// [`Session::load_into`] without changing the model chosen (a plot's checkpoint, a
    /// model loaded again after the GPU was lost).
    fn start_load(&mut self, role: ModelRole, path: &Path, config_dir: Option<PathBuf>) -> Command {
        let slot = self.slot(role);
        if let ModelState::Loading { cancel, .. } = slot {
            cancel.cancel();
        }
        let cancel = CancelToken::new();
        *slot = ModelState::Loading {
            path: path.to_path_buf(),
            step: 0,
            total: 0,
            cancel: cancel.clone(),
        };
        self.needs_config = None;
        Command::LoadModel {
            path: path.to_path_buf(),
            config_dir,
            role,
            cancel,
        }
    }

    /// Frees the refiner.
    #[must_use]
    pub fn unload_refiner(&mut self) -> Command {
        if let ModelState::Loading { cancel, .. } = &self.refiner {
            cancel.cancel();
        }
        self.refiner = ModelState::Empty;
        Command::Unload(ModelRole::Refiner)
    }

    /// Stops a model load in progress.
    pub fn cancel_loading(&mut self) {
        if let ModelState::Loading { cancel, .. } = &self.model {
            cancel.cancel();
        }
    }

    /// Queues a job; it starts when the worker is free (see [`Session::next_command`]).
    pub fn enqueue(&mut self, request: GenerateRequest) -> JobId {
        self.enqueue_work(Work::Generate(Box::new(request)))
    }

    /// Queues an upscale (it waits for the generations before it).
    pub fn enqueue_upscale(&mut self, request: UpscaleRequest) -> JobId {
        self.enqueue_work(Work::Upscale(Box::new(request)))
    }

    fn enqueue_work(&mut self, work: Work) -> JobId {
        let id = JobId(self.next_id);
        self.next_id += 1;
        self.queue.push_back(QueuedJob { id, work });
        id
    }

    /// The next command to send: a model to load again after the GPU was lost, else (when
    /// no job is running) the model the next job is for when it is not the one loaded or
    /// loading, else that job; with nothing left to make, the chosen model back.
    #[must_use]
    pub fn next_command(&mut self) -> Option<Command> {
        if self.stopped.is_some() {
            return None;
        }
        if let Some(load) = self.reloads.pop_front() {
            return Some(load);
        }
        if self.running.is_some() {
            return None;
        }
        // An upscale needs no model, so it goes ahead of generations waiting for one.
        let ready = |job: &QueuedJob| match &job.work {
            Work::Upscale(_) => true,
            Work::Generate(r) => {
                r.checkpoint.is_some()
                    || self.chosen.is_some()
                    || !matches!(self.model, ModelState::Empty)
            }
        };
        let Some(index) = self.queue.iter().position(ready) else {
            return self.chosen_back();
        };
        let cancelled_load =
            matches!(&self.model, ModelState::Loading { cancel, .. } if cancel.is_cancelled());
        if matches!(self.queue[index].work, Work::Generate(_)) && cancelled_load {
            // Which model that load leaves is not known yet.
            return None;
        }
        if let Work::Generate(request) = &self.queue[index].work
            && let Some(wanted) = request.checkpoint.clone().or_else(|| self.chosen.clone())
            && self.model_path() != Some(wanted.path.as_path())
        {
            // The job follows its load: the worker takes commands in order.
            return Some(self.start_load(ModelRole::Main, &wanted.path, wanted.config_dir));
        }
        let job = self.queue.remove(index)?;
        let cancel = CancelToken::new();
        let total = match &job.work {
            Work::Generate(request) => request.effective_steps() as usize,
            Work::Upscale(_) => 0,
        };
        self.running = Some(RunningJob {
            id: job.id,
            work: job.work.clone(),
            cancel: cancel.clone(),
            stage: None,
            step: 0,
            total,
            denoise_start: None,
            its: None,
            cancelling: false,
        });
        Some(match job.work {
            Work::Generate(request) => Command::Generate {
                job: job.id,
                request,
                cancel,
            },
            Work::Upscale(request) => Command::Upscale {
                job: job.id,
                request,
                cancel,
            },
        })
    }

    /// With no generation left to make, the chosen model again where a plot's checkpoint
    /// replaced it (A1111 puts its checkpoint back after a plot too).
    fn chosen_back(&mut self) -> Option<Command> {
        let chosen = self.chosen.clone()?;
        let replaced = matches!(&self.model, ModelState::Ready(m) if m.path != chosen.path);
        let waiting = (self.queue.iter()).any(|j| matches!(j.work, Work::Generate(_)));
        (replaced && !waiting)
            .then(|| self.start_load(ModelRole::Main, &chosen.path, chosen.config_dir))
    }

    /// How many generations waiting are for whichever model is loaded (not for a plot's
    /// checkpoint).
    pub fn waiting_for_any_model(&self) -> usize {
        (self.queue.iter())
            .filter(|job| matches!(&job.work, Work::Generate(r) if r.checkpoint.is_none()))
            .count()
    }

    /// Stops the running job (within one step).
    pub fn cancel_running(&mut self) {
        if let Some(job) = &mut self.running {
            job.cancel.cancel();
            job.cancelling = true;
        }
    }

    /// Empties the queue (the running job goes on).
    pub fn clear_queue(&mut self) {
        self.queue.clear();
    }

    /// Takes in one worker event; returns a finished job for the app to show and save.
    pub fn apply(&mut self, event: Event, now: Instant) -> Option<Finished> {
        match event {
            Event::ModelLoading {
                path,
                role,
                step,
                total,
            } => self.load_progress(&path, role, step, total),
            Event::ModelLoaded {
                summary,
                role,
                elapsed,
            } => self.model_loaded(summary, role, elapsed),
            Event::ModelFailed {
                path,
                role,
                error,
                kept,
                needs_config,
                cancelled,
            } => self.model_failed(path, role, &error, kept, needs_config, cancelled),
            Event::ModelUnloaded(role) => {
                // The worker let go of the model it had; a load asked for since (the slot
                // is loading) comes after the unload and goes on.
                let slot = self.slot(role);
                if matches!(slot, ModelState::Ready(_)) {
                    *slot = ModelState::Empty;
                }
            }
            Event::GpuLost { error, reload } => self.gpu_was_lost(error, reload),
            Event::JobStarted { .. } => {}
            Event::Progress {
                job,
                stage,
                step,
                total,
                ..
            } => self.progress(job, stage, (step, total), now),
            Event::Finished {
                job,
                images,
                elapsed,
                warnings,
                ..
            } => {
                self.end_job(job);
                self.succeeded(Topic::Generate);
                for warning in warnings {
                    self.notify(Level::Warning, warning);
                }
                return Some(Finished {
                    id: job,
                    images,
                    elapsed,
                });
            }
            Event::Upscaled {
                job,
                image,
                elapsed,
            } => {
                self.end_job(job);
                self.succeeded(Topic::Generate);
                return Some(Finished {
                    id: job,
                    images: vec![image],
                    elapsed,
                });
            }
            Event::Cancelled { job } => {
                self.end_job(job);
                self.notify(Level::Info, "cancelled");
            }
            Event::Failed { job, error } => self.job_failed(job, error),
            Event::Notice { message, .. } => self.notify(Level::Warning, message),
            Event::Stopped { error } => self.worker_stopped(error),
        }
        None
    }

    fn end_job(&mut self, job: JobId) {
        if self.running.as_ref().is_some_and(|r| r.id == job) {
            self.running = None;
        }
    }
}
