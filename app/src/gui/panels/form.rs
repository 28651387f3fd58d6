//! The generate form: prompts and their styles (`panels/styles`), seed (its row, extra
//! options and noise source are `panels/seed`), steps, CFG, size, sampler and schedule,
//! batch count, seamless tiling, the SDXL second prompt and refiner, the hires fix, the
//! X/Y/Z plot (`panels/plot`), and the Generate / Cancel buttons (right-click Generate:
//! Generate forever).

use egui::{DragValue, RichText, Slider};
use inference::api::{MAX_BATCH, MAX_STEPS, ModelCapabilities, Seamless, VaeTiling};
use inference::family::Family;
use inference::preview::PreviewMethod;
use inference::schedule::named::{SamplerName, ScheduleName};
use inference::text::emphasis::Emphasis;

use super::Parts;
use super::hints::{sampler_hint, schedule_hint};
use super::prompt_box::{prompt_box, token_counter};
use super::size::{size_conditioning, size_fields};
use crate::gui::action::{Action, View};
use crate::gui::dialogs::PathPurpose;
use crate::gui::models::EntryKind;
use crate::gui::session::ModelState;

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
    // The counters count what the text encoder will read: the prompts with their styles.
    let (styled, styled_negative) = {
        let s = &app.settings;
        app.styles
            .apply(&s.styles, &s.prompt, &s.negative_prompt)
            .unwrap_or_else(|_| (s.prompt.clone(), s.negative_prompt.clone()))
    };
    let s = &mut app.settings;
    // The second prompts follow the first unless typed; they only apply to SDXL.

    let label = prompt_label(ui, "Prompt", (&styled, true), s.emphasis, s.steps);
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
        (&styled_negative, false),
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
    super::styles::row(ui, app, actions);
    let s = &mut app.settings;

    ui.horizontal(|ui| {
        let generate = ui
            .add_sized(
                [120.0, 32.0],
                egui::Button::new(RichText::new("Generate").strong()),
            )
            .on_hover_text(
                "Ctrl+Enter. While a job runs, this queues another. Right-click: Generate \
                 forever.",
            );
        if generate.clicked() {
            actions.push(Action::Generate);
        }
        let forever = app.session.forever;
        generate.context_menu(|ui| {
            let (label, hint) = if forever {
                (
                    "Stop generating forever",
                    "The image under way is finished first",
                )
            } else {
                (
                    "Generate forever",
                    "Generate again whenever the queue is done, with the form as it is then \
                     (a new seed each time unless it is locked), until stopped",
                )
            };
            if ui.button(label).on_hover_text(hint).clicked() {
                actions.push(Action::GenerateForever(!forever));
                ui.close();
            }
        });
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
        if forever
            && ui
                .button("Stop forever")
                .on_hover_text("Generate forever stops; the image under way is finished")
                .clicked()
        {
            actions.push(Action::GenerateForever(false));
        }
    });
    ui.separator();

    super::seed::seed_rows(ui, s, actions);

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
    } else if app.view == View::Canvas {
        let size = &mut app.canvas.size;
        size_fields(ui, &mut size.0, &mut size.1, caps.as_ref());
    } else {
        let before = (s.width, s.height);
        size_fields(ui, &mut s.width, &mut s.height, caps.as_ref());
        if (s.width, s.height) != before {
            // Chosen for the model loaded, or for the one loading (whose side is not known
            // yet: it keeps the size).
            s.size_for = match &app.session.model {
                ModelState::Ready(model) => Some(model.native_size.0.min(model.native_size.1)),
                _ => None,
            };
        }
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
            .on_hover_text(
                "Images per click, one after another, seeds seed, seed+1, … (with a \
                 variation: the seed, variation seeds counting up)",
            );
    });
    egui::ComboBox::from_label("Seamless")
        .selected_text(seamless_label(s.seamless))
        .show_ui(ui, |ui| {
            for option in Seamless::ALL {
                ui.selectable_value(&mut s.seamless, option, seamless_label(option));
            }
        })
        .response
        .on_hover_text(
            "Opposite edges meet, so the image repeats without a seam (A1111's Tiling): \
             textures and patterns in a grid, or side by side only, or one above another. \
             The VAE then decodes the whole image at once (never in tiles).",
        );
    if caps.as_ref().is_some_and(|c| c.family == Family::Sdxl) {
        refiner_section(ui, app, actions);
    }
    if app.view == View::Generate {
        super::hires::section(ui, app);
    }
    super::plot::section(ui, app);
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
        egui::ComboBox::from_label("Live preview")
            .selected_text(preview_label(s.preview))
            .show_ui(ui, |ui| {
                for option in PreviewMethod::ALL {
                    ui.selectable_value(&mut s.preview, option, preview_label(option));
                }
            })
            .response
            .on_hover_text(
                "TAESD draws the whole picture as it forms, from a 5 MB decoder \
                 (taesd_decoder.pth, taesdxl_decoder.pth for SDXL) in the models folder's \
                 VAE-taesd or vae_approx folder (the Download window has them); it takes at \
                 most a twentieth of the time. Latent colours cost nothing but are small \
                 and blurred. Auto uses TAESD when its decoder is there.",
            );
        super::seed::noise_advanced(ui, s);
        ui.checkbox(&mut s.sde_brownian, "Brownian-tree SDE noise")
            .on_hover_text(
                "DPM++ SDE samplers: noise from torchsde's Brownian tree, as ComfyUI and \
                 A1111 make it (same seed, same image). Off: fresh draws from the seed.",
            );
        ui.checkbox(
            &mut s.dynamic_prompts,
            "Dynamic prompts: {a|b}, __wildcards__",
        )
        .on_hover_text(
            "{red|blue} picks one per image from its seed, {2$$a|b|c} two of them, \
                 __name__ a line of wildcards/name.txt in the models folder; the image \
                 records the prompt it got and the template. Off: braces and underscores \
                 are plain text, as in A1111 without the extension.",
        );
    });
}

/// The seamless menu's words for a choice.
fn seamless_label(mode: Seamless) -> &'static str {
    match mode {
        Seamless::Off => "Off",
        Seamless::Both => "Both axes (a grid)",
        Seamless::X => "Left and right edges",
        Seamless::Y => "Top and bottom edges",
    }
}

/// The live preview menu's words for a choice.
fn preview_label(method: PreviewMethod) -> &'static str {
    match method {
        PreviewMethod::Auto => "Auto (TAESD when found)",
        PreviewMethod::LatentColours => "Latent colours (fast)",
        PreviewMethod::Taesd => "TAESD",
    }
}

/// The VAE tiling menu's words for a choice.
fn vae_tiling_label(mode: VaeTiling) -> &'static str {
    match mode {
        VaeTiling::Auto => "Auto (when memory is short)",
        VaeTiling::On => "On",
        VaeTiling::Off => "Off",
    }
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
