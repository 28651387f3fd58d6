//! The model panel: what is loaded (family, layout, size, load warnings), loading progress
//! with cancel, the models folder with detected families and hashes, recent models, and the
//! output folder with the format results are saved in.

use egui::{ProgressBar, RichText};
use inference::api::VaeChoice;

use super::Parts;

/// Side of an add-on card's picture, in points.
const CARD_PICTURE: f32 = 40.0;
use crate::gui::action::Action;
use crate::gui::dialogs::PathPurpose;
use crate::gui::gallery::ThumbState;
use crate::gui::models::{EntryKind, Hash, ModelEntry, human_size, shown_names};
use crate::gui::session::ModelState;
use crate::gui::settings::{FileKind, SaveSettings};

pub fn draw(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    ui.heading("Model");
    match &app.session.model {
        ModelState::Empty => {
            ui.label("No model loaded.");
        }
        ModelState::Loading {
            path, step, total, ..
        } => {
            ui.label(format!("Loading {}", path.display()));
            let fraction = if *total > 0 {
                *step as f32 / *total as f32
            } else {
                0.0
            };
            ui.add(ProgressBar::new(fraction).show_percentage());
            if ui.button("Cancel loading").clicked() {
                actions.push(Action::CancelLoad);
            }
        }
        ModelState::Ready(m) => {
            ui.label(RichText::new(&m.name).strong());
            egui::Grid::new("model-facts")
                .num_columns(2)
                .show(ui, |ui| {
                    ui.label("Family");
                    ui.label(&m.family);
                    ui.end_row();
                    ui.label("Layout");
                    ui.label(&m.layout);
                    ui.end_row();
                    ui.label("Native size");
                    ui.label(format!("{}×{}", m.native_size.0, m.native_size.1));
                    ui.end_row();
                });
            if !m.notes.is_empty() {
                ui.collapsing(format!("Load report ({})", m.notes.len()), |ui| {
                    for note in &m.notes {
                        ui.label(note);
                    }
                });
            }
        }
    }
    vae_row(ui, &mut app.settings.vae, app.models);
    if let Some((path, role)) = &app.session.needs_config {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        ui.label(format!(
            "{name} is not its family's released size: Ember needs the diffusers folder that \
             describes it."
        ));
        if ui.button("Choose config folder…").clicked() {
            actions.push(Action::Pick(PathPurpose::ConfigFor {
                model: path.clone(),
                role: *role,
            }));
        }
    }
    ui.horizontal_wrapped(|ui| {
        if ui.button("Open model…").clicked() {
            actions.push(Action::Pick(PathPurpose::Model));
        }
        if ui
            .button("Open folder model…")
            .on_hover_text("A diffusers folder (with model_index.json)")
            .clicked()
        {
            actions.push(Action::Pick(PathPurpose::ModelFolder));
        }
        if ui
            .button("Type a path…")
            .on_hover_text("A checkpoint or diffusers folder by its path")
            .clicked()
        {
            actions.push(Action::TypePath(PathPurpose::Model));
        }
        if ui
            .button("Download…")
            .on_hover_text("SD 1.5, SDXL, or a Hugging Face or Civitai link")
            .clicked()
        {
            actions.push(Action::Download(crate::gui::action::DownloadAction::Show(
                true,
            )));
        }
    });

    ui.separator();
    ui.heading("Models folder");
    ui.horizontal(|ui| {
        match &app.settings.models_dir {
            Some(dir) => ui.label(dir.display().to_string()),
            None => ui.label("none chosen"),
        };
    });
    ui.horizontal(|ui| {
        if ui.button("Choose models folder…").clicked() {
            actions.push(Action::Pick(PathPurpose::ModelsFolder));
        }
        if app.settings.models_dir.is_some() && ui.button("Rescan").clicked() {
            actions.push(Action::RescanModels);
        }
    });
    let loaded = app.session.model().map(|m| m.path.as_path());
    models_list(ui, app.models, loaded, app.gallery, actions);

    if !app.settings.recent_models.is_empty() {
        ui.separator();
        ui.heading("Recent");
        let recent = &app.settings.recent_models;
        let names = shown_names(recent.iter().map(|p| p.as_path()));
        for (path, name) in recent.iter().zip(names) {
            if ui
                .selectable_label(loaded == Some(path.as_path()), name)
                .on_hover_text(path.display().to_string())
                .clicked()
            {
                actions.push(Action::LoadModel(path.clone()));
            }
        }
    }

    ui.separator();
    ui.heading("Output folder");
    ui.label(app.output_dir.clone().display().to_string());
    ui.horizontal(|ui| {
        if ui.button("Change…").clicked() {
            actions.push(Action::Pick(PathPurpose::OutputFolder));
        }
        if ui.button("Open folder").clicked() {
            actions.push(Action::OpenOutputFolder);
        }
    });
    saving_row(ui, &mut app.settings.saving);
}

/// The VAE that decodes (A1111's SD VAE): Automatic, the model's own, or one of the models
/// folder's VAE files.
fn vae_row(ui: &mut egui::Ui, chosen: &mut VaeChoice, entries: &[ModelEntry]) {
    let files: Vec<&ModelEntry> = entries
        .iter()
        .filter(|e| e.kind == EntryKind::Vae)
        .collect();
    let label = |choice: &VaeChoice| match choice {
        VaeChoice::Automatic => "Automatic".to_string(),
        VaeChoice::ModelsOwn => "None (the model's own)".to_string(),
        VaeChoice::File(path) => (files.iter().find(|e| e.path == *path))
            .map(|e| e.name.clone())
            .or_else(|| path.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| path.display().to_string()),
    };
    egui::ComboBox::from_label("VAE")
        .selected_text(label(chosen))
        .show_ui(ui, |ui| {
            ui.selectable_value(chosen, VaeChoice::Automatic, "Automatic")
                .on_hover_text(
                    "A VAE named after the checkpoint beside it (model.vae.safetensors), \
                     else the model's own",
                );
            let own = VaeChoice::ModelsOwn;
            let own_label = label(&own);
            ui.selectable_value(chosen, own, own_label);
            for entry in &files {
                let choice = VaeChoice::File(entry.path.clone());
                ui.selectable_value(chosen, choice, &entry.name)
                    .on_hover_text(entry.path.display().to_string());
            }
        })
        .response
        .on_hover_text(
            "The VAE turns latents into the picture (and an init image into latents). The \
             models folder's VAE/ files are listed here",
        );
}

/// The format results are saved in, and a JPEG's quality.
fn saving_row(ui: &mut egui::Ui, saving: &mut SaveSettings) {
    egui::ComboBox::from_label("Save as")
        .selected_text(saving.kind.label())
        .show_ui(ui, |ui| {
            for kind in FileKind::ALL {
                ui.selectable_value(&mut saving.kind, kind, kind.label());
            }
        })
        .response
        .on_hover_text(
            "The settings go into every format as A1111 writes them: a PNG text chunk, \
             or the EXIF of a JPEG or WebP",
        );
    if saving.kind == FileKind::Jpeg {
        ui.add(egui::Slider::new(&mut saving.jpeg_quality, 1..=100).text("JPEG quality"));
    }
}

/// The loadable models (click to load), then the other files by kind, folded.
fn models_list(
    ui: &mut egui::Ui,
    entries: &[ModelEntry],
    loaded: Option<&std::path::Path>,
    thumbs: &mut crate::gui::gallery::Gallery,
    actions: &mut Vec<Action>,
) {
    for entry in entries.iter().filter(|e| e.kind == EntryKind::Model) {
        let hash = match &entry.hash {
            Hash::Known(hash) => format!(" · {hash}"),
            Hash::NotYet | Hash::NotHashed => String::new(),
        };
        let text = format!(
            "{}\n{} · {}{hash}",
            entry.name,
            entry.family,
            human_size(entry.bytes)
        );
        let mut hover = entry.path.display().to_string();
        if entry.hash == Hash::NotYet {
            hover.push_str("\nhashed the first time it makes an image");
        }
        if ui
            .selectable_label(loaded == Some(entry.path.as_path()), text)
            .on_hover_text(hover)
            .clicked()
        {
            actions.push(Action::LoadModel(entry.path.clone()));
        }
    }
    let mut kinds: Vec<EntryKind> = entries
        .iter()
        .map(|e| e.kind)
        .filter(|k| *k != EntryKind::Model)
        .collect();
    kinds.dedup();
    for kind in kinds {
        let group: Vec<&ModelEntry> = entries.iter().filter(|e| e.kind == kind).collect();
        ui.collapsing(format!("{} ({})", kind.heading(), group.len()), |ui| {
            if matches!(kind, EntryKind::Embedding | EntryKind::Lora) {
                ui.weak("Click a name to add it to the prompt");
            }
            for entry in group {
                let stem = entry
                    .path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned());
                let word = match (kind, stem) {
                    (EntryKind::Embedding, Some(stem)) => Some((stem.clone(), stem)),
                    // A1111's tag, at weight 1 (Ctrl+Up / Down inside it change the weight).
                    (EntryKind::Lora, Some(stem)) => {
                        Some((stem.clone(), format!("<lora:{stem}:1>")))
                    }
                    _ => None,
                };
                if let Some((label, word)) = word {
                    let clicked = ui
                        .horizontal(|ui| {
                            // The card's picture: the preview kept beside the file.
                            if let Some(preview) = &entry.preview
                                && let ThumbState::Ready(texture) = thumbs.thumbnail(preview)
                            {
                                let size = texture.size_vec2();
                                let scale = CARD_PICTURE / size.x.max(size.y);
                                ui.image((texture.id(), size * scale));
                            }
                            ui.button(label)
                                .on_hover_text(entry.path.display().to_string())
                                .clicked()
                        })
                        .inner;
                    if clicked {
                        actions.push(Action::AddToPrompt(word));
                    }
                    continue;
                }
                let mut text = format!("{} · {}", entry.name, human_size(entry.bytes));
                if kind == EntryKind::NotLoadable {
                    text.push_str(&format!("\n{}", entry.family));
                }
                ui.label(text)
                    .on_hover_text(entry.path.display().to_string());
            }
        });
    }
}
