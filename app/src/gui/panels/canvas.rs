//! The canvas view: the source image with its painted mask, the inpainting options beside
//! the prompt, and the last result. Mask edits change the canvas state directly (like the
//! form edits the settings); files and generating go through [`Action`]s.

use egui::{Color32, PointerButton, Rect, Role, Sense, Stroke, WidgetInfo};

use inference::api::MaskedContent;
use inference::canvas::FitMode;

use super::Parts;
use super::form;
use crate::gui::action::{Action, CanvasAction};
use crate::gui::dialogs::PathPurpose;

pub fn draw(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    shortcuts(ui.ctx(), app);
    let width = ui.available_width();
    let mut settings_open = app.settings.layout.settings_panel;
    egui::Panel::left("canvas-settings")
        .resizable(true)
        .default_size(320.0)
        .max_size((width * 0.45).max(240.0))
        .show_collapsible(ui, &mut settings_open, |ui| {
            egui::ScrollArea::vertical().show(ui, |ui| {
                form::draw(ui, app, actions);
                ui.separator();
                options(ui, app, actions);
            });
        });
    app.settings.layout.settings_panel = settings_open;
    let previewing = app.session.running.is_some() && app.display.preview.is_some();
    if app.canvas.result.is_some() || previewing {
        egui::Panel::right("canvas-result")
            .resizable(true)
            .default_size(360.0)
            .max_size((width * 0.4).max(200.0))
            .show(ui, |ui| result(ui, app, actions));
    }
    egui::CentralPanel::default().show(ui, |ui| {
        super::output::progress(ui, app, actions);
        if let Some(hint) = &app.canvas.hint {
            ui.label(egui::RichText::new(hint).strong());
        }
        // The brush is the saved one whether or not the settings panel shows its sliders.
        app.canvas.brush.size = app.settings.canvas.brush_size;
        app.canvas.brush.hardness = app.settings.canvas.brush_hardness;
        painter(ui, app);
    });
}

/// The largest brush, in image pixels (the slider's end; `]` stops there too).
const MAX_BRUSH: f32 = 512.0;

/// `[` / `]` brush size, `B` brush, `E` eraser, Ctrl+Z undo, Ctrl+Shift+Z redo — unless a
/// text field has the keyboard.
fn shortcuts(ctx: &egui::Context, app: &mut Parts<'_>) {
    if ctx.egui_wants_keyboard_input() {
        return;
    }
    let canvas = &mut app.canvas;
    let settings = &mut app.settings.canvas;
    // Every press counts, several in one frame too (a busy frame, a held key).
    ctx.input_mut(|i| {
        let redo = egui::Modifiers::COMMAND | egui::Modifiers::SHIFT;
        for _ in 0..i.count_and_consume_key(redo, egui::Key::Z) {
            canvas.redo();
        }
        for _ in 0..i.count_and_consume_key(egui::Modifiers::COMMAND, egui::Key::Z) {
            canvas.undo();
        }
        let smaller = i.count_and_consume_key(egui::Modifiers::NONE, egui::Key::OpenBracket);
        let larger = i.count_and_consume_key(egui::Modifiers::NONE, egui::Key::CloseBracket);
        if larger != smaller {
            let factor = 1.25f32.powi(larger as i32 - smaller as i32);
            settings.brush_size = (settings.brush_size * factor).clamp(1.0, MAX_BRUSH);
        }
        if i.consume_key(egui::Modifiers::NONE, egui::Key::E) {
            canvas.brush.erase = true;
        }
        if i.consume_key(egui::Modifiers::NONE, egui::Key::B) {
            canvas.brush.erase = false;
        }
    });
}

fn options(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    ui.heading("Canvas");
    ui.horizontal(|ui| {
        if ui.button("Open image…").clicked() {
            actions.push(Action::Pick(PathPurpose::CanvasImage));
        }
        if ui.button("Paste image").clicked() {
            actions.push(Action::Canvas(CanvasAction::PasteImage));
        }
        if ui
            .add_enabled(app.canvas.source.is_some(), egui::Button::new("Load mask…"))
            .clicked()
        {
            actions.push(Action::Pick(PathPurpose::Mask));
        }
    });
    let steps = app.settings.steps;
    let s = &mut app.settings.canvas;
    ui.add(egui::Slider::new(&mut s.strength, 0.0..=1.0).text("Strength"));
    let effective = ((f64::from(steps) * f64::from(s.strength)) as u32).min(steps);
    ui.label(format!("{effective} of {steps} steps run on the image"));

    ui.separator();
    let canvas = &mut app.canvas;
    ui.horizontal(|ui| {
        if ui
            .selectable_label(!canvas.brush.erase, "Brush (B)")
            .clicked()
        {
            canvas.brush.erase = false;
        }
        if ui
            .selectable_label(canvas.brush.erase, "Eraser (E)")
            .clicked()
        {
            canvas.brush.erase = true;
        }
    });
    ui.add(
        egui::Slider::new(&mut s.brush_size, 1.0..=MAX_BRUSH)
            .logarithmic(true)
            // Shown in whole image pixels, kept as it is: `[` and `]` scale it by a factor,
            // which rounding would stop at 1 px (`max_decimals` rounds the value itself).
            .custom_formatter(|size, _| format!("{size:.0}"))
            .text("Size ([ ])"),
    );
    ui.add(egui::Slider::new(&mut s.brush_hardness, 0.0..=1.0).text("Hardness"));
    if ui
        .add(egui::Slider::new(&mut s.overlay_opacity, 0.0..=1.0).text("Mask opacity"))
        .changed()
    {
        canvas.refresh_overlay();
    }
    ui.horizontal(|ui| {
        if ui
            .add_enabled(canvas.can_undo(), egui::Button::new("Undo"))
            .clicked()
        {
            canvas.undo();
        }
        if ui
            .add_enabled(canvas.can_redo(), egui::Button::new("Redo"))
            .clicked()
        {
            canvas.redo();
        }
        if ui.button("Clear mask").clicked() {
            canvas.clear_mask();
        }
        if ui.button("Invert mask").clicked() {
            canvas.invert_mask();
        }
    });

    ui.separator();
    ui.add(egui::Slider::new(&mut s.mask_blur, 0..=64).text("Mask blur"));
    ui.horizontal(|ui| {
        ui.radio_value(&mut s.only_masked, false, "Whole picture");
        ui.radio_value(&mut s.only_masked, true, "Only masked");
    });
    if s.only_masked {
        ui.add(egui::Slider::new(&mut s.padding, 0..=256).text("Only masked padding"));
    }
    egui::ComboBox::from_label("Masked content")
        .selected_text(s.masked_content.a1111_name())
        .show_ui(ui, |ui| {
            for value in MaskedContent::ALL {
                ui.selectable_value(&mut s.masked_content, value, value.a1111_name());
            }
        });
    ui.checkbox(&mut s.composite, "Keep unmasked pixels exactly (composite)");
    egui::ComboBox::from_label("Resize mode")
        .selected_text(s.resize_mode.a1111_name())
        .show_ui(ui, |ui| {
            for mode in FitMode::ALL {
                ui.selectable_value(&mut s.resize_mode, mode, mode.a1111_name());
            }
        })
        .response
        .on_hover_text("When the size above differs from the image's (whole picture only)");

    ui.separator();
    ui.horizontal(|ui| {
        ui.label("Outpaint");
        let response = ui.add(
            egui::DragValue::new(&mut s.outpaint_pixels)
                .speed(8.0)
                .range(8..=1024)
                .suffix(" px"),
        );
        if !response.dragged() && !response.has_focus() {
            // Multiples of 8, as generation sizes are.
            s.outpaint_pixels = s.outpaint_pixels.div_ceil(8) * 8;
        }
    });
    ui.horizontal(|ui| {
        let enabled = canvas.source.is_some();
        for (label, side) in [("Left", 0), ("Right", 1), ("Up", 2), ("Down", 3)] {
            if ui.add_enabled(enabled, egui::Button::new(label)).clicked() {
                actions.push(Action::Canvas(CanvasAction::Outpaint {
                    left: side == 0,
                    right: side == 1,
                    up: side == 2,
                    down: side == 3,
                }));
            }
        }
    });
}

/// The live preview while a job runs, else the last result.
fn result(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    if let (Some(_), Some(preview)) = (&app.session.running, &app.display.preview) {
        ui.heading("Preview");
        ui.label(format!("step {}", app.display.preview_step));
        let size = preview.size_vec2();
        ui.image((preview.id(), size * (ui.available_width() / size.x)));
        return;
    }
    ui.heading("Result");
    let canvas = &mut app.canvas;
    if ui
        .checkbox(&mut canvas.show_raw, "Show raw result")
        .changed()
    {
        canvas.result_texture = None;
    }
    if let Some((composite, raw)) = &canvas.result {
        let image = if canvas.show_raw { raw } else { composite };
        let texture = canvas.result_texture.get_or_insert_with(|| {
            crate::gui::texture::load(
                ui.ctx(),
                "canvas-result",
                crate::gui::app::color_image(image),
                egui::TextureOptions::LINEAR,
            )
        });
        let size = texture.size_vec2();
        // Fit the panel's width (small models' images are scaled up, crisp).
        ui.image((texture.id(), size * (ui.available_width() / size.x)));
    }
    if let Some(path) = app.display.results.first().and_then(|s| s.path.clone())
        && ui.button("Send result to canvas").clicked()
    {
        actions.push(Action::Canvas(CanvasAction::SendTo(path)));
    }
}

fn painter(ui: &mut egui::Ui, app: &mut Parts<'_>) {
    let opacity = app.settings.canvas.overlay_opacity;
    let Some((source, overlay)) = app.canvas.textures(ui.ctx(), opacity) else {
        ui.centered_and_justified(|ui| {
            ui.label(
                "Drop an image here (or open one) to paint a mask, then inpaint or outpaint it",
            );
        });
        return;
    };
    let (response, painter) = ui.allocate_painter(ui.available_size(), Sense::click_and_drag());
    response.widget_info(|| WidgetInfo::labeled(Role::Canvas, true, "Canvas"));
    let canvas = &mut app.canvas;
    // The image's own size, not its texture's (fitted within the GPU's largest side): the
    // brush paints the mask in the image's pixels.
    let Some(image_size) = canvas.source_size() else {
        return;
    };
    let fit = (response.rect.width() / image_size.x).min(response.rect.height() / image_size.y);
    let scale = fit * canvas.zoom.max(0.05);
    let rect = Rect::from_center_size(response.rect.center() + canvas.pan, image_size * scale);
    let uv = Rect::from_min_max(egui::pos2(0.0, 0.0), egui::pos2(1.0, 1.0));
    painter.image(source.id(), rect, uv, Color32::WHITE);
    painter.image(overlay.id(), rect, uv, Color32::WHITE);

    let to_image = |pos: egui::Pos2| ((pos.x - rect.min.x) / scale, (pos.y - rect.min.y) / scale);
    if let Some(pos) = response.interact_pointer_pos() {
        if response.drag_started_by(PointerButton::Primary) {
            canvas.begin_stroke(to_image(pos));
        } else if response.dragged_by(PointerButton::Primary) {
            canvas.stroke_to(to_image(pos));
        } else if response.clicked_by(PointerButton::Primary) {
            canvas.begin_stroke(to_image(pos));
            canvas.end_stroke();
        }
    }
    if response.drag_stopped() {
        canvas.end_stroke();
    }
    if response.dragged_by(PointerButton::Middle) || response.dragged_by(PointerButton::Secondary) {
        canvas.pan += response.drag_delta();
    }
    if response.hovered() {
        let scroll = ui.input(|i| i.smooth_scroll_delta.y);
        if scroll != 0.0 {
            canvas.zoom = (canvas.zoom * (scroll * 0.002).exp()).clamp(0.1, 32.0);
        }
        if let Some(pos) = response.hover_pos() {
            let colour = if canvas.brush.erase {
                Color32::LIGHT_BLUE
            } else {
                Color32::WHITE
            };
            painter.circle_stroke(
                pos,
                canvas.brush.size / 2.0 * scale,
                Stroke::new(1.0, colour),
            );
        }
    }
}
