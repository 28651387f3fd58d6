//! The form's "X/Y/Z plot" section (A1111's script): on or off, each axis' kind and
//! values, X and Y swapped, and what Generate will make (or what is wrong).

use super::Parts;
use crate::plot::AxisKind;

pub fn section(ui: &mut egui::Ui, app: &mut Parts<'_>) {
    let s = &mut app.settings.plot;
    let header = if s.enabled {
        "X/Y/Z plot (on)"
    } else {
        "X/Y/Z plot"
    };
    egui::CollapsingHeader::new(header)
        .id_salt("plot")
        .show(ui, |ui| {
            ui.checkbox(&mut s.enabled, "Make an X/Y/Z plot")
                .on_hover_text(
                    "Generate makes one image for every combination of the axes' values (the \
                 batch count is not used) and a grid of them with labels, saved as \
                 NNNNN-xyz_grid-SEED",
                );
            ui.add_enabled_ui(s.enabled, |ui| {
                egui::Grid::new("plot axes").num_columns(3).show(ui, |ui| {
                    for (axis, letter) in s.axes.iter_mut().zip(["X", "Y", "Z"]) {
                        let label = ui.label(format!("{letter} type"));
                        egui::ComboBox::from_id_salt(format!("plot {letter} type"))
                            .selected_text(axis.kind.name())
                            .width(110.0)
                            .show_ui(ui, |ui| {
                                for kind in AxisKind::ALL {
                                    ui.selectable_value(&mut axis.kind, kind, kind.name());
                                }
                            })
                            .response
                            .labelled_by(label.id);
                        let values = egui::TextEdit::singleline(&mut axis.values)
                            .hint_text(axis.kind.example())
                            .desired_width(f32::INFINITY);
                        ui.add_enabled(axis.kind != AxisKind::Nothing, values)
                            .labelled_by(label.id)
                            .on_hover_text(values_hint(axis.kind));
                        ui.end_row();
                    }
                });
                ui.horizontal(|ui| {
                    if ui
                        .button("Swap X and Y")
                        .on_hover_text("Columns become rows")
                        .clicked()
                    {
                        s.axes.swap(0, 1);
                    }
                    match s.plot() {
                        Ok(Some(plot)) => {
                            let [x, y, z] = plot.shape();
                            let count = x * y * z;
                            let shape = match z {
                                1 => format!("{x} × {y}"),
                                _ => format!("{x} × {y} × {z}"),
                            };
                            ui.weak(format!("{count} images ({shape})"));
                        }
                        Ok(None) => {
                            ui.weak("Choose an axis");
                        }
                        Err(e) => {
                            ui.colored_label(ui.visuals().warn_fg_color, e);
                        }
                    }
                });
            });
        });
}

fn values_hint(kind: AxisKind) -> &'static str {
    match kind {
        AxisKind::PromptSr => {
            "The first value is the text to find in the prompts; each value is put in its \
             place (the first leaves them as they are). Quote a value with commas: \"a, b\""
        }
        AxisKind::Seed | AxisKind::VarSeed => {
            "Seeds, comma-separated, or a range: 1-5, 1-9 (+2), 1-100 [5]; -1 is a new random \
             seed"
        }
        AxisKind::Sampler | AxisKind::Schedule => {
            "Names as in the form's menu (A1111's or ComfyUI's), comma-separated"
        }
        AxisKind::Size => "Width x height, comma-separated: 512x512, 512x768",
        _ => {
            "Comma-separated values, or a range: 1-5, 1-9 (+2) steps of 2, 1-10 [4] four values \
             evenly spread"
        }
    }
}
