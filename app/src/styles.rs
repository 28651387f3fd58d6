//! A1111's prompt styles: a `styles.csv` of named prompt and negative-prompt texts, read and
//! written as A1111 reads and writes it, applied to the prompts before a job, and found in
//! a restored image's prompts again.
//!
//! A style's text holds `{prompt}` where the prompt goes; without it the style is added
//! after the prompt, joined by `, `. Styles apply in the order chosen, each around what the
//! ones before it made, and an image records only the prompt they made (as in A1111).

use std::path::Path;

/// The file's name, in Ember's config folder (A1111 keeps it in its own folder).
pub const FILE_NAME: &str = "styles.csv";

/// Where a style's text puts the prompt.
const PLACEHOLDER: &str = "{prompt}";

/// One named style.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Style {
    pub name: String,
    pub prompt: String,
    pub negative_prompt: String,
}

/// The styles of one file, in its order; names are unique (a later row of a name replaces
/// the earlier one in its place, as A1111's dictionary does).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StyleBook {
    styles: Vec<Style>,
}

/// What [`StyleBook::extract`] found in a pair of prompts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extracted {
    /// The styles, in the order they apply.
    pub names: Vec<String>,
    pub prompt: String,
    pub negative_prompt: String,
}

/// A style's prompt around `prompt` (A1111's `merge_prompts`).
pub fn merge_prompts(style: &str, prompt: &str) -> String {
    if style.contains(PLACEHOLDER) {
        style.replace(PLACEHOLDER, prompt)
    } else {
        [prompt.trim(), style.trim()]
            .into_iter()
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `prompt` without `style`'s text, where it holds it (A1111's
/// `extract_style_text_from_prompt`); `None` where it does not, or where putting the style
/// back would not give `prompt` again (A1111 would take `a masterpiece` for `a` and
/// `masterpiece`, which make `a, masterpiece`): a restored image must make the same prompt.
fn strip_style(style: &str, prompt: &str) -> Option<String> {
    let (prompt, style) = (prompt.trim(), style.trim());
    let stripped = if style.contains(PLACEHOLDER) {
        let mut sides = style.split(PLACEHOLDER);
        let (left, right) = (sides.next()?, sides.next()?);
        if sides.next().is_some() || prompt.len() < left.len() + right.len() {
            return None;
        }
        prompt.strip_prefix(left)?.strip_suffix(right)?.to_string()
    } else {
        let rest = prompt.strip_suffix(style)?;
        rest.strip_suffix(", ").unwrap_or(rest).to_string()
    };
    (merge_prompts(style, &stripped).trim() == prompt).then_some(stripped)
}

impl StyleBook {
    /// Reads a `styles.csv`: UTF-8 with or without a byte-order mark, a header naming
    /// `name`, `prompt` (or the old `text`) and optionally `negative_prompt`, spaces after
    /// the commas ignored, rows whose name starts with `#` skipped.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let bytes = skip_initial_spaces(bytes);
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .from_reader(bytes.as_slice());
        let header: Vec<String> = reader
            .headers()
            .map_err(|e| e.to_string())?
            .iter()
            .map(|h| h.trim().to_string())
            .collect();
        let column = |name: &str| header.iter().position(|h| h == name);
        let name_at = column("name").ok_or("its first line names no `name` column")?;
        let prompt_at = column("prompt")
            .or_else(|| column("text"))
            .ok_or("its first line names no `prompt` column")?;
        let negative_at = column("negative_prompt");
        let mut book = Self::default();
        for record in reader.records() {
            let record = record.map_err(|e| e.to_string())?;
            // A short row's missing fields are empty.
            let field = |at: Option<usize>| {
                at.and_then(|i| record.get(i))
                    .unwrap_or_default()
                    .to_string()
            };
            let name = field(Some(name_at));
            // A nameless row could never be chosen (A1111 would list it as "").
            if name.is_empty() || name.starts_with('#') {
                continue;
            }
            book.put(Style {
                name,
                prompt: field(Some(prompt_at)),
                negative_prompt: field(negative_at),
            });
        }
        Ok(book)
    }

    /// The file as A1111 writes it: a byte-order mark, `name,prompt,negative_prompt`, CRLF
    /// line ends, fields quoted where they must be.
    pub fn to_csv(&self) -> Vec<u8> {
        let mut writer = csv::WriterBuilder::new()
            .terminator(csv::Terminator::CRLF)
            .from_writer(b"\xEF\xBB\xBF".to_vec());
        let rows = std::iter::once(["name", "prompt", "negative_prompt"]).chain(
            self.styles
                .iter()
                .map(|s| [s.name.as_str(), &s.prompt, &s.negative_prompt]),
        );
        for row in rows {
            writer
                .write_record(row)
                .expect("writing CSV to memory cannot fail");
        }
        writer.into_inner().expect("a Vec has no flush to fail")
    }

    /// The styles in `path`; none where there is no file yet.
    pub fn read(path: &Path) -> Result<Self, String> {
        match std::fs::read(path) {
            Ok(bytes) => Self::parse(&bytes)
                .map_err(|why| format!("{} could not be read: {why}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(format!("{} could not be read: {e}", path.display())),
        }
    }

    /// Writes the styles to `path` atomically, keeping the file it replaces as
    /// `styles.csv.bak` (as A1111 does).
    pub fn write(&self, path: &Path) -> Result<(), String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
        }
        if path.exists() {
            let backup = path.with_file_name(format!("{FILE_NAME}.bak"));
            std::fs::copy(path, &backup)
                .map_err(|e| format!("could not keep a copy as {}: {e}", backup.display()))?;
        }
        inference::imaging::write_atomic(path, &self.to_csv()).map_err(|e| e.to_string())
    }

    pub fn styles(&self) -> &[Style] {
        &self.styles
    }

    pub fn is_empty(&self) -> bool {
        self.styles.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&Style> {
        self.styles.iter().find(|s| s.name == name)
    }

    /// Adds `style`, or replaces the one of its name in its place; `true` when it replaced.
    pub fn put(&mut self, style: Style) -> bool {
        match self.styles.iter_mut().find(|s| s.name == style.name) {
            Some(old) => {
                *old = style;
                true
            }
            None => {
                self.styles.push(style);
                false
            }
        }
    }

    pub fn remove(&mut self, name: &str) -> Option<Style> {
        let at = self.styles.iter().position(|s| s.name == name)?;
        Some(self.styles.remove(at))
    }

    /// Takes in another file's styles (an A1111 `styles.csv`): how many were new and how
    /// many replaced styles of the same name.
    pub fn merge(&mut self, other: StyleBook) -> (usize, usize) {
        let total = other.styles.len();
        let replaced = other
            .styles
            .into_iter()
            .filter(|s| self.put(s.clone()))
            .count();
        (total - replaced, replaced)
    }

    /// The prompts the styles `names` make of `prompt` and `negative`, in that order.
    pub fn apply(
        &self,
        names: &[String],
        prompt: &str,
        negative: &str,
    ) -> Result<(String, String), String> {
        let (mut prompt, mut negative) = (prompt.to_string(), negative.to_string());
        for name in names {
            let style = self
                .get(name)
                .ok_or_else(|| format!("no style is named \"{name}\""))?;
            prompt = merge_prompts(&style.prompt, &prompt);
            negative = merge_prompts(&style.negative_prompt, &negative);
        }
        Ok((prompt, negative))
    }

    /// The styles that made `prompt` and `negative`, and the prompts without them (A1111's
    /// `extract_styles_from_prompt`, which restoring an image runs): the first style of the
    /// file found around both prompts is taken off them, then the next, each style once; a
    /// style that changes neither prompt is never found.
    pub fn extract(&self, prompt: &str, negative: &str) -> Extracted {
        let (mut prompt, mut negative) = (prompt.to_string(), negative.to_string());
        let mut left: Vec<&Style> = self.styles.iter().collect();
        let mut names = Vec::new();
        while let Some((at, stripped)) = left.iter().enumerate().find_map(|(at, style)| {
            if style.prompt.is_empty() && style.negative_prompt.is_empty() {
                return None;
            }
            let positive = strip_style(&style.prompt, &prompt)?;
            let negative_left = strip_style(&style.negative_prompt, &negative)?;
            let changes = positive != prompt.trim() || negative_left != negative.trim();
            changes.then_some((at, (positive, negative_left)))
        }) {
            (prompt, negative) = stripped;
            names.push(left.remove(at).name.clone());
        }
        names.reverse();
        Extracted {
            names,
            prompt,
            negative_prompt: negative,
        }
    }
}

/// Python's `skipinitialspace`, which A1111 reads with: spaces at a field's start are
/// dropped, so a quoted field may follow `, ` (the csv crate takes a quote as quoting only
/// at a field's very start). Quoted fields keep their spaces.
pub(crate) fn skip_initial_spaces(bytes: &[u8]) -> Vec<u8> {
    #[derive(Clone, Copy, PartialEq)]
    enum At {
        FieldStart,
        Unquoted,
        Quoted,
        /// A quote inside a quoted field: its end, or the first of a doubled `""`.
        QuoteInQuoted,
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = At::FieldStart;
    for &byte in bytes {
        at = match (at, byte) {
            (At::FieldStart, b' ') => continue,
            (At::Quoted, b'"') => At::QuoteInQuoted,
            (At::Quoted, _) | (At::QuoteInQuoted, b'"') => At::Quoted,
            (_, b',' | b'\n' | b'\r') => At::FieldStart,
            (At::FieldStart, b'"') => At::Quoted,
            _ => At::Unquoted,
        };
        out.push(byte);
    }
    out
}

#[cfg(test)]
mod tests;
