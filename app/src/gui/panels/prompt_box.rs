//! A prompt box as A1111's: Ctrl+Up / Ctrl+Down change the weight of the selection or the
//! word under the cursor, weighted spans, `BREAK`, choice marks (`{a|b}`, `[a|b]`) and
//! embedding names are coloured (words that look like embeddings but name none in red, named
//! under the box), and the token count shows against the chunk limit (`80/150`).

use std::sync::OnceLock;

use egui::text::{CCursor, CCursorRange, LayoutJob};
use egui::{Color32, FontId, Key, Modifiers, TextFormat};
use inference::text::and::split_and;
use inference::text::chunks::chunk;
use inference::text::embeddings::unknown_embedding_words_among;
use inference::text::emphasis::Emphasis;
use inference::text::schedule::prompt_schedule;
use inference::text::{ClipTokenizer, PadToken};

use crate::gui::prompt_edit::edit_attention;

/// The CLIP vocabulary every family shares, for counting (loaded once).
fn tokenizer() -> Option<&'static ClipTokenizer> {
    static TOKENIZER: OnceLock<Option<ClipTokenizer>> = OnceLock::new();
    TOKENIZER
        .get_or_init(|| ClipTokenizer::bundled(PadToken::EndOfText).ok())
        .as_ref()
}

/// A1111's counter text for `prompt`: the most tokens any of its `AND` parts has at any step
/// of `steps`, over the chunk limit it fills (`token_count / ceil(count / 75) * 75`).
/// A negative prompt (`positive` false) is not split at AND, as A1111 counts it.
pub fn token_counter(prompt: &str, positive: bool, emphasis: Emphasis, steps: u32) -> String {
    let Some(tokenizer) = tokenizer() else {
        return String::new();
    };
    // `<lora:…>` tags are taken out before counting, as before encoding.
    let prompt =
        inference::lora::tags::extract(prompt).map_or_else(|_| prompt.to_string(), |(p, _)| p);
    let mut most = 0;
    let parts = if positive {
        split_and(&prompt)
    } else {
        vec![(prompt, 1.0)]
    };
    for (part, _) in parts {
        for (_, text) in prompt_schedule(&part, steps.max(1) as usize, None) {
            let count = emphasis
                .segments(&text)
                .and_then(|segments| chunk(tokenizer, &segments))
                .map_or(0, |c| c.token_count);
            most = most.max(count);
        }
    }
    let limit = most.max(1).div_ceil(75) * 75;
    format!("{most}/{limit}")
}

/// Colours: weight up, weight down, BREAK.
const UP: Color32 = Color32::from_rgb(0xf0, 0xa0, 0x60);
const DOWN: Color32 = Color32::from_rgb(0x80, 0xa8, 0xe8);
const BREAK: Color32 = Color32::from_rgb(0xc8, 0x90, 0xf0);
/// The choice marks: dynamic prompts' `{`, `|`, `}` and A1111's alternation `|`.
const CHOICE: Color32 = Color32::from_rgb(0x60, 0xc8, 0xc8);
/// Colours: a known embedding's name, a word that looks like a missing one.
const EMBEDDING: Color32 = Color32::from_rgb(0x70, 0xd0, 0x90);
const MISSING: Color32 = Color32::from_rgb(0xf0, 0x60, 0x60);

/// The embedding names of a prompt box: known ones and missing-looking words.
struct Names<'a> {
    known: &'a [String],
    missing: Vec<String>,
}

/// Whether `c` continues a name (A1111 matches names as CLIP tokens; this is close).
fn in_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-'
}

impl Names<'_> {
    /// The colour of the name of `text` starting at byte `i`, and its end, when one does.
    fn at(&self, text: &str, i: usize) -> Option<(Color32, usize)> {
        if text[..i].chars().next_back().is_some_and(in_word) {
            return None;
        }
        let rest = &text[i..];
        let missing = self.missing.iter().map(|w| (w.as_str(), MISSING));
        let known = self.known.iter().map(|w| (w.as_str(), EMBEDDING));
        missing.chain(known).find_map(|(word, colour)| {
            let n = word.len();
            let matches = rest.is_char_boundary(n.min(rest.len()))
                && rest.len() >= n
                && rest[..n].eq_ignore_ascii_case(word)
                && !rest[n..].chars().next().is_some_and(in_word);
            matches.then_some((colour, i + n))
        })
    }
}

/// The prompt laid out with weighted spans coloured by bracket depth.
fn highlighted(
    text: &str,
    names: &Names<'_>,
    font: FontId,
    normal: Color32,
    wrap: f32,
) -> LayoutJob {
    let mut job = LayoutJob::default();
    job.wrap.max_width = wrap;
    let (mut round, mut square) = (0i32, 0i32);
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        // A whole-word BREAK (A1111's `\bBREAK\b`).
        let word_edge = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        let is_break = text[i..].starts_with("BREAK")
            && word_edge(text[..i].chars().next_back())
            && word_edge(text[i + 5..].chars().next());
        if is_break {
            job.append("BREAK", 0.0, TextFormat::simple(font.clone(), BREAK));
            while chars.peek().is_some_and(|(j, _)| *j < i + 5) {
                chars.next();
            }
            continue;
        }
        if let Some((colour, end)) = names.at(text, i) {
            let mut format = TextFormat::simple(font.clone(), colour);
            if colour == MISSING {
                format.underline = egui::Stroke::new(1.0, colour);
            }
            job.append(&text[i..end], 0.0, format);
            while chars.peek().is_some_and(|(j, _)| *j < end) {
                chars.next();
            }
            continue;
        }
        let mut end = i + c.len_utf8();
        match c {
            '\\' => {
                if let Some((j, next)) = chars.next() {
                    end = j + next.len_utf8();
                }
            }
            '(' => round += 1,
            '[' => square += 1,
            _ => {}
        }
        let colour = if matches!(c, '{' | '}' | '|') {
            CHOICE
        } else if round > square && round > 0 {
            UP
        } else if square > 0 {
            DOWN
        } else {
            normal
        };
        match c {
            ')' => round = (round - 1).max(0),
            ']' => square = (square - 1).max(0),
            _ => {}
        }
        job.append(&text[i..end], 0.0, TextFormat::simple(font.clone(), colour));
    }
    job
}

/// A multiline prompt box with A1111's weight keys and colours; `embeddings` are the names
/// (file stems) of the embeddings the models folder holds.
pub fn prompt_box(
    ui: &mut egui::Ui,
    text: &mut String,
    id: &str,
    rows: usize,
    hint: &str,
    embeddings: &[String],
) -> egui::Response {
    let id = ui.make_persistent_id(id);
    let focused = ui.memory(|m| m.has_focus(id));
    if focused {
        // Every press counts, several in one frame too (a busy frame, a held key).
        let presses = ui.input_mut(|i| {
            let up = i.count_and_consume_key(Modifiers::COMMAND, Key::ArrowUp);
            up as isize - i.count_and_consume_key(Modifiers::COMMAND, Key::ArrowDown) as isize
        });
        if presses != 0
            && let Some(mut state) = egui::TextEdit::load_state(ui.ctx(), id)
            && let Some(range) = state.cursor.char_range()
        {
            let (a, b): (usize, usize) = (range.primary.index.into(), range.secondary.index.into());
            let mut selection = None;
            for _ in 0..presses.unsigned_abs() {
                let from = selection.unwrap_or((a.min(b), a.max(b)));
                let Some((edited, range)) = edit_attention(text, from, presses > 0) else {
                    break;
                };
                (*text, selection) = (edited, Some(range));
            }
            if let Some((start, end)) = selection {
                state.cursor.set_char_range(Some(CCursorRange::two(
                    CCursor::new(start),
                    CCursor::new(end),
                )));
                state.store(ui.ctx(), id);
            }
        }
    }
    let known: Vec<&str> = embeddings.iter().map(String::as_str).collect();
    let names = Names {
        known: embeddings,
        missing: unknown_embedding_words_among(text, &known),
    };
    let mut layouter = |ui: &egui::Ui, buffer: &dyn egui::TextBuffer, wrap: f32| {
        let font = egui::TextStyle::Body.resolve(ui.style());
        let normal = ui.visuals().text_color();
        let job = highlighted(buffer.as_str(), &names, font, normal, wrap);
        ui.fonts_mut(|f| f.layout_job(job))
    };
    let response = egui::TextEdit::multiline(text)
        .id(id)
        .desired_rows(rows)
        .desired_width(f32::INFINITY)
        .hint_text(hint)
        .layouter(&mut layouter)
        .show(ui)
        .response
        .response;
    if !names.missing.is_empty() {
        let words: Vec<String> = names.missing.iter().map(|w| format!("\"{w}\"")).collect();
        ui.colored_label(
            MISSING,
            format!("No embedding named {}: read as text", words.join(", ")),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn break_is_coloured_as_a_whole_word_only_and_choices_stand_out() {
        let names = Names {
            known: &[],
            missing: Vec::new(),
        };
        let colours = |text: &str| -> Vec<(String, Color32)> {
            let job = highlighted(text, &names, FontId::default(), Color32::WHITE, 100.0);
            job.sections
                .iter()
                .map(|s| {
                    let (a, b) = (
                        usize::from(s.byte_range.start),
                        usize::from(s.byte_range.end),
                    );
                    (text[a..b].to_string(), s.format.color)
                })
                .collect()
        };
        assert!(colours("a BREAK b").contains(&("BREAK".to_string(), BREAK)));
        assert!(colours("{a|b}").contains(&("|".to_string(), CHOICE)));
        assert!(
            colours("BREAKFAST")
                .iter()
                .all(|(_, c)| *c == Color32::WHITE)
        );
    }

    #[test]
    fn the_counter_reads_as_a1111s() {
        assert_eq!(token_counter("", true, Emphasis::Original, 20), "0/75");
        assert_eq!(token_counter("a cat", true, Emphasis::Original, 20), "2/75");
        let long = "cat ".repeat(80);
        assert_eq!(token_counter(&long, true, Emphasis::Original, 20), "80/150");
        // Tags are not counted; a negative prompt is not split at AND.
        assert_eq!(
            token_counter("a cat <lora:ink:0.8>", true, Emphasis::Original, 20),
            "2/75"
        );
        assert_eq!(
            token_counter("a AND b", true, Emphasis::Original, 20),
            "1/75"
        );
        assert_eq!(
            token_counter("a AND b", false, Emphasis::Original, 20),
            "3/75"
        );
        // The longest step of an edit counts.
        assert_eq!(
            token_counter("[a:a b c:0.5]", true, Emphasis::Original, 20),
            "3/75"
        );
    }
}
