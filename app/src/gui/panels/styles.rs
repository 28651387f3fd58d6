//! The Styles row under the prompts (A1111's styles menu with its apply and edit buttons)
//! and the style editor window.

use egui::Color32;

use super::Parts;
use crate::gui::action::Action;
use crate::gui::dialogs::PathPurpose;
use crate::gui::styles::{StyleAction, StyleEditor};
use crate::styles::Style;

/// The chosen styles as the menu shows them.
fn chosen_text(chosen: &[String]) -> String {
    if chosen.is_empty() {
        "none".into()
    } else {
        chosen.join(", ")
    }
}

/// What a style does, for its hover text.
fn describe(style: &Style) -> String {
    let side = |label: &str, text: &str| match text.trim() {
        "" => format!("{label}: unchanged"),
        text if text.contains("{prompt}") => format!("{label}: {text}"),
        text => format!("{label}: … , {text}"),
    };
    format!(
        "{}\n{}",
        side("Prompt", &style.prompt),
        side("Negative prompt", &style.negative_prompt)
    )
}

/// The Styles menu (tick any number; they apply in the order ticked), Apply and Edit.
pub fn row(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    ui.horizontal(|ui| {
        let chosen = &mut app.settings.styles;
        let menu = egui::ComboBox::from_label("Styles")
            .width(150.0)
            .truncate()
            .selected_text(chosen_text(chosen))
            .close_behavior(egui::PopupCloseBehavior::CloseOnClickOutside)
            .show_ui(ui, |ui| {
                if app.styles.book.is_empty() {
                    ui.weak(
                        "No styles yet: Edit… saves the prompts as one, or imports A1111's \
                         styles.csv",
                    );
                }
                for style in app.styles.book.styles() {
                    let mut on = chosen.contains(&style.name);
                    if ui
                        .checkbox(&mut on, &style.name)
                        .on_hover_text(describe(style))
                        .changed()
                    {
                        toggle(chosen, &style.name, on);
                    }
                }
                // A style chosen but gone from the file (deleted, or the file edited): shown
                // so that it can be unticked; Generate says why it cannot run meanwhile.
                let gone: Vec<String> = chosen
                    .iter()
                    .filter(|name| app.styles.book.get(name).is_none())
                    .cloned()
                    .collect();
                for name in gone {
                    let mut on = true;
                    let label = format!("{name} (not in styles.csv)");
                    if ui.checkbox(&mut on, label).changed() {
                        toggle(chosen, &name, false);
                    }
                }
            });
        let menu = menu.response.on_hover_text(
            "A1111's styles: prompt texts kept by name (in styles.csv) and added to the \
             prompts when an image is made, in the order ticked",
        );
        if menu.clicked() {
            // Opening the menu reads the file again: it may have been edited meanwhile.
            actions.push(Action::Styles(StyleAction::Reload));
        }
        let chosen = !app.settings.styles.is_empty();
        if ui
            .add_enabled(chosen, egui::Button::new("Apply"))
            .on_hover_text("Write the chosen styles into the prompts, and untick them")
            .clicked()
        {
            actions.push(Action::Styles(StyleAction::ApplyToPrompts));
        }
        if ui
            .button("Edit…")
            .on_hover_text("Save the prompts as a style, change or delete one, import styles.csv")
            .clicked()
        {
            let first = app.settings.styles.first();
            let style = first.and_then(|name| app.styles.book.get(name));
            app.styles.editor = Some(style.map(StyleEditor::on).unwrap_or_default());
        }
    });
}

/// Ticks (`on`) or unticks `name`; a style ticked goes last.
fn toggle(chosen: &mut Vec<String>, name: &str, on: bool) {
    chosen.retain(|n| n != name);
    if on {
        chosen.push(name.to_string());
    }
}

/// The style editor: a style's name and texts, saved to or deleted from `styles.csv`.
pub fn editor(ui: &mut egui::Ui, app: &mut Parts<'_>, actions: &mut Vec<Action>) {
    let (mut open, mut closed) = (app.styles.editor.is_some(), false);
    let (book, problem) = (&app.styles.book, &app.styles.problem);
    let Some(editor) = app.styles.editor.as_mut() else {
        return;
    };
    egui::Window::new("Style editor")
        .open(&mut open)
        .collapsible(false)
        .default_width(420.0)
        // Beside the form, so the prompts stay in sight while a style is made of them.
        .default_pos([360.0, 40.0])
        .show(ui.ctx(), |ui| {
            egui::ComboBox::from_label("Style")
                .selected_text(if book.get(&editor.name).is_some() {
                    editor.name.as_str()
                } else {
                    "a new style"
                })
                .show_ui(ui, |ui| {
                    if ui.selectable_label(false, "a new style").clicked() {
                        *editor = StyleEditor::default();
                    }
                    for style in book.styles() {
                        if ui
                            .selectable_label(editor.name == style.name, &style.name)
                            .clicked()
                        {
                            *editor = StyleEditor::on(style);
                        }
                    }
                });
            let label = ui.label("Name");
            ui.text_edit_singleline(&mut editor.name)
                .labelled_by(label.id);
            let label = ui.label("Style prompt");
            ui.add(
                egui::TextEdit::multiline(&mut editor.prompt)
                    .desired_rows(3)
                    .desired_width(f32::INFINITY)
                    .hint_text("{prompt} marks where the prompt goes; without it, added after"),
            )
            .labelled_by(label.id);
            let label = ui.label("Style negative prompt");
            ui.add(
                egui::TextEdit::multiline(&mut editor.negative_prompt)
                    .desired_rows(2)
                    .desired_width(f32::INFINITY),
            )
            .labelled_by(label.id);
            if ui
                .button("Copy the prompts here")
                .on_hover_text("The prompt and negative prompt of the form, as they are")
                .clicked()
            {
                editor.prompt = app.settings.prompt.clone();
                editor.negative_prompt = app.settings.negative_prompt.clone();
            }
            ui.horizontal(|ui| {
                let named = !editor.name.trim().is_empty();
                let exists = book.get(editor.name.trim()).is_some();
                let save = if exists {
                    "Replace the style of this name"
                } else {
                    "Add it to styles.csv"
                };
                let saved = ui.add_enabled(named, egui::Button::new("Save style"));
                if saved.on_hover_text(save).clicked() {
                    actions.push(Action::Styles(StyleAction::Save(Style {
                        name: editor.name.clone(),
                        prompt: editor.prompt.clone(),
                        negative_prompt: editor.negative_prompt.clone(),
                    })));
                }
                if ui
                    .add_enabled(exists, egui::Button::new("Delete style"))
                    .clicked()
                {
                    actions.push(Action::Styles(StyleAction::Delete(
                        editor.name.trim().to_string(),
                    )));
                    *editor = StyleEditor::default();
                }
                if ui
                    .button("Import styles.csv…")
                    .on_hover_text("Take in the styles of another styles.csv, A1111's for one")
                    .clicked()
                {
                    actions.push(Action::Pick(PathPurpose::StylesFile));
                }
            });
            ui.horizontal(|ui| {
                ui.weak(format!("Kept in {}", app.styles.path.display()));
                closed = ui.button("Close").clicked();
            });
            if let Some(problem) = problem {
                ui.colored_label(Color32::from_rgb(235, 80, 70), problem);
            }
        });
    if !open || closed {
        app.styles.editor = None;
    }
}
