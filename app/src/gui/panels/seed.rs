//! The form's seed row and A1111's "Extra" seed options under it (variation seed and
//! strength, "Resize seed from"), and the noise source and eta noise seed delta of
//! Advanced.

use egui::{DragValue, Slider};
use inference::api::RngSource;

use crate::gui::action::Action;
use crate::gui::settings::Settings;

/// The seed, its New and Lock, and the Extra box with the options it shows.
pub fn seed_rows(ui: &mut egui::Ui, s: &mut Settings, actions: &mut Vec<Action>) {
    ui.horizontal(|ui| {
        let seed = (&mut s.seed, &mut s.seed_locked);
        let buttons = ("New seed", "Lock", Action::RollSeed);
        seed_field(ui, ("Seed", "seed"), seed, buttons, actions);
        ui.checkbox(&mut s.noise.extras, "Extra").on_hover_text(
            "A1111's extra seed options: a variation seed mixed into the seed's noise, and \
             the noise of another size",
        );
    });
    if !s.noise.extras {
        return;
    }
    let noise = &mut s.noise;
    ui.horizontal(|ui| {
        let seed = (&mut noise.variation_seed, &mut noise.variation_locked);
        let names = ("Variation seed", "variation seed");
        let buttons = ("New", "Lock variation", Action::RollVariationSeed);
        seed_field(ui, names, seed, buttons, actions);
    });
    ui.add(
        Slider::new(&mut noise.variation_strength, 0.0..=1.0)
            .step_by(0.01)
            .fixed_decimals(2)
            .text("Variation strength"),
    )
    .on_hover_text(
        "0 = the seed's image, 1 = the variation seed's; between, a variation of the \
         seed's image. A batch then keeps the seed and counts the variation seed up.",
    );
    ui.horizontal(|ui| {
        let label = ui.label("Resize seed from");
        let (w, h) = &mut noise.resize_from;
        for (side, name) in [(w, "width"), (h, "height")] {
            ui.add(
                DragValue::new(side)
                    .range(0..=inference::api::MAX_SIDE)
                    .speed(8.0)
                    .suffix(" px"),
            )
            .labelled_by(label.id)
            .on_hover_text(format!(
                "The {name} the seed's noise is made for, pasted into the middle of this \
                 size's: a seed keeps its picture at another size (0 = off, else 8 or more)"
            ));
            // One latent cell is the least noise there is.
            if (1..8).contains(side) {
                *side = 8;
            }
        }
    });
}

/// A seed's field (typing one locks it), its button rolling a new one (`roll`, which asks
/// for it) and locking it, and its Lock box; `(label, what)` name it on the form and in the
/// hover texts.
fn seed_field(
    ui: &mut egui::Ui,
    (label, what): (&str, &str),
    (seed, locked): (&mut u64, &mut bool),
    (button, lock, roll): (&str, &str, Action),
    actions: &mut Vec<Action>,
) {
    let label = ui.label(label);
    seed_text(ui, (label.id, what), (seed, locked)).on_hover_text(format!(
        "The {what}: 0 to 18446744073709551615, or -1 for a new random one each generation"
    ));
    let rolled = ui
        .button(button)
        .on_hover_text(format!("Roll a random {what} and lock it"));
    if rolled.clicked() {
        actions.push(roll);
        *locked = true;
    }
    ui.checkbox(locked, lock)
        .on_hover_text(format!("Off: every generation draws a new random {what}"));
}

/// A seed typed as its digits, exact to 2^64 − 1 (ComfyUI's seeds go that far; a drag
/// value's f64 would round them), or A1111's -1: unlocked, a new random seed each
/// generation. Typing a seed locks it; text that is neither shows in the error colour and
/// is dropped when the field is left.
fn seed_text(
    ui: &mut egui::Ui,
    (label, what): (egui::Id, &str),
    (seed, locked): (&mut u64, &mut bool),
) -> egui::Response {
    // Named, not placed: the text being typed stays with its field whatever shows around it.
    let id = ui.make_persistent_id(("seed text", what));
    let mut text = ui
        .data(|d| d.get_temp::<String>(id))
        .unwrap_or_else(|| seed.to_string());
    let valid = text.trim() == "-1" || text.trim().parse::<u64>().is_ok();
    let mut edit = egui::TextEdit::singleline(&mut text)
        .id(id)
        .desired_width(80.0)
        // Wider for a long seed (ComfyUI's have 20 digits), never cut.
        .clip_text(false);
    if !valid {
        edit = edit.text_color(ui.visuals().error_fg_color);
    }
    let response = ui.add(edit).labelled_by(label);
    if response.changed() {
        match text.trim() {
            "-1" => *locked = false,
            digits => {
                if let Ok(typed) = digits.parse::<u64>() {
                    (*seed, *locked) = (typed, true);
                }
            }
        }
    }
    // Asked before `data_mut`: both lock the context.
    let editing = response.has_focus();
    ui.data_mut(|d| {
        if editing {
            d.insert_temp(id, text);
        } else {
            d.remove::<String>(id);
        }
    });
    response
}

/// The noise source and the eta noise seed delta (the form's Advanced section).
pub fn noise_advanced(ui: &mut egui::Ui, s: &mut Settings) {
    egui::ComboBox::from_label("Noise source")
        .selected_text(rng_label(s.noise.rng))
        .show_ui(ui, |ui| {
            for option in RngSource::ALL {
                ui.selectable_value(&mut s.noise.rng, option, rng_label(option));
            }
        })
        .response
        .on_hover_text(
            "Which generator a seed's noise comes from. CPU: torch's CPU generator, as \
             diffusers, ComfyUI and A1111's CPU setting draw. NV: A1111's imitation of \
             NVIDIA's, what A1111 draws by default on an NVIDIA card (its images without \
             an RNG field). An image dropped on the window sets it.",
        );
    ui.horizontal(|ui| {
        let label = ui.label("Eta noise seed delta");
        ui.add(DragValue::new(&mut s.noise.eta_noise_seed_delta).speed(1.0))
            .labelled_by(label.id)
            .on_hover_text(
                "A1111's ENSD: ancestral samplers' step noise comes from seed + this \
                 (31337 for NovelAI-style images; 0 = off)",
            );
    });
}

/// The noise source menu's words for a choice.
fn rng_label(source: RngSource) -> &'static str {
    match source {
        RngSource::Cpu => "CPU (ComfyUI, diffusers)",
        RngSource::Nv => "NV (A1111's GPU on NVIDIA)",
    }
}
