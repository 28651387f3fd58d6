//! The Gallery view: a grid of thumbnails of the output folder (only visible rows are
//! drawn and thumbnailed) and the selected image large with its parameters and actions.

use std::path::PathBuf;

use egui::RichText;
use inference::metadata::ImageMetadata;

use super::Parts;
use crate::gui::action::{Action, CanvasAction, ExtrasAction};
use crate::gui::gallery::{THUMB_SIDE, ThumbState};

pub fn draw(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    // The large view takes half the window by default and leaves the grid one column.
    let width = ui.available_width();
    egui::Panel::right("details")
        .resizable(true)
        .default_size((width * 0.5).max(320.0))
        .max_size((width - THUMB_SIDE as f32 - 48.0).max(320.0))
        .show(ui, |ui| details(ui, app, actions));
    egui::CentralPanel::default().show(ui, |ui| grid(ui, app, actions));
}

fn details(ui: &mut egui::Ui, app: &Parts<'_>, actions: &mut Vec<Action>) {
    // Keep the panel's width: egui shrinks a panel to what it drew, and the first frame may
    // draw only the one-line hint.
    ui.set_min_width(ui.available_width());
    let Some(selected) = &app.gallery.selected else {
        ui.label("Select an image to see it large with its settings.");
        return;
    };
    ui.label(
        RichText::new(
            selected
                .path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy(),
        )
        .strong(),
    );
    ui.horizontal_wrapped(|ui| {
        let has_settings = selected.metadata.is_some();
        if ui
            .add_enabled(has_settings, egui::Button::new("Reuse settings"))
            .on_hover_text("Prompt, steps, CFG, size, sampler; a new seed")
            .clicked()
        {
            actions.push(Action::ReuseSettings { with_seed: false });
        }
        if ui
            .add_enabled(has_settings, egui::Button::new("Reuse seed"))
            .on_hover_text("The settings and this image's seed and variation seed (locked)")
            .clicked()
        {
            actions.push(Action::ReuseSettings { with_seed: true });
        }
        if ui
            .add_enabled(has_settings, egui::Button::new("Copy parameters"))
            .clicked()
        {
            actions.push(Action::CopyParameters);
        }
        if ui
            .button("Send to canvas")
            .on_hover_text("Work on this image: img2img, inpaint, outpaint")
            .clicked()
        {
            actions.push(Action::Canvas(CanvasAction::SendTo(selected.path.clone())));
        }
        if ui
            .button("Send to Extras")
            .on_hover_text("Upscale this image with an ESRGAN model")
            .clicked()
        {
            actions.push(Action::Extras(ExtrasAction::OpenImage(
                selected.path.clone(),
            )));
        }
        if ui.button("Open folder").clicked() {
            actions.push(Action::OpenOutputFolder);
        }
        if ui
            .button("Delete")
            .on_hover_text("Move to the trash")
            .clicked()
        {
            actions.push(Action::DeleteSelected);
        }
    });
    if let Some(error) = &selected.error {
        ui.colored_label(egui::Color32::from_rgb(235, 80, 70), error);
    }
    let text = selected.parameters_text();
    egui::Panel::bottom("parameters")
        .resizable(true)
        .default_size(160.0)
        .show(ui, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| match &text {
                Some(text) => {
                    ui.add(egui::Label::new(RichText::new(text).monospace()).wrap());
                }
                None if selected.texture.is_some() => {
                    ui.label("No generation settings in this image.");
                }
                None => {}
            });
        });
    let seamless = match &selected.metadata {
        Some(ImageMetadata::A1111(p)) => inference::metadata::seamless(p),
        _ => inference::api::Seamless::Off,
    };
    match &selected.texture {
        Some(texture) if seamless.is_on() && super::output::show_tiled(ui) => {
            super::output::fit_tiled(ui, texture, seamless);
        }
        Some(texture) => super::output::fit_image(ui, texture),
        None if selected.error.is_none() => {
            ui.spinner();
        }
        None => {}
    }
}

fn grid(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    let dir = app.output_dir.clone();
    // Refresh first: a long folder path is cut short, never the button.
    ui.horizontal(|ui| {
        if ui.button("Refresh").clicked() {
            actions.push(Action::Show(crate::gui::action::View::Gallery));
        }
        if app.gallery.scanning {
            ui.spinner();
        }
        let count = app.gallery.entries.len();
        let noun = if count == 1 { "image" } else { "images" };
        ui.add(egui::Label::new(format!("{count} {noun} in {}", dir.display())).truncate())
            .on_hover_text(dir.display().to_string());
    });
    if app.gallery.entries.is_empty() && !app.gallery.scanning {
        ui.label("No images yet: everything you generate is saved here.");
        return;
    }
    let cell = THUMB_SIDE as f32 + 8.0;
    let columns = ((ui.available_width() / cell).floor() as usize).max(1);
    let rows = app.gallery.entries.len().div_ceil(columns);
    app.gallery.columns = columns;
    // A newly selected image (an arrow key steps to it) is scrolled into view: from afar by
    // offset, as only the rows on screen are drawn; from the edge by the thumbnail itself.
    let reveal = (app.gallery.reveal.take())
        .and_then(|path| app.gallery.entries.iter().position(|e| e.path == path))
        .map(|index| index / columns);
    let mut area = egui::ScrollArea::vertical();
    if let Some(row) = reveal.filter(|row| !app.gallery.visible_rows.contains(row)) {
        area = area.vertical_scroll_offset(row as f32 * (cell + ui.spacing().item_spacing.y));
    }
    let mut on_screen: Vec<PathBuf> = Vec::new();
    area.show_rows(ui, cell, rows, |ui, range| {
        app.gallery.visible_rows = range.clone();
        for row in range {
            ui.horizontal(|ui| {
                for col in 0..columns {
                    let Some(entry) = app.gallery.entries.get(row * columns + col) else {
                        break;
                    };
                    let path = entry.path.clone();
                    let name = path
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned();
                    let selected = app
                        .gallery
                        .selected
                        .as_ref()
                        .is_some_and(|s| s.path == path);
                    let response = match app.gallery.thumbnail(&path) {
                        ThumbState::Ready(texture) => {
                            let size = texture.size_vec2();
                            let scale = THUMB_SIDE as f32 / size.x.max(size.y);
                            ui.add_sized(
                                [cell - 8.0, cell - 8.0],
                                egui::Button::image(egui::Image::new((texture.id(), size * scale)))
                                    .selected(selected),
                            )
                        }
                        ThumbState::Pending => {
                            ui.add_sized([cell - 8.0, cell - 8.0], egui::Button::new("…"))
                        }
                        ThumbState::Failed => {
                            ui.add_sized([cell - 8.0, cell - 8.0], egui::Button::new("unreadable"))
                        }
                    };
                    // Screen readers (and the UI tests) find the image by its file name.
                    response.widget_info(|| {
                        egui::WidgetInfo::selected(egui::Role::Button, true, selected, &name)
                    });
                    if selected && reveal == Some(row) {
                        response.scroll_to_me(None);
                    }
                    if response.on_hover_text(&name).clicked() {
                        actions.push(Action::SelectImage(path.clone()));
                    }
                    on_screen.push(path);
                }
            });
        }
    });
    app.gallery.forget_offscreen(&on_screen);
}
