//! The Download window: the well-known checkpoints and preview decoders with their sizes and licenses, a URL
//! field (Hugging Face, Civitai, any HTTP(S) link), and the download under way with its
//! speed, time left and Cancel.

use egui::{ProgressBar, RichText};

use super::Parts;
use crate::cli::download_progress_line;
use crate::download::catalogue::CATALOGUE;
use crate::gui::action::{Action, DownloadAction};

pub fn window(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    let mut open = app.downloads.open;
    egui::Window::new("Download a model")
        .open(&mut open)
        .collapsible(false)
        .resizable(false)
        .default_width(460.0)
        .show(ui.ctx(), |ui| {
            ui.label(format!(
                "Saved in {} and loaded when done.",
                app.models_dir.display()
            ));
            let busy = app.downloads.active.is_some();
            egui::Grid::new("catalogue").striped(true).show(ui, |ui| {
                for entry in &CATALOGUE {
                    ui.label(RichText::new(entry.title).strong())
                        .on_hover_text(format!("{} · license: {}", entry.file_name, entry.license));
                    ui.weak(entry.size_text());
                    let button = ui.add_enabled(!busy, egui::Button::new("Download"));
                    if button.on_hover_text(entry.url).clicked() {
                        actions.push(Action::Download(DownloadAction::Start(entry.name.into())));
                    }
                    ui.end_row();
                }
            });
            ui.separator();
            let label = ui.label("Or a link (Hugging Face, Civitai, …)");
            ui.horizontal(|ui| {
                ui.add(
                    egui::TextEdit::singleline(&mut app.downloads.url)
                        .desired_width(330.0)
                        .hint_text("https://huggingface.co/…/model.safetensors"),
                )
                .labelled_by(label.id);
                let url = app.downloads.url.trim().to_string();
                if ui
                    .add_enabled(!busy && !url.is_empty(), egui::Button::new("Download link"))
                    .clicked()
                {
                    actions.push(Action::Download(DownloadAction::Start(url)));
                }
            });
            ui.weak("Gated models need HF_TOKEN (Hugging Face) or CIVITAI_TOKEN set before Ember starts.");
            if let Some(active) = &app.downloads.active {
                ui.separator();
                ui.label(format!("Downloading {}", active.label));
                let (fraction, text) = match &active.progress {
                    Some(p) => (
                        p.total.map_or(0.0, |t| p.done as f32 / t.max(1) as f32),
                        download_progress_line(p),
                    ),
                    None => (0.0, "connecting…".to_string()),
                };
                ui.add(ProgressBar::new(fraction).text(text));
                if ui.button("Cancel download").clicked() {
                    actions.push(Action::Download(DownloadAction::Cancel));
                }
            }
        });
    if open != app.downloads.open {
        actions.push(Action::Download(DownloadAction::Show(open)));
    }
}
