//! The generate form: prompts, seed, steps, CFG, size, sampler and schedule, batch count,
//! the SDXL second prompt and refiner, the hires fix, and the Generate / Cancel buttons.

use egui::{DragValue, RichText, Slider};
use inference::api::{MAX_BATCH, MAX_SIDE, MAX_STEPS, ModelCapabilities, VaeTiling};
use inference::family::Family;
use inference::schedule::named::{SamplerName, ScheduleName};
use inference::text::emphasis::Emphasis;

use super::Parts;
use super::hints::{sampler_hint, schedule_hint};
use super::prompt_box::{prompt_box, token_counter};
use crate::gui::action::{Action, View};
use crate::gui::dialogs::PathPurpose;
use crate::gui::models::EntryKind;
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

/// A prompt's label with A1111's token counter at the right.
fn prompt_label(
    ui: &mut egui::Ui,
    label: &str,
    (text, positive): (&str, bool),
    emphasis: Emphasis,
    steps: u32,
) -> egui::Response {
    // A row no taller than the label, so the form keeps its height.
    ui.scope(|ui| {
        ui.spacing_mut().interact_size.y = 0.0;
        ui.horizontal(|ui| {
            let label = ui.label(label);
            ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                ui.weak(token_counter(text, positive, emphasis, steps))
                    .on_hover_text(
                        "Tokens / the limit of the 75-token chunks they fill (long prompts are \
                     split into chunks; Ctrl+Up / Ctrl+Down change the weight of the word \
                     under the cursor)",
                    );
            });
            label
        })
        .inner
    })
    .inner
}

pub fn draw(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    let running = app.session.running.is_some();
    let s = &mut app.settings;
    // The second prompts follow the first unless typed; they only apply to SDXL.

    let label = prompt_label(ui, "Prompt", (&s.prompt, true), s.emphasis, s.steps);
    let embeddings: Vec<String> = app
        .models
        .iter()
        .filter(|e| e.kind == crate::gui::models::EntryKind::Embedding)
        .filter_map(|e| e.path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    prompt_box(ui, &mut s.prompt, "prompt", 4, "what to paint", &embeddings).labelled_by(label.id);
    let label = prompt_label(
        ui,
        "Negative prompt",
        (&s.negative_prompt, false),
        s.emphasis,
        s.steps,
    );
    prompt_box(
        ui,
        &mut s.negative_prompt,
        "negative prompt",
        2,
        "what to avoid",
        &embeddings,
    )
    .labelled_by(label.id);

    ui.horizontal(|ui| {
        let generate = ui
            .add_sized(
                [120.0, 32.0],
                egui::Button::new(RichText::new("Generate").strong()),
            )
            .on_hover_text("Ctrl+Enter. While a job runs, this queues another.");
        if generate.clicked() {
            actions.push(Action::Generate);
        }
        let cancelling = app.session.running.as_ref().is_some_and(|r| r.cancelling);
        let label = if cancelling {
            "Cancelling…"
        } else {
            "Cancel"
        };
        if ui
            .add_enabled(running && !cancelling, egui::Button::new(label))
            .on_hover_text("Esc: stop the running image (the queue goes on)")
            .clicked()
        {
            actions.push(Action::Cancel);
        }
    });
    ui.separator();

    ui.horizontal(|ui| {
        let label = ui.label("Seed");
        let typed = ui
            .add(DragValue::new(&mut s.seed).speed(1.0))
            .labelled_by(label.id);
        if typed.changed() {
            s.seed_locked = true;
        }
        if ui
            .button("New seed")
            .on_hover_text("Roll a random seed and lock it")
            .clicked()
        {
            actions.push(Action::RollSeed);
            s.seed_locked = true;
        }
        ui.checkbox(&mut s.seed_locked, "Lock")
            .on_hover_text("Off: every generation draws a new random seed");
    });

    ui.add(Slider::new(&mut s.steps, 1..=150.min(MAX_STEPS)).text("Steps"));
    ui.add(
        Slider::new(&mut s.cfg_scale, 1.0..=30.0)
            .step_by(0.5)
            .text("CFG scale"),
    );

    let caps = app.session.model().map(|m| m.capabilities.clone());
    // The canvas generates at its own size (the image's), never changing Create's.
    if app.view == View::Canvas && app.canvas.source.is_none() {
        ui.label("Size: the image's, once there is one");
    } else {
        let (width, height) = if app.view == View::Canvas {
            let size = &mut app.canvas.size;
            (&mut size.0, &mut size.1)
        } else {
            (&mut s.width, &mut s.height)
        };
        size_fields(ui, width, height, caps.as_ref());
    }

    egui::ComboBox::from_label("Sampler")
        // Tall enough to show most of the 33 samplers without scrolling.
        .height(560.0)
        .selected_text(s.sampler.a1111_name())
        .show_ui(ui, |ui| {
            for option in SamplerName::ALL {
                ui.selectable_value(&mut s.sampler, option, option.a1111_name())
                    .on_hover_text(sampler_hint(option));
            }
        });
    egui::ComboBox::from_label("Schedule")
        .height(400.0)
        .selected_text(s.schedule.a1111_name())
        .show_ui(ui, |ui| {
            for option in ScheduleName::ALL {
                ui.selectable_value(&mut s.schedule, option, option.a1111_name())
                    .on_hover_text(schedule_hint(option));
            }
        });

    ui.horizontal(|ui| {
        let label = ui.label("Batch count");
        ui.add(DragValue::new(&mut s.batch_count).range(1..=MAX_BATCH))
            .labelled_by(label.id)
            .on_hover_text("Images per click, one after another, seeds seed, seed+1, …");
    });
    if caps.as_ref().is_some_and(|c| c.family == Family::Sdxl) {
        refiner_section(ui, app, actions);
    }
    if app.view == View::Generate {
        super::hires::section(ui, app);
    }
    super::controlnet::lora_weights(ui, &mut app.settings.prompt);
    super::controlnet::section(ui, app, actions);
    let s = &mut app.settings;
    ui.collapsing("Advanced", |ui| {
        if caps.as_ref().is_some_and(ModelCapabilities::second_prompt) {
            let label = ui.label("Second prompt");
            ui.add(
                egui::TextEdit::multiline(&mut s.prompt_2)
                    .desired_rows(2)
                    .desired_width(f32::INFINITY)
                    .hint_text("empty: the prompt"),
            )
            .labelled_by(label.id)
            .on_hover_text("What SDXL's second text encoder (OpenCLIP bigG) reads");
            let label = ui.label("Second negative prompt");
            ui.add(
                egui::TextEdit::multiline(&mut s.negative_prompt_2)
                    .desired_rows(1)
                    .desired_width(f32::INFINITY)
                    .hint_text("empty: the negative prompt"),
            )
            .labelled_by(label.id);
        }
        ui.add(
            Slider::new(&mut s.cfg_rescale, 0.0..=1.0)
                .step_by(0.05)
                .fixed_decimals(2)
                .text("CFG rescale"),
        )
        .on_hover_text(
            "Rescales the guided prediction to the prompt's spread (0 = off); about 0.7 \
             for zero-terminal-SNR v-prediction models",
        );
        ui.horizontal(|ui| {
            let label = ui.label("CLIP skip");
            ui.add(DragValue::new(&mut s.clip_skip).range(1..=12))
                .labelled_by(label.id)
                .on_hover_text(
                    "1 = last text-encoder layer (A1111's numbering); on SDXL 1 and 2 are \
                     both its usual penultimate layer",
                );
        });
        if caps
            .as_ref()
            .is_some_and(ModelCapabilities::size_conditioning)
        {
            size_conditioning(ui, &mut s.size_conditioning);
        }
        egui::ComboBox::from_label("Emphasis")
            .selected_text(s.emphasis.a1111_name())
            .show_ui(ui, |ui| {
                for option in Emphasis::ALL {
                    ui.selectable_value(&mut s.emphasis, option, option.a1111_name());
                }
            })
            .response
            .on_hover_text(
                "How (word:1.2) weights act, as A1111's setting: Original scales and keeps \
                 each chunk's mean; No norm only scales; Ignore drops the brackets' weights; \
                 None reads brackets as text",
            );
        egui::ComboBox::from_label("VAE tiling")
            .selected_text(vae_tiling_label(s.vae_tiling))
            .show_ui(ui, |ui| {
                for option in VaeTiling::ALL {
                    ui.selectable_value(&mut s.vae_tiling, option, vae_tiling_label(option));
                }
            })
            .response
            .on_hover_text(
                "Auto decodes in tiles only when the whole image would not fit in the memory \
                 that is free (and says so); On always tiles images larger than the VAE's \
                 tile (diffusers' enable_tiling); Off refuses what cannot fit",
            );
        ui.checkbox(&mut s.sde_brownian, "Brownian-tree SDE noise")
            .on_hover_text(
                "DPM++ SDE samplers: noise from torchsde's Brownian tree, as ComfyUI and \
                 A1111 make it (same seed, same image). Off: fresh draws from the seed.",
            );
    });
}

/// The VAE tiling menu's words for a choice.
fn vae_tiling_label(mode: VaeTiling) -> &'static str {
    match mode {
        VaeTiling::Auto => "Auto (when memory is short)",
        VaeTiling::On => "On",
        VaeTiling::Off => "Off",
    }
}

/// The Size presets menu and the Width / Height fields.
fn size_fields(
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
fn size_conditioning(ui: &mut egui::Ui, sc: &mut SizeConditioningSettings) {
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

/// SDXL's refiner: which model, where it takes over, its aesthetic scores.
fn refiner_section(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    use crate::gui::session::ModelState;
    ui.collapsing("Refiner", |ui| {
        let s = &app.settings.refiner;
        let current = match (&app.session.refiner, s.enabled) {
            (ModelState::Ready(m), true) => m.name.clone(),
            (ModelState::Loading { .. }, true) => "loading…".into(),
            _ => "Off".into(),
        };
        egui::ComboBox::from_label("Refiner model")
            .selected_text(current)
            .show_ui(ui, |ui| {
                if ui.selectable_label(!s.enabled, "Off").clicked() {
                    actions.push(Action::SetRefiner(None));
                }
                for entry in app
                    .models
                    .iter()
                    .filter(|m| m.kind == EntryKind::Model && m.family.contains("refiner"))
                {
                    let chosen = s.enabled && s.model.as_ref() == Some(&entry.path);
                    if ui.selectable_label(chosen, &entry.name).clicked() {
                        actions.push(Action::SetRefiner(Some(entry.path.clone())));
                    }
                }
            })
            .response
            .on_hover_text(
                "Refiners found in the models folder (the SDXL refiner, or any SDXL model)",
            );
        if ui.button("Choose refiner file…").clicked() {
            actions.push(Action::Pick(PathPurpose::Refiner));
        }
        let s = &mut app.settings.refiner;
        ui.add_enabled(
            s.enabled,
            Slider::new(&mut s.switch_at, 0.05..=0.95)
                .step_by(0.05)
                .text("Switch at"),
        )
        .on_hover_text("The fraction of the steps the base model runs before the refiner");
        ui.add_enabled(
            s.enabled,
            Slider::new(&mut s.aesthetic_score, 0.0..=10.0)
                .step_by(0.5)
                .text("Aesthetic score"),
        );
        ui.add_enabled(
            s.enabled,
            Slider::new(&mut s.negative_aesthetic_score, 0.0..=10.0)
                .step_by(0.5)
                .text("Negative aesthetic score"),
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

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
