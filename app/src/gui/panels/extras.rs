//! The Extras view (A1111's Extras tab): an image, an ESRGAN upscaler and a factor on the
//! left; the image, the upscale's progress and its result in the middle.

use egui::{RichText, Slider};
use inference::add_on_folders::{UPSCALERS, for_app};
use inference::upscale::MAX_SCALE;

use super::Parts;
use super::output::{fit_image, progress};
use crate::gui::action::{Action, ExtrasAction};
use crate::gui::dialogs::PathPurpose;
use crate::gui::hires::model_files;

pub fn draw(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    egui::Panel::left("extras")
        .resizable(true)
        .default_size(300.0)
        .show(ui, |ui| controls(ui, app, actions));
    egui::CentralPanel::default().show(ui, |ui| {
        progress(ui, app, actions);
        let finished = app
            .extras
            .job
            .filter(|job| app.display.results_job == Some(*job))
            .and_then(|_| app.display.results.first());
        if let Some(shown) = finished {
            if let Some(path) = &shown.path {
                let saved = RichText::new(format!("saved {}", path.display())).weak();
                ui.add(egui::Label::new(saved).truncate())
                    .on_hover_text(path.display().to_string());
            }
            let [w, h] = shown.size;
            ui.label(format!("upscaled: {w}×{h}"));
            fit_image(ui, &shown.texture);
        } else if let (Some(source), Some(texture)) = (&app.extras.source, &app.extras.texture) {
            ui.label(format!(
                "{} · {}×{}",
                source
                    .path
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy(),
                source.image.width,
                source.image.height
            ));
            fit_image(ui, texture);
        } else {
            ui.vertical_centered(|ui| {
                ui.add_space(ui.available_height() / 3.0);
                ui.heading("Drop an image here to upscale it");
                ui.label("ESRGAN and Real-ESRGAN models (4x-UltraSharp, RealESRGAN_x4plus, …)");
            });
        }
    });
}

fn controls(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    ui.heading("ESRGAN upscale");
    if ui.button("Open image…").clicked() {
        actions.push(Action::Pick(PathPurpose::ExtrasImage));
    }
    let s = &mut app.settings.extras;
    let current = s
        .upscaler
        .as_ref()
        .and_then(|p| p.file_stem())
        .map_or("choose…".to_string(), |n| {
            n.to_string_lossy().into_owned()
        });
    let model = app.session.model().map(|m| m.path.clone());
    egui::ComboBox::from_label("Upscaler")
        .selected_text(current)
        .show_ui(ui, |ui| {
            // Read only while the list is open: the models folder's ESRGAN/ and the like.
            let dirs = for_app(
                app.settings.models_dir.as_deref(),
                model.as_deref(),
                UPSCALERS,
            );
            for path in model_files(&dirs) {
                let name = path
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                if ui
                    .selectable_label(s.upscaler.as_ref() == Some(&path), name)
                    .clicked()
                {
                    actions.push(Action::Extras(ExtrasAction::SetUpscaler(path)));
                }
            }
            if ui.selectable_label(false, "Open a file…").clicked() {
                actions.push(Action::Pick(PathPurpose::Upscaler));
            }
        })
        .response
        .on_hover_text("ESRGAN / Real-ESRGAN models; put them in the models folder's ESRGAN/");
    ui.add(
        Slider::new(&mut s.scale, 1.0..=MAX_SCALE)
            .step_by(0.5)
            .text("Scale by"),
    );
    ui.checkbox(&mut s.a1111_channels, "BGR, as A1111")
        .on_hover_text(
            "A1111 feeds the network blue-green-red; the models were trained on RGB, which \
             ComfyUI feeds (off)",
        );
    let ready = app.extras.source.is_some() && s.upscaler.is_some();
    if ui
        .add_enabled(ready, egui::Button::new(RichText::new("Upscale").strong()))
        .clicked()
    {
        actions.push(Action::Extras(ExtrasAction::Upscale));
    }
    if let Some(source) = &app.extras.source {
        let (w, h) = (source.image.width, source.image.height);
        match inference::upscale::target_size((w, h), s.scale) {
            Ok((tw, th)) => ui.weak(format!("{w}×{h} to {tw}×{th}")),
            Err(e) => ui.colored_label(ui.visuals().warn_fg_color, e.to_string()),
        };
    }
}
