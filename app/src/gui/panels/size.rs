//! The form's image size: the Size presets (ratios around the model's native side, or its
//! family's training buckets), the Width / Height fields and SDXL's size conditioning.

use egui::DragValue;
use inference::api::{MAX_SIDE, ModelCapabilities};

use crate::gui::settings::SizeConditioningSettings;

/// Size presets for a model whose native side is `native`: the short side stays native, the
/// long side follows the ratio, rounded to a multiple of 8.
pub fn size_presets(native: u32) -> Vec<(String, (u32, u32))> {
    let round8 = |v: f64| ((v / 8.0).round() as u32 * 8).clamp(8, MAX_SIDE);
    let mut presets = Vec::new();
    for (a, b) in [(1, 1), (2, 3), (3, 2), (3, 4), (4, 3), (9, 16), (16, 9)] {
        let (w, h) = if a <= b {
            (
                native,
                round8(f64::from(native) * f64::from(b) / f64::from(a)),
            )
        } else {
            (
                round8(f64::from(native) * f64::from(a) / f64::from(b)),
                native,
            )
        };
        presets.push((format!("{a}:{b}  {w}×{h}"), (w, h)));
    }
    presets
}

/// The sizes offered for a model: its family's own list (SDXL's training buckets) when the
/// model has its family's standard size, else ratios around its native side.
pub fn presets_for(model: Option<&ModelCapabilities>) -> Vec<(String, (u32, u32))> {
    let Some(caps) = model else {
        return size_presets(512);
    };
    let native = caps.native_size.0.min(caps.native_size.1);
    let family = caps.family.spec().size_presets;
    if family.len() > 5 && family[0] == (native, native) {
        return family
            .iter()
            .map(|&(w, h)| {
                let g = gcd(w, h);
                (format!("{}:{}  {w}×{h}", w / g, h / g), (w, h))
            })
            .collect();
    }
    size_presets(native)
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The Size presets menu and the Width / Height fields.
pub(super) fn size_fields(
    ui: &mut egui::Ui,
    width: &mut u32,
    height: &mut u32,
    caps: Option<&ModelCapabilities>,
) {
    let current = (*width, *height);
    egui::ComboBox::from_label("Size")
        .selected_text(format!("{}×{}", current.0, current.1))
        .show_ui(ui, |ui| {
            for (name, size) in presets_for(caps) {
                if ui.selectable_label(current == size, name).clicked() {
                    (*width, *height) = size;
                }
            }
        });
    ui.horizontal(|ui| {
        for (name, side) in [("Width", width), ("Height", height)] {
            let label = ui.label(name);
            let response = ui
                .add(DragValue::new(side).speed(8.0).range(8..=MAX_SIDE))
                .labelled_by(label.id);
            if !response.dragged() && !response.has_focus() {
                // Sizes are multiples of 8 (the VAE's factor): round what was typed.
                *side = (*side).div_ceil(8) * 8;
            }
        }
    });
}

/// SDXL's size conditioning: original size, crop corner, target size (ComfyUI's
/// CLIPTextEncodeSDXL fields; A1111 always sends the defaults).
pub(super) fn size_conditioning(ui: &mut egui::Ui, sc: &mut SizeConditioningSettings) {
    ui.label("SDXL size conditioning").on_hover_text(
        "What the model is told about its training image: a small original size looks \
         low-resolution, a crop corner off 0,0 looks cropped. Defaults: the image size, 0,0.",
    );
    size_override(ui, "Original size", &mut sc.original);
    ui.horizontal(|ui| {
        ui.label("Crop top-left");
        for (name, v) in [("X", &mut sc.crop.0), ("Y", &mut sc.crop.1)] {
            let label = ui.label(name);
            ui.add(DragValue::new(v).speed(8.0).range(0..=MAX_CONDITIONED_SIDE))
                .labelled_by(label.id);
        }
    });
    size_override(ui, "Target size", &mut sc.target);
}

/// Largest size the form offers for the size conditioning (SDXL was trained up to 4096).
const MAX_CONDITIONED_SIDE: u32 = 8192;

/// A size that follows the image size until unticked.
fn size_override(ui: &mut egui::Ui, name: &str, size: &mut Option<(u32, u32)>) {
    ui.horizontal(|ui| {
        let mut same = size.is_none();
        if ui
            .checkbox(&mut same, format!("{name}: the image size"))
            .changed()
        {
            *size = (!same).then_some((1024, 1024));
        }
        if let Some((w, h)) = size {
            for (label, v) in [("W", w), ("H", h)] {
                let label = ui.label(label);
                ui.add(DragValue::new(v).speed(8.0).range(1..=MAX_CONDITIONED_SIDE))
                    .labelled_by(label.id);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use inference::family::Family;

    #[test]
    fn presets_keep_the_native_short_side_and_multiples_of_8() {
        let presets = size_presets(512);
        assert_eq!(presets[0].1, (512, 512));
        assert_eq!(presets[1].1, (512, 768));
        assert_eq!(presets[2].1, (768, 512));
        for (name, (w, h)) in presets {
            assert!(w % 8 == 0 && h % 8 == 0, "{name}");
            assert_eq!(w.min(h), 512, "{name}");
        }
    }

    #[test]
    fn sdxl_models_of_the_standard_size_get_the_training_buckets() {
        let mut caps = ember_tests_caps(Family::Sdxl, 1024);
        let presets = presets_for(Some(&caps));
        assert_eq!(presets[0].1, (1024, 1024));
        assert!(
            presets
                .iter()
                .any(|(n, s)| *s == (1216, 832) && n.starts_with("19:13"))
        );
        caps.native_size = (32, 32);
        assert_eq!(
            presets_for(Some(&caps))[0].1,
            (32, 32),
            "a tiny model keeps ratios"
        );
    }

    fn ember_tests_caps(family: Family, side: u32) -> ModelCapabilities {
        ModelCapabilities {
            family,
            inpainting: false,
            prediction: Default::default(),
            zero_terminal_snr: false,
            native_size: (side, side),
            min_side: 8,
            max_clip_skip: 12,
            default_sampler: inference::api::SamplerChoice::a1111_default(),
            vae_factor: 8,
        }
    }
}
