//! The prompt styles' actions: the Styles row's and the style editor's.

use super::EmberApp;
use crate::gui::session::Level;
use crate::gui::styles::{StyleAction, StyleEditor};

impl EmberApp {
    pub(super) fn perform_styles(&mut self, action: StyleAction) {
        let told = match action {
            StyleAction::Reload => self.styles.reload().map(|()| None),
            StyleAction::ApplyToPrompts => {
                let s = &mut self.settings;
                self.styles
                    .apply(&s.styles, &s.prompt, &s.negative_prompt)
                    .map(|(prompt, negative)| {
                        (s.prompt, s.negative_prompt) = (prompt, negative);
                        s.styles.clear();
                        None
                    })
            }
            StyleAction::Save(style) => {
                let name = style.name.trim().to_string();
                self.styles.save(style).map(|told| {
                    // The editor shows the style as saved (its name trimmed).
                    if let Some(saved) = self.styles.book.get(&name) {
                        self.styles.editor = Some(StyleEditor::on(saved));
                    }
                    Some(told)
                })
            }
            StyleAction::Delete(name) => self.styles.delete(&name).map(|told| {
                // A style deleted is no longer chosen: nothing asks for it any more.
                self.settings.styles.retain(|chosen| *chosen != name);
                Some(told)
            }),
            StyleAction::Import(path) => self.styles.import(&path).map(Some),
        };
        match told {
            Ok(Some(text)) => self.session.notify(Level::Info, text),
            Ok(None) => {}
            Err(e) => self.session.notify(Level::Error, e),
        }
    }
}
