//! The Device menu's side of the app: listing the machine's devices, and closing to start
//! again on the chosen one, now or once the queue is done (`gui::run` starts the new process
//! after the window has closed and the worker has stopped).

use super::EmberApp;
use crate::gui::action::DeviceAction;
use crate::gui::device_choice::chosen;
use crate::gui::session::Level;

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
                let device = chosen(&self.settings.device);
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
        if !self.device_choice.when_idle {
            return;
        }
        if !self.device_choice.needs_start_again(&self.settings.device) {
            self.device_choice.when_idle = false;
        } else if self.session.running.is_none() && self.session.queue.is_empty() {
            self.start_again_now();
        }
    }

    /// Saves the settings (the choice among them) and closes the window to start again;
    /// Ember stays open when the settings cannot be saved, as the choice would be lost.
    fn start_again_now(&mut self) {
        self.device_choice.when_idle = false;
        if let Err(e) = self.settings_file.save(&self.settings) {
            self.session.notify(
                Level::Error,
                format!("Ember did not start again: could not save the settings ({e})"),
            );
            return;
        }
        self.device_choice.start_now = true;
        self.ctx.send_viewport_cmd(egui::ViewportCommand::Close);
    }

    /// Whether the window closes to start again on the chosen device.
    pub fn starts_again(&self) -> bool {
        self.device_choice.start_now
    }
}
