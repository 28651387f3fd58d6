//! The Device menu's side of the app: listing the machine's devices, and closing to start
//! again on the chosen one, now or once the queue is done (`gui::run` starts the new process
//! after the window has closed and the worker has stopped); and the queue kept across a
//! start-again ([`crate::gui::queue_file`]).

use super::EmberApp;
use crate::gui::action::DeviceAction;
use crate::gui::device_choice::{chosen, in_words};
use crate::gui::queue_file::{KeptJob, KeptQueue};
use crate::gui::session::Level;
use crate::gui::session::Work;

impl EmberApp {
    /// Does what a Device menu action asks.
    pub(super) fn perform_device(&mut self, action: DeviceAction) {
        match action {
            DeviceAction::List => {
                let ctx = self.ctx.clone();
                self.device_choice.list(move || ctx.request_repaint());
            }
            DeviceAction::StartAgain { when_idle: false } => self.start_again_now(),
            DeviceAction::StartAgain { when_idle: true } => {
                self.device_choice.when_idle = true;
                let device = in_words(chosen(&self.settings.device));
                self.session.notify(
                    Level::Info,
                    format!("Ember starts again on {device} once the queue is done."),
                );
            }
            DeviceAction::StayOpen => self.device_choice.when_idle = false,
        }
    }

    /// Each frame: takes in the device list; starts again once the queue it waits for is
    /// done, or forgets it when the choice is the running device again.
    pub(super) fn device_frame(&mut self) {
        self.device_choice.poll();
        // Closing was asked for: quitting wins over starting again.
        if !self.device_choice.when_idle || self.quitting.asked {
            return;
        }
        if !self.device_choice.needs_start_again(&self.settings.device) {
            self.device_choice.when_idle = false;
        } else if self.session.running.is_none() && self.session.queue.is_empty() {
            self.start_again_now();
        }
    }

    /// Saves the settings (the choice among them) and the queue, and closes the window to
    /// start again; Ember stays open when either cannot be saved, or while finished images
    /// wait unsaved, as they would be lost.
    fn start_again_now(&mut self) {
        self.device_choice.when_idle = false;
        // Finished images no folder took live only in this process.
        if !self.unsaved.is_empty() {
            self.session.notify(
                Level::Error,
                "Ember did not start again: finished images are not saved yet (Save again \
                 first)",
            );
            return;
        }
        let saved = self.settings_file.save(&self.settings);
        if let Err(e) = saved.and_then(|()| self.keep_queue().map(drop)) {
            self.session
                .notify(Level::Error, format!("Ember did not start again: {e}"));
            return;
        }
        self.device_choice.start_now = true;
        self.ctx.send_viewport_cmd(egui::ViewportCommand::Close);
    }

    /// Whether the window closes to start again on the chosen device.
    pub fn starts_again(&self) -> bool {
        self.device_choice.start_now
    }

    /// Writes the job being made (it starts over) and the queued ones for the process that
    /// starts next; how many were kept.
    pub fn keep_queue(&self) -> Result<usize, String> {
        let running = (self.session.running.iter())
            .filter(|job| !job.cancelling)
            .map(|job| (job.id, &job.work));
        let queued = self.session.queue.iter().map(|job| (job.id, &job.work));
        let jobs: Vec<KeptJob> = running
            .chain(queued)
            .map(|(id, work)| KeptJob {
                work: work.clone(),
                canvas: self.canvas_jobs.get(&id).cloned(),
            })
            .collect();
        let count = jobs.len();
        KeptQueue::in_dir(&self.paths.config_dir)
            .keep(jobs)
            .map(|()| count)
            .map_err(|e| format!("the queue could not be kept ({e})"))
    }

    /// Queues the jobs the last process kept as it started again.
    pub(super) fn take_kept_queue(&mut self) {
        let jobs = match KeptQueue::in_dir(&self.paths.config_dir).take() {
            Ok(jobs) => jobs,
            Err(e) => return self.session.notify(Level::Error, e),
        };
        if jobs.is_empty() {
            return;
        }
        let count = jobs.len();
        for job in jobs {
            let id = match job.work {
                Work::Generate(request) => self.session.enqueue(*request),
                Work::Upscale(request) => self.session.enqueue_upscale(*request),
            };
            if let Some(canvas) = job.canvas {
                self.canvas_jobs.insert(id, canvas);
            }
        }
        self.session.notify(
            Level::Info,
            format!(
                "{count} job(s) kept when Ember last closed are queued again (an image \
                 being made then starts over)."
            ),
        );
    }
}
