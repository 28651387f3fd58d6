//! The form's add-on sections: ControlNet units (model, control image, preprocessor with its
//! thresholds and resolution, resize mode, weight, start / end, and the map the unit will
//! feed, drawn beside it) and a weight slider for every LoRA the prompt names.

use egui::{RichText, Slider};
use inference::canvas::FitMode;
use inference::control::Module;
use inference::control::preprocess::RESOLUTIONS;

use super::Parts;
use crate::gui::action::{Action, ControlAction, View};
use crate::gui::controlnet::{ControlUnitSettings, MAX_UNITS};
use crate::gui::dialogs::PathPurpose;
use crate::gui::models::EntryKind;

/// Side of the map preview, in points.
const PREVIEW: f32 = 96.0;

/// The ControlNet section: one collapsible block per unit.
pub fn section(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    let on = app.settings.controlnet.iter().filter(|u| u.enabled).count();
    let title = if on > 0 {
        format!("ControlNet ({on} on)")
    } else {
        "ControlNet".to_string()
    };
    egui::CollapsingHeader::new(title)
        .id_salt("controlnet")
        .show(ui, |ui| {
            let size = generation_size(app);
            for i in 0..app.settings.controlnet.len() {
                ui.push_id(("control unit", i), |ui| unit(ui, app, i, size, actions));
                ui.separator();
            }
            let room = app.settings.controlnet.len() < MAX_UNITS;
            if ui
                .add_enabled(room, egui::Button::new("Add ControlNet unit"))
                .clicked()
            {
                actions.push(Action::Control(ControlAction::AddUnit));
            }
        });
}

/// The size the next image is made at (the canvas's own in the Canvas view).
fn generation_size(app: &Parts<'_>) -> (u32, u32) {
    if app.view == View::Canvas && app.canvas.source.is_some() {
        app.canvas.size
    } else {
        (app.settings.width, app.settings.height)
    }
}

fn unit(
    ui: &mut egui::Ui,
    app: &mut Parts<'_>,
    i: usize,
    size: (u32, u32),
    actions: &mut Vec<Action>,
) {
    let zone = ui
        .scope(|ui| {
            ui.horizontal(|ui| {
                let s = &mut app.settings.controlnet[i];
                ui.checkbox(
                    &mut s.enabled,
                    RichText::new(format!("ControlNet {i}")).strong(),
                );
                if ui.small_button("Remove").clicked() {
                    actions.push(Action::Control(ControlAction::RemoveUnit(i)));
                }
            });
            model_choice(ui, app, i, actions);
            image_row(ui, app, i, size, actions);
            preprocessor(ui, &mut app.settings.controlnet[i]);
            strengths(ui, &mut app.settings.controlnet[i]);
        })
        .response
        .rect;
    app.controls.unit(i).drop_zone = Some(zone);
}

/// The model: ControlNets in the models folder, or any file.
fn model_choice(ui: &mut egui::Ui, app: &mut Parts<'_>, i: usize, actions: &mut Vec<Action>) {
    let current = app.settings.controlnet[i].model.clone();
    let shown = current.as_ref().map_or("choose a model".to_string(), |p| {
        p.file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    });
    ui.horizontal(|ui| {
        egui::ComboBox::from_label("Model")
            .selected_text(shown)
            .width(170.0)
            .show_ui(ui, |ui| {
                let entries = app
                    .models
                    .iter()
                    .filter(|e| e.kind == EntryKind::ControlNet);
                let mut any = false;
                for entry in entries {
                    any = true;
                    let chosen = current.as_ref() == Some(&entry.path);
                    if ui.selectable_label(chosen, &entry.name).clicked() {
                        actions.push(Action::Control(ControlAction::SetModel {
                            unit: i,
                            path: entry.path.clone(),
                        }));
                    }
                }
                if !any {
                    ui.weak("No ControlNet/ folder in the models folder");
                }
            });
        if ui
            .small_button("File…")
            .on_hover_text("Open a ControlNet file (control_v11p_sd15_*.safetensors / .pth)")
            .clicked()
        {
            actions.push(Action::Pick(PathPurpose::ControlModel(i)));
        }
    });
}

/// The control image and the map made from it.
fn image_row(
    ui: &mut egui::Ui,
    app: &mut Parts<'_>,
    i: usize,
    size: (u32, u32),
    actions: &mut Vec<Action>,
) {
    let settings = app.settings.controlnet[i].clone();
    let preview = app.controls.preview(ui.ctx(), i, &settings, size);
    ui.horizontal(|ui| {
        match &preview {
            Some(texture) => {
                let [w, h] = texture.size().map(|v| v as f32);
                let scale = PREVIEW / w.max(h);
                ui.image((texture.id(), egui::vec2(w * scale, h * scale)))
                    .on_hover_text(format!("The map this unit feeds, at {}×{}", size.0, size.1));
            }
            None => {
                let (rect, _) = ui
                    .allocate_exact_size(egui::vec2(PREVIEW, PREVIEW * 0.75), egui::Sense::hover());
                ui.painter().rect_stroke(
                    rect,
                    4.0,
                    ui.visuals().widgets.noninteractive.bg_stroke,
                    egui::StrokeKind::Inside,
                );
                ui.painter().text(
                    rect.center(),
                    egui::Align2::CENTER_CENTER,
                    "drop an image",
                    egui::FontId::proportional(11.0),
                    ui.visuals().weak_text_color(),
                );
            }
        }
        ui.vertical(|ui| {
            if ui.button("Open image…").clicked() {
                actions.push(Action::Pick(PathPurpose::ControlImage(i)));
            }
            if ui
                .add_enabled(
                    app.canvas.source.is_some(),
                    egui::Button::new("Canvas image"),
                )
                .on_hover_text("Use the Canvas tab's image")
                .clicked()
            {
                actions.push(Action::Control(ControlAction::UseCanvasImage(i)));
            }
            if let Some(path) = &settings.image {
                ui.weak(path.file_name().unwrap_or_default().to_string_lossy())
                    .on_hover_text(path.display().to_string());
            }
        });
    });
}

/// Preprocessor, its thresholds, resolution / Pixel Perfect and resize mode.
fn preprocessor(ui: &mut egui::Ui, s: &mut ControlUnitSettings) {
    let mut module = s.module;
    egui::ComboBox::from_label("Preprocessor")
        .selected_text(module.a1111_name())
        .show_ui(ui, |ui| {
            for m in Module::ALL {
                ui.selectable_value(&mut module, m, m.a1111_name());
            }
        });
    if module != s.module {
        s.set_module(module);
    }
    let [a, b] = s.module.sliders();
    for (slider, value) in [(a, &mut s.threshold_a), (b, &mut s.threshold_b)] {
        if let Some(slider) = slider {
            ui.add(
                Slider::new(value, slider.min..=slider.max)
                    .step_by(1.0)
                    .text(slider.label),
            );
        }
    }
    if s.module.uses_resolution() {
        ui.checkbox(&mut s.pixel_perfect, "Pixel Perfect")
            .on_hover_text("Run the preprocessor at the resolution the image size implies");
        ui.add_enabled(
            !s.pixel_perfect,
            Slider::new(&mut s.resolution, RESOLUTIONS)
                .step_by(8.0)
                .text("Preprocessor resolution"),
        );
    }
    egui::ComboBox::from_label("Resize mode")
        .selected_text(s.resize.controlnet_name())
        .show_ui(ui, |ui| {
            for mode in FitMode::ALL {
                ui.selectable_value(&mut s.resize, mode, mode.controlnet_name());
            }
        })
        .response
        .on_hover_text(
            "How the map meets the image size: stretch it, cover and crop the centre, or fit \
             inside on its border colour",
        );
}

/// Weight and the steps it guides.
fn strengths(ui: &mut egui::Ui, s: &mut ControlUnitSettings) {
    ui.add(
        Slider::new(&mut s.weight, 0.0..=2.0)
            .step_by(0.05)
            .text("Control weight"),
    );
    ui.add(
        Slider::new(&mut s.start, 0.0..=1.0)
            .step_by(0.01)
            .fixed_decimals(2)
            .text("Starting control step"),
    );
    ui.add(
        Slider::new(&mut s.end, 0.0..=1.0)
            .step_by(0.01)
            .fixed_decimals(2)
            .text("Ending control step"),
    );
    if s.start > s.end {
        ui.colored_label(
            ui.visuals().warn_fg_color,
            "The starting step is after the ending one",
        );
    }
}

/// A weight slider for each LoRA tag in the prompt (the tag is rewritten only when a slider
/// is moved: showing one never changes a weight, even outside the slider's range).
pub fn lora_weights(ui: &mut egui::Ui, prompt: &mut String) {
    let spans = inference::lora::tags::spans(prompt);
    if spans.is_empty() {
        return;
    }
    ui.collapsing(format!("LoRA weights ({})", spans.len()), |ui| {
        // One edit a frame: a rewrite moves the ranges of the tags after it.
        let mut edit = None;
        for (n, (range, tag)) in spans.iter().enumerate() {
            ui.push_id(("lora weight", n), |ui| {
                let mut t = tag.clone();
                let changed = if t.text_encoder != t.unet {
                    ui.label(&t.name);
                    let te = ui.add(weight_slider(&mut t.text_encoder, "text encoder"));
                    let unet = ui.add(weight_slider(&mut t.unet, "UNet"));
                    te.changed() || unet.changed()
                } else {
                    let response = ui.add(weight_slider(&mut t.unet, &t.name));
                    t.text_encoder = t.unet;
                    response.changed()
                };
                if changed && edit.is_none() {
                    edit = Some((range.clone(), t));
                }
            });
        }
        if let Some((range, tag)) = edit {
            *prompt = inference::lora::tags::set_weights(prompt, range, &tag);
        }
    });
}

/// A LoRA weight slider that never clamps or rounds what the prompt says.
fn weight_slider<'a>(value: &'a mut f32, text: &str) -> Slider<'a> {
    Slider::new(value, -1.0..=2.0)
        .clamping(egui::SliderClamping::Never)
        .text(text.to_string())
}
