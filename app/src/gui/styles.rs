//! The app's prompt styles: Ember's `styles.csv` in the config folder (A1111's file, see
//! [`crate::styles`]), the style editor's fields, and what the Styles row and the editor ask
//! for.
//!
//! **Invariant:** a `styles.csv` that could not be read is never written over (it may hold
//! an artist's years of styles); every change is written at once, atomically.

use std::path::{Path, PathBuf};

use crate::styles::{FILE_NAME, Style, StyleBook};

use super::settings::Settings;

/// What the Styles row and the style editor ask for.
#[must_use]
#[derive(Clone, Debug, PartialEq)]
pub enum StyleAction {
    /// Read `styles.csv` again (the Styles menu opened: it may have been edited meanwhile).
    Reload,
    /// Write the chosen styles into the prompt boxes and untick them (A1111's 📋 button).
    ApplyToPrompts,
    /// Save this style (a new one, or the one of its name replaced).
    Save(Style),
    Delete(String),
    /// Take in the styles of another `styles.csv` (A1111's).
    Import(PathBuf),
}

/// The style editor's fields, while it is open (runtime state).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StyleEditor {
    pub name: String,
    pub prompt: String,
    pub negative_prompt: String,
}

impl StyleEditor {
    /// The editor on `style`.
    pub fn on(style: &Style) -> Self {
        Self {
            name: style.name.clone(),
            prompt: style.prompt.clone(),
            negative_prompt: style.negative_prompt.clone(),
        }
    }
}

/// Ember's styles and their file.
#[derive(Debug)]
pub struct StyleStore {
    pub path: PathBuf,
    pub book: StyleBook,
    /// Why the file could not be read; until it reads, nothing is written over it.
    pub problem: Option<String>,
    /// The style editor, while open.
    pub editor: Option<StyleEditor>,
}

impl StyleStore {
    /// The styles in `config_dir`'s `styles.csv` (none where there is no file yet).
    pub fn open(config_dir: &Path) -> Self {
        let mut store = Self {
            path: config_dir.join(FILE_NAME),
            book: StyleBook::default(),
            problem: None,
            editor: None,
        };
        let _ = store.reload();
        store
    }

    /// Reads the file again; on failure the styles read before stay in use.
    pub fn reload(&mut self) -> Result<(), String> {
        match StyleBook::read(&self.path) {
            Ok(book) => {
                self.book = book;
                self.problem = None;
                Ok(())
            }
            Err(why) => {
                let why = format!(
                    "{why}. Ember does not write over it: mend it (or move it away), then \
                     open Styles again"
                );
                self.problem = Some(why.clone());
                Err(why)
            }
        }
    }

    /// The prompts the styles `names` make (see [`StyleBook::apply`]).
    pub fn apply(
        &self,
        names: &[String],
        prompt: &str,
        negative: &str,
    ) -> Result<(String, String), String> {
        self.book
            .apply(names, prompt, negative)
            .map_err(|e| match &self.problem {
                Some(problem) => format!("{e}: {problem}"),
                None => format!(
                    "{e} in {FILE_NAME}: untick it under Styles, or save a style of that name"
                ),
            })
    }

    /// Saves `style`; what to tell the user.
    pub fn save(&mut self, style: Style) -> Result<String, String> {
        let name = style.name.trim();
        if name.is_empty() {
            return Err("a style needs a name".into());
        }
        if name.starts_with('#') {
            return Err(format!(
                "a style's name cannot start with # ({FILE_NAME} reads such a row as a comment)"
            ));
        }
        let style = Style {
            name: name.to_string(),
            ..style
        };
        let name = style.name.clone();
        let mut book = self.book.clone();
        let replaced = book.put(style);
        self.write(book)?;
        Ok(format!(
            "style \"{name}\" {}",
            if replaced { "saved" } else { "added" }
        ))
    }

    /// Deletes the style `name`; what to tell the user.
    pub fn delete(&mut self, name: &str) -> Result<String, String> {
        let mut book = self.book.clone();
        book.remove(name)
            .ok_or_else(|| format!("there is no style \"{name}\" to delete"))?;
        self.write(book)?;
        Ok(format!("style \"{name}\" deleted"))
    }

    /// Takes in the styles of the file at `path`; what to tell the user.
    pub fn import(&mut self, path: &Path) -> Result<String, String> {
        let theirs = StyleBook::read(path)?;
        if theirs.is_empty() {
            return Err(format!("{} holds no styles", path.display()));
        }
        let mut book = self.book.clone();
        let (added, replaced) = book.merge(theirs);
        self.write(book)?;
        Ok(format!(
            "{added} styles added and {replaced} replaced from {}",
            path.display()
        ))
    }

    /// Writes `book` and takes it; the file and the styles stay as they were on failure.
    fn write(&mut self, book: StyleBook) -> Result<(), String> {
        if let Some(problem) = &self.problem {
            return Err(format!("styles are not saved: {problem}"));
        }
        book.write(&self.path)
            .map_err(|e| format!("styles are not saved: {e}"))?;
        self.book = book;
        Ok(())
    }

    /// After an image's prompts were restored into `settings`: the styles that made them
    /// are chosen and taken off the prompts, as A1111 does. Where none made them, every
    /// style is unticked (A1111's "Apply if any" would keep those chosen before), so that
    /// generating makes the image's own prompts. `true` when styles were found.
    pub fn take_from_restored(&self, settings: &mut Settings) -> bool {
        let found = self
            .book
            .extract(&settings.prompt, &settings.negative_prompt);
        settings.styles = found.names;
        if settings.styles.is_empty() {
            return false;
        }
        settings.prompt = found.prompt;
        settings.negative_prompt = found.negative_prompt;
        true
    }
}
