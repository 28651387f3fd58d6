//! The form's "Hires. fix" section (A1111's): upscaler, factor or size, hires steps and
//! denoising strength, and the size the second pass will run at.

use egui::{DragValue, Slider};
use inference::add_on_folders::{UPSCALERS, for_app};
use inference::api::{MAX_HIRES_SCALE, MAX_SIDE};

use super::Parts;
use crate::gui::hires::upscaler_names;

pub fn section(ui: &mut egui::Ui, app: &mut Parts<'_>) {
    let model = app.session.model().map(|m| m.path.clone());
    let models_dir = app.settings.models_dir.clone();
    let first = (app.settings.width, app.settings.height);
    let s = &mut app.settings.hires;
    let header = if s.enabled {
        "Hires. fix (on)"
    } else {
        "Hires. fix"
    };
    egui::CollapsingHeader::new(header)
        .id_salt("hires")
        .show(ui, |ui| {
            ui.checkbox(&mut s.enabled, "Hires. fix on").on_hover_text(
                "Generate at the size above, enlarge, and denoise again at the larger size",
            );
            ui.add_enabled_ui(s.enabled, |ui| {
                egui::ComboBox::from_label("Upscaler")
                    .selected_text(s.upscaler.clone())
                    .show_ui(ui, |ui| {
                        // Read only while the list is open: ESRGAN models by file name.
                        let dirs = for_app(models_dir.as_deref(), model.as_deref(), UPSCALERS);
                        for name in upscaler_names(&dirs) {
                            let selected = s.upscaler == name;
                            if ui.selectable_label(selected, &name).clicked() {
                                s.upscaler = name;
                            }
                        }
                    })
                    .response
                    .on_hover_text(
                        "Latent: enlarge the latents (needs strength 0.5 or more); Lanczos: \
                         the image; ESRGAN models from the models folder's ESRGAN/",
                    );
                ui.add(
                    Slider::new(&mut s.scale, 1.0..=MAX_HIRES_SCALE)
                        .step_by(0.05)
                        .text("Upscale by"),
                );
                ui.horizontal(|ui| {
                    for (name, v) in [
                        ("Resize width to", &mut s.resize_to.0),
                        ("height to", &mut s.resize_to.1),
                    ] {
                        let label = ui.label(name);
                        ui.add(DragValue::new(v).speed(8.0).range(0..=MAX_SIDE))
                            .labelled_by(label.id)
                            .on_hover_text(
                                "0 and 0: use Upscale by; 0 for one side keeps the aspect",
                            );
                    }
                });
                ui.add(Slider::new(&mut s.steps, 0..=150).text("Hires steps"))
                    .on_hover_text("0: the same steps as the first pass");
                ui.add(
                    Slider::new(&mut s.strength, 0.0..=1.0)
                        .step_by(0.01)
                        .text("Denoising strength"),
                );
                match s.target(first) {
                    Ok((w, h)) => ui.weak(format!("From {}×{} to {w}×{h}", first.0, first.1)),
                    Err(e) => ui.colored_label(ui.visuals().warn_fg_color, e),
                };
            });
        });
}
