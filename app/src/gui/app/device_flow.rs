//! The Device menu's side of the app: listing the machine's devices, and closing to start
//! again on the chosen one, now or once the queue is done (`gui::run` starts the new process
//! after the window has closed and the worker has stopped); and the queue, with the finished
//! images no folder took, kept across a start-again ([`crate::gui::queue_file`]).

use super::EmberApp;
use crate::gui::action::DeviceAction;
use crate::gui::device_choice::{chosen, in_words};
use crate::gui::gallery::store::ToSave;
use crate::gui::queue_file::{Kept, KeptImage, KeptJob, KeptQueue};
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
    /// done (or can no longer run: the worker stopped), or forgets it when the choice is the
    /// running device again.
    pub(super) fn device_frame(&mut self) {
        self.device_choice.poll();
        // Closing was asked for: quitting wins over starting again.
        if self.quitting.asked {
            return;
        }
        if self.device_choice.once_saved && self.saves_in_flight == 0 {
            self.device_choice.once_saved = false;
            self.start_again_now();
        }
        if !self.device_choice.when_idle {
            return;
        }
        // A stopped worker makes nothing more: its queue waits for the next process.
        let idle = self.session.running.is_none() && self.session.queue.is_empty();
        if !self.device_choice.needs_start_again(&self.settings.device) {
            self.device_choice.when_idle = false;
        } else if idle || self.session.stopped.is_some() {
            self.start_again_now();
        }
    }

    /// Saves the settings (the choice among them) and the queue (with the finished images
    /// waiting unsaved), and closes the window to start again; Ember stays open when either
    /// cannot be saved.
    fn start_again_now(&mut self) {
        self.device_choice.when_idle = false;
        // A save under way may yet come back unsaved: it is kept too once its reply is in.
        if self.saves_in_flight > 0 {
            self.device_choice.once_saved = true;
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

    /// Writes the job being made (it starts over), the queued ones and the finished images
    /// no folder took for the process that starts next; how many jobs were kept.
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
        let unsaved = self.unsaved.iter().map(KeptImage::from).collect();
        KeptQueue::in_dir(&self.paths.config_dir)
            .keep(Kept::new(jobs, unsaved))
            .map(|()| count)
            .map_err(|e| format!("the queue could not be kept ({e})"))
    }

    /// Waits, at most `limit`, for the replies of the images being saved, so that one coming
    /// back unsaved is kept with the queue (for a lost GPU's start-again, which has no frames
    /// left to wait in).
    pub fn wait_for_saves(&mut self, limit: std::time::Duration) {
        let until = std::time::Instant::now() + limit;
        while self.saves_in_flight > 0 && std::time::Instant::now() < until {
            match self.files.try_recv() {
                Some(reply) => self.on_file_reply(reply),
                None => std::thread::sleep(std::time::Duration::from_millis(5)),
            }
        }
    }

    /// Queues the jobs the last process kept as it started again, and keeps its unsaved
    /// images waiting to be saved again.
    pub(super) fn take_kept_queue(&mut self) {
        let Kept { jobs, unsaved, .. } = match KeptQueue::in_dir(&self.paths.config_dir).take() {
            Ok(kept) => kept,
            Err(e) => return self.session.notify(Level::Error, e),
        };
        if !unsaved.is_empty() {
            self.session.notify(
                Level::Warning,
                format!(
                    "{} finished image(s) that could not be saved before Ember last closed \
                     wait to be saved again (Save again)",
                    unsaved.len()
                ),
            );
            self.unsaved.extend(unsaved.into_iter().map(ToSave::from));
        }
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
