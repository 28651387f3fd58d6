//! Closing the window while images are still to be made, or finished ones wait unsaved: Ember
//! asks whether to keep them for the next start (`queue.json`, as a start-again keeps them),
//! quit without them, or stay open. A window with nothing to make or save closes at once.

use super::EmberApp;
use crate::gui::action::QuitAction;
use crate::gui::session::Level;

/// Whether Ember asks before closing, and whether the answer was to close.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quitting {
    /// The question shows.
    pub asked: bool,
    /// Close without asking (answered, or starting again).
    confirmed: bool,
}

impl EmberApp {
    /// The jobs still to make: the one under way (unless being cancelled) and those waiting.
    pub fn jobs_to_make(&self) -> usize {
        let running = (self.session.running.iter()).filter(|job| !job.cancelling);
        running.count() + self.session.queue.len()
    }

    /// Called before each frame (also while the window is minimised): a close asked for (its
    /// close button, the OS) waits for an answer while there are jobs to make.
    pub fn check_close(&mut self, ctx: &egui::Context) {
        let requested = ctx.input(|i| i.viewport().close_requested());
        if !requested || self.quitting.confirmed || self.device_choice.start_now {
            return;
        }
        // A save under way may yet come back unsaved: the close waits for its reply.
        if self.jobs_to_make() > 0 || !self.unsaved.is_empty() || self.saves_in_flight > 0 {
            ctx.send_viewport_cmd(egui::ViewportCommand::CancelClose);
            // A minimised window draws nothing: show it, so the question can be seen.
            ctx.send_viewport_cmd(egui::ViewportCommand::Minimized(false));
            ctx.send_viewport_cmd(egui::ViewportCommand::Focus);
            self.quitting.asked = true;
            ctx.request_repaint();
        }
    }

    /// Asked to end (a logout, Ctrl+C: [`crate::gui::termination`]): once the images being
    /// written are saved, closes keeping the jobs still to make and the images waiting
    /// unsaved for the next start, without asking.
    pub fn end_on_request(&mut self) {
        if self.quitting.confirmed {
            return;
        }
        if self.saves_in_flight > 0 {
            self.ctx.request_repaint();
            return;
        }
        let keep = self.jobs_to_make() > 0 || !self.unsaved.is_empty();
        self.perform_quit(if keep {
            QuitAction::KeepQueue
        } else {
            QuitAction::DropQueue
        });
    }

    /// Each frame: the jobs the question was about are done and saved (and no finished image
    /// waits unsaved), so the window closes, as asked.
    pub(super) fn quit_frame(&mut self) {
        let done = self.jobs_to_make() == 0 && self.unsaved.is_empty() && self.saves_in_flight == 0;
        if self.quitting.asked && done {
            self.perform_quit(QuitAction::DropQueue);
        }
    }

    /// Does what the question's answer asks.
    pub(super) fn perform_quit(&mut self, action: QuitAction) {
        self.quitting.asked = false;
        let keep = match action {
            QuitAction::Stay => return,
            QuitAction::KeepQueue => true,
            QuitAction::DropQueue => false,
        };
        if keep && let Err(e) = self.keep_queue() {
            self.session
                .notify(Level::Error, format!("Ember stays open: {e}"));
            return;
        }
        self.quitting.confirmed = true;
        self.ctx.send_viewport_cmd(egui::ViewportCommand::Close);
    }

    /// Whether the window closes (the question was answered so).
    pub fn closing(&self) -> bool {
        self.quitting.confirmed
    }
}
