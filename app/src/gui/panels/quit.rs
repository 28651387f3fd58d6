//! The question shown when the window is closed with images still to be made or finished
//! images not saved: keep them for the next start, quit without them, or stay.

use super::Parts;
use crate::gui::action::{Action, QuitAction};

pub(super) fn question(ui: &mut egui::Ui, app: &Parts<'_>, actions: &mut Vec<Action>) {
    let session = app.session;
    let under_way = session.running.iter().filter(|job| !job.cancelling).count();
    let waiting = session.queue.len();
    let what = match (under_way, waiting) {
        (0, 0) => None,
        (0, n) => Some(format!("{n} job(s) are waiting to be made.")),
        (_, 0) => Some("An image is being made.".to_string()),
        (_, n) => Some(format!(
            "An image is being made and {n} more job(s) are waiting."
        )),
    };
    let answer = egui::Modal::new(egui::Id::unique("quit question")).show(ui.ctx(), |ui| {
        ui.heading("Quit Ember?");
        if app.unsaved > 0 {
            ui.colored_label(
                ui.visuals().warn_fg_color,
                format!(
                    "{} finished image(s) could not be saved. Keep them and they wait to be \
                     saved again at the next start; or don't quit, free some space or choose \
                     another output folder, and Save again.",
                    app.unsaved
                ),
            );
        }
        if app.saving > 0 {
            ui.label(format!("{} image(s) are being saved.", app.saving));
        }
        if let Some(what) = &what {
            ui.label(what);
            ui.label(
                "Kept jobs are queued again the next time Ember starts (an image being made \
                 starts over).",
            );
        }
        ui.add_space(6.0);
        let mut answer = None;
        ui.horizontal(|ui| {
            if ui.button("Keep them and quit").clicked() {
                answer = Some(QuitAction::KeepQueue);
            }
            let quit = if what.is_some() {
                "Quit without them"
            } else {
                "Quit and lose them"
            };
            if ui.button(quit).clicked() {
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
