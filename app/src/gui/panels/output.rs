//! The central area of the Generate view: the empty state (no model; then no image yet),
//! progress with speed and ETA, the queue, and the live preview replaced by the result.

use egui::{ProgressBar, RichText, TextureHandle};
use inference::api::{Seamless, Stage};

use super::Parts;
use crate::gui::action::{Action, CanvasAction, DownloadAction, ExtrasAction};
use crate::gui::dialogs::PathPurpose;
use crate::gui::session::{ModelState, RunningJob, Work};

pub fn draw(ui: &mut egui::Ui, app: &Parts<'_>, actions: &mut Vec<Action>) {
    if matches!(app.session.model, ModelState::Empty)
        && app.display.results.is_empty()
        && app.session.running.is_none()
    {
        empty_state(ui, actions);
        return;
    }
    progress(ui, app, actions);
    if app.session.running.is_none() && app.display.results.is_empty() {
        ready_state(ui);
        return;
    }
    let image = if app.session.running.is_some() {
        app.display.preview.as_ref()
    } else {
        let first = app.display.results.first();
        // Above the rows of saved paths, which come a moment after the image: the switch
        // stays where it is when they do.
        let tiled = first.is_some_and(|f| f.seamless.is_on()) && show_tiled(ui);
        for shown in &app.display.results {
            if let Some(path) = &shown.path {
                // The button first: a long path is cut short, never the button.
                ui.horizontal(|ui| {
                    if ui.small_button("Send to canvas").clicked() {
                        actions.push(Action::Canvas(CanvasAction::SendTo(path.clone())));
                    }
                    if ui.small_button("Send to Extras").clicked() {
                        actions.push(Action::Extras(ExtrasAction::OpenImage(path.clone())));
                    }
                    let saved = RichText::new(format!("saved {}", path.display())).weak();
                    ui.add(egui::Label::new(saved).truncate())
                        .on_hover_text(path.display().to_string());
                });
            }
        }
        if let Some(first) = first.filter(|_| tiled) {
            fit_tiled(ui, &first.texture, first.seamless);
            return;
        }
        first.map(|s| &s.texture)
    };
    if let Some(texture) = image {
        fit_image(ui, texture);
    }
}

/// The "Show tiled" switch a seamless image gets (one for the result and the gallery):
/// runtime state (egui's memory), off again at the next start.
pub fn show_tiled(ui: &mut egui::Ui) -> bool {
    let id = egui::Id::unique("show tiled");
    let mut tiled = ui.data(|d| d.get_temp::<bool>(id)).unwrap_or(false);
    let toggle = ui
        .checkbox(&mut tiled, "Show tiled")
        .on_hover_text("Repeat the image along the edges that meet, to look for seams");
    if toggle.changed() {
        ui.data_mut(|d| d.insert_temp(id, tiled));
    }
    tiled
}

/// Shows a texture three times along each axis `seamless` wraps (3×3 for both), as large
/// as fits: the middle copy is the image, its neighbours show how it continues.
pub fn fit_tiled(ui: &mut egui::Ui, texture: &TextureHandle, seamless: Seamless) {
    let counts = egui::vec2(
        if seamless.x() { 3.0 } else { 1.0 },
        if seamless.y() { 3.0 } else { 1.0 },
    );
    let tile = texture.size_vec2();
    let available = ui.available_size();
    let grid = tile * counts;
    let scale = (available.x / grid.x).min(available.y / grid.y).max(0.01);
    let (rect, _) = ui.allocate_exact_size(available, egui::Sense::hover());
    let shown = egui::Rect::from_center_size(rect.center(), grid * scale);
    let middle = ((counts.x as usize) / 2, (counts.y as usize) / 2);
    for row in 0..counts.y as usize {
        for column in 0..counts.x as usize {
            let min = shown.min + egui::vec2(column as f32, row as f32) * tile * scale;
            let place = egui::Rect::from_min_size(min, tile * scale);
            let what = if (column, row) == middle {
                "the image"
            } else {
                "a repeated copy"
            };
            let image = egui::Image::new((texture.id(), tile * scale)).alt_text(what);
            ui.put(place, image);
        }
    }
}

fn empty_state(ui: &mut egui::Ui, actions: &mut Vec<Action>) {
    ui.vertical_centered(|ui| {
        ui.add_space(ui.available_height() / 3.0);
        ui.heading(
            "Drop a Stable Diffusion checkpoint here, choose a models folder, or download one",
        );
        ui.label("A .safetensors or .ckpt file, or a diffusers folder: SD 1.x, SD 2.x and SDXL.");
        ui.label(
            "Checkpoints come from their authors' pages on Hugging Face or Civitai; a models \
             folder (A1111's models/Stable-diffusion works) lists them all in the model panel.",
        );
        ui.add_space(12.0);
        ui.horizontal(|ui| {
            ui.add_space((ui.available_width() - 480.0).max(0.0) / 2.0);
            if ui.button("Open model…").clicked() {
                actions.push(Action::Pick(PathPurpose::Model));
            }
            if ui.button("Choose models folder…").clicked() {
                actions.push(Action::Pick(PathPurpose::ModelsFolder));
            }
            if ui
                .button("Download a model…")
                .on_hover_text("SD 1.5, SDXL, or any Hugging Face or Civitai link")
                .clicked()
            {
                actions.push(Action::Download(DownloadAction::Show(true)));
            }
        });
    });
}

/// A model but no image yet: where the picture will form, and how to start it.
fn ready_state(ui: &mut egui::Ui) {
    ui.vertical_centered(|ui| {
        ui.add_space(ui.available_height() / 3.0);
        ui.label(RichText::new(READY_HINT).heading().weak());
        ui.label(
            RichText::new(
                "The picture forms here step by step; every image is saved to the output \
                 folder and listed in the Gallery.",
            )
            .weak(),
        );
    });
}

/// What the Create view says until the first image.
const READY_HINT: &str = "Type a prompt and press Generate (Ctrl+Enter)";

/// The running job's progress bar, step, speed and ETA, its Cancel, and the queue (or
/// Generate forever) with Cancel all (Create and Canvas both show it).
pub fn progress(ui: &mut egui::Ui, app: &Parts<'_>, actions: &mut Vec<Action>) {
    if let Some(job) = &app.session.running {
        ui.horizontal(|ui| {
            ui.label(job.work.label());
            if job.cancelling {
                ui.add_enabled(false, egui::Button::new("Cancelling…"));
            } else if ui
                .button("Cancel")
                .on_hover_text("Esc: stop this image (the queue goes on)")
                .clicked()
            {
                actions.push(Action::Cancel);
            }
        });
        ui.add(ProgressBar::new(job.fraction()).text(progress_text(job)));
    }
    if !app.session.queue.is_empty() {
        ui.horizontal(|ui| {
            let seeds: Vec<String> = app
                .session
                .queue
                .iter()
                .take(8)
                .map(|j| match &j.work {
                    Work::Generate(r) => Work::seed_text(r),
                    Work::Upscale(_) => "an upscale".into(),
                })
                .collect();
            let more = app.session.queue.len().saturating_sub(8);
            let mut text = format!("queued: seeds {}", seeds.join(", "));
            if more > 0 {
                text.push_str(&format!(" and {more} more"));
            }
            ui.label(text);
            if ui.button("Clear queue").clicked() {
                actions.push(Action::ClearQueue);
            }
            cancel_all(ui, app, actions);
        });
    } else if app.session.forever {
        ui.horizontal(|ui| {
            ui.label("Generating forever: another image once this one is made");
            cancel_all(ui, app, actions);
        });
    }
    if let Some(status) = &app.plot_status {
        ui.weak(status);
    }
}

/// Cancel all, while an image is under way: it stops, with the queue and Generate forever.
fn cancel_all(ui: &mut egui::Ui, app: &Parts<'_>, actions: &mut Vec<Action>) {
    if app.session.running.is_some()
        && ui
            .button("Cancel all")
            .on_hover_text("Stop this image, empty the queue and stop Generate forever")
            .clicked()
    {
        actions.push(Action::CancelAll);
    }
}

fn progress_text(job: &RunningJob) -> String {
    if job.cancelling {
        return "cancelling…".to_string();
    }
    match job.stage {
        None => "starting…".to_string(),
        Some(Stage::EncodingPrompt) => "encoding the prompt…".to_string(),
        Some(Stage::EncodingImage) => "encoding the image…".to_string(),
        Some(Stage::Denoising) => {
            let mut t = format!("step {}/{}", job.step, job.total);
            if let Some(its) = job.its {
                if its >= 1.0 {
                    t.push_str(&format!(" · {its:.2} it/s"));
                } else {
                    t.push_str(&format!(" · {:.2} s/it", 1.0 / its));
                }
            }
            if let Some(eta) = job.eta() {
                t.push_str(&format!(" · ETA {}", format_duration(eta)));
            }
            t
        }
        Some(Stage::Decoding) => "decoding…".to_string(),
        Some(Stage::Upscaling) => format!("upscaling: tile {}/{}", job.step, job.total),
    }
}

/// `12 s`, `3 min 05 s`.
pub fn format_duration(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    if secs < 60 {
        format!("{secs} s")
    } else {
        format!("{} min {:02} s", secs / 60, secs % 60)
    }
}

/// Shows a texture as large as fits, keeping its aspect ratio.
pub fn fit_image(ui: &mut egui::Ui, texture: &TextureHandle) {
    let available = ui.available_size();
    let size = texture.size_vec2();
    let scale = (available.x / size.x).min(available.y / size.y).max(0.01);
    ui.centered_and_justified(|ui| {
        ui.add(egui::Image::new((texture.id(), size * scale)));
    });
}
