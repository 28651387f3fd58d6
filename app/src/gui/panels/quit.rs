//! The question shown when the window is closed with images still to be made: keep them for
//! the next start, quit without them, or stay.

use super::Parts;
use crate::gui::action::{Action, QuitAction};

pub(super) fn question(ui: &mut egui::Ui, app: &Parts<'_>, actions: &mut Vec<Action>) {
    let session = app.session;
    let under_way = session.running.iter().filter(|job| !job.cancelling).count();
    let waiting = session.queue.len();
    let what = match (under_way, waiting) {
        (0, n) => format!("{n} job(s) are waiting to be made."),
        (_, 0) => "An image is being made.".to_string(),
        (_, n) => format!("An image is being made and {n} more job(s) are waiting."),
    };
    let answer = egui::Modal::new(egui::Id::unique("quit question")).show(ui.ctx(), |ui| {
        ui.heading("Quit Ember?");
        ui.label(what);
        ui.label(
            "Kept jobs are queued again the next time Ember starts (an image being made \
             starts over).",
        );
        ui.add_space(6.0);
        let mut answer = None;
        ui.horizontal(|ui| {
            if ui.button("Keep them and quit").clicked() {
                answer = Some(QuitAction::KeepQueue);
            }
            if ui.button("Quit without them").clicked() {
                answer = Some(QuitAction::DropQueue);
            }
            if ui.button("Don't quit").clicked() {
                answer = Some(QuitAction::Stay);
            }
        });
        answer
    });
    let answer = answer
        .inner
        .or(answer.should_close().then_some(QuitAction::Stay));
    if let Some(answer) = answer {
        actions.push(Action::Quit(answer));
    }
}
