//! A1111's prompt emphasis syntax (`modules/prompt_parser.py` `parse_prompt_attention`),
//! reproduced exactly: `(x)` ×1.1, `[x]` ÷1.1, `(x:w)`, nesting, `\(` escapes, unclosed
//! brackets closed at the end, `BREAK`, equal-weight neighbours merged. Weights are float64
//! products in A1111's order, so `((a))` is 1.2100000000000002 and does not merge with
//! `(a:1.21)`.

use crate::error::{Error, Result};

/// How weights act on the text encoder's output (A1111's "Emphasis" setting).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Emphasis {
    /// A1111's default ("Original"): each chunk's output is scaled per token, then
    /// rescaled so the chunk's mean is what it was.
    #[default]
    Original,
    /// A1111's "No norm": scaled per token, the mean left as it comes (ComfyUI's weighting
    /// is close to this but scales the difference from the empty prompt's output instead).
    NoNorm,
    /// A1111's "Ignore": brackets are syntax (removed) but weigh nothing.
    Ignore,
    /// No syntax at all: brackets, `BREAK` and `\` are text, as diffusers reads a prompt.
    Off,
}

impl Emphasis {
    pub const ALL: [Emphasis; 4] = [
        Emphasis::Original,
        Emphasis::NoNorm,
        Emphasis::Ignore,
        Emphasis::Off,
    ];

    /// The name `--emphasis` takes: `original`, `none`, `ignore`, `off`.
    pub fn name(self) -> &'static str {
        match self {
            Emphasis::Original => "original",
            Emphasis::NoNorm => "none",
            Emphasis::Ignore => "ignore",
            Emphasis::Off => "off",
        }
    }

    /// A1111's name for it (its settings and PNG metadata): `Original`, `No norm`, `Ignore`,
    /// and `None` for brackets read as text (so A1111's `None` is Ember's `off`, not
    /// `--emphasis none`).
    pub fn a1111_name(self) -> &'static str {
        match self {
            Emphasis::Original => "Original",
            Emphasis::NoNorm => "No norm",
            Emphasis::Ignore => "Ignore",
            Emphasis::Off => "None",
        }
    }

    /// The mode an A1111 name (from a PNG's `Emphasis:`) stands for, exactly as A1111
    /// writes it.
    pub fn from_a1111_name(name: &str) -> Option<Self> {
        Emphasis::ALL
            .into_iter()
            .find(|e| e.a1111_name() == name.trim())
    }

    /// Reads a `--emphasis` name, any case (`none` and `no norm` are A1111's "No norm").
    pub fn parse(name: &str) -> Result<Self> {
        let key = name.trim().to_ascii_lowercase().replace(['-', '_'], " ");
        Emphasis::ALL
            .into_iter()
            .find(|e| key == e.name())
            .or((key == "no norm" || key == "nonorm").then_some(Emphasis::NoNorm))
            .ok_or_else(|| {
                Error::settings(format!(
                    "unknown emphasis {name:?}; valid: original, none (no norm), ignore, off"
                ))
            })
    }

    /// The prompt's segments under this mode: A1111's parse, or the whole text at weight 1.
    pub fn segments(self, prompt: &str) -> Result<Vec<Segment>> {
        match self {
            Emphasis::Off => Ok(vec![(prompt.to_string(), 1.0)]),
            _ => parse(prompt),
        }
    }
}

/// One run of text and its weight; `BREAK` is `("BREAK", -1.0)` (scaled like any text when
/// inside brackets, after which it is the word "break" with a negative weight, as in A1111).
pub type Segment = (String, f64);

const ROUND: f64 = 1.1;
const SQUARE: f64 = 1.0 / 1.1;

/// What the scanner found at a position (A1111's `re_attention` alternatives, in order).
enum Token<'a> {
    /// `\(` `\)` `\[` `\]` `\\`: the character; a lone `\`: nothing.
    Escape(&'a str),
    Open(char),
    /// `:` + spaces + number + spaces + `)`: the number's text.
    Weight(&'a str),
    Close(char),
    /// Literal text (the token's span).
    Text,
}

/// Python's `\s` (str.isspace), which counts a few controls Rust's `is_whitespace` does not.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Python's `\w` for `str` patterns.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Python's `\d`, taken as ASCII digits: a weight written in other scripts' digits (which
/// Python also accepts) stays text here.
fn is_digit(c: char) -> bool {
    c.is_ascii_digit()
}

/// The token at the start of `rest` and its length in bytes.
fn next_token(rest: &str) -> (Token<'_>, usize) {
    let mut chars = rest.chars();
    let first = chars.next().expect("called on non-empty text");
    match first {
        '\\' => match chars.next() {
            Some(c @ ('(' | ')' | '[' | ']' | '\\')) => {
                (Token::Escape(&rest[1..2]), 1 + c.len_utf8())
            }
            _ => (Token::Escape(""), 1),
        },
        '(' | '[' => (Token::Open(first), 1),
        ':' => match weight_at(rest) {
            Some((number, len)) => (Token::Weight(number), len),
            None => (Token::Text, 1),
        },
        ')' | ']' => (Token::Close(first), 1),
        _ => {
            let len = rest
                .char_indices()
                .find(|&(_, c)| matches!(c, '\\' | '(' | ')' | '[' | ']' | ':'))
                .map_or(rest.len(), |(i, _)| i);
            (Token::Text, len)
        }
    }
}

/// `:\s*([+-]?[.\d]+)\s*\)` at the start of `rest`: the number and the match length.
fn weight_at(rest: &str) -> Option<(&str, usize)> {
    let mut i = 1;
    let skip_spaces = |from: usize| {
        rest[from..]
            .char_indices()
            .find(|&(_, c)| !is_space(c))
            .map_or(rest.len(), |(j, _)| from + j)
    };
    i = skip_spaces(i);
    let start = i;
    if rest[i..].starts_with(['+', '-']) {
        i += 1;
    }
    let digits = rest[i..]
        .char_indices()
        .find(|&(_, c)| !(c == '.' || is_digit(c)))
        .map_or(rest.len(), |(j, _)| i + j);
    if digits == i {
        return None;
    }
    let number = &rest[start..digits];
    let after = skip_spaces(digits);
    rest[after..]
        .starts_with(')')
        .then_some((number, after + 1))
}

/// Python's `float()` of a `[+-]?[.0-9]+` string (`1.`, `.5`, `+2` are numbers; `.` and
/// `1.2.3` are not).
fn parse_number(text: &str) -> Option<f64> {
    text.parse().ok()
}

/// Splits literal text on `\s*\bBREAK\b\s*` (A1111's `re_break`), appending the pieces with
/// a `("BREAK", -1)` between each two.
fn push_text(text: &str, out: &mut Vec<Segment>) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut piece_start = 0;
    let mut k = 0;
    while k < chars.len() {
        // The leftmost match: a run of spaces (possibly empty) that ends at a BREAK word.
        let mut j = k;
        while j < chars.len() && is_space(chars[j].1) {
            j += 1;
        }
        let at = chars.get(j).map_or(text.len(), |&(b, _)| b);
        let is_break = text[at..].starts_with("BREAK")
            && (j == 0 || !is_word(chars[j - 1].1))
            && text[at + 5..].chars().next().is_none_or(|c| !is_word(c));
        if is_break {
            let mut end = j + 5;
            while end < chars.len() && is_space(chars[end].1) {
                end += 1;
            }
            let match_start = chars[k].0;
            out.push((text[piece_start..match_start].to_string(), 1.0));
            out.push(("BREAK".to_string(), -1.0));
            piece_start = chars.get(end).map_or(text.len(), |&(b, _)| b);
            k = end;
        } else {
            k += 1;
        }
    }
    out.push((text[piece_start..].to_string(), 1.0));
}

/// Parses a prompt as A1111 does. `Err` only where A1111 raises: an explicit weight that
/// is not a number (`(a:1.2.3)`, `(a:.)`).
pub fn parse(prompt: &str) -> Result<Vec<Segment>> {
    let mut res: Vec<Segment> = Vec::new();
    let mut round: Vec<usize> = Vec::new();
    let mut square: Vec<usize> = Vec::new();
    let multiply = |res: &mut Vec<Segment>, from: usize, by: f64| {
        for segment in &mut res[from..] {
            segment.1 *= by;
        }
    };
    let mut rest = prompt;
    while !rest.is_empty() {
        let (token, len) = next_token(rest);
        match token {
            Token::Escape(c) => res.push((c.to_string(), 1.0)),
            Token::Open('(') => round.push(res.len()),
            Token::Open(_) => square.push(res.len()),
            Token::Weight(number) if !round.is_empty() => {
                let weight = parse_number(number).ok_or_else(|| {
                    Error::settings(format!(
                        "the weight {number:?} in the prompt is not a number (write it as (text:1.2))"
                    ))
                })?;
                let from = round.pop().unwrap_or_default();
                multiply(&mut res, from, weight);
            }
            Token::Close(')') if !round.is_empty() => {
                let from = round.pop().unwrap_or_default();
                multiply(&mut res, from, ROUND);
            }
            Token::Close(']') if !square.is_empty() => {
                let from = square.pop().unwrap_or_default();
                multiply(&mut res, from, SQUARE);
            }
            _ => push_text(&rest[..len], &mut res),
        }
        rest = &rest[len..];
    }
    for from in round {
        multiply(&mut res, from, ROUND);
    }
    for from in square {
        multiply(&mut res, from, SQUARE);
    }
    if res.is_empty() {
        res.push((String::new(), 1.0));
    }
    let mut i = 0;
    while i + 1 < res.len() {
        if res[i].1 == res[i + 1].1 {
            let next = res.remove(i + 1);
            res[i].0.push_str(&next.0);
        } else {
            i += 1;
        }
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a1111_doctest() {
        let parsed = parse("a (((house:1.3)) [on] a (hill:0.5), sun, (((sky))).").unwrap();
        let expected = [
            ("a ", 1.0),
            ("house", 1.5730000000000004),
            (" ", 1.1),
            ("on", 1.0),
            (" a ", 1.1),
            ("hill", 0.55),
            (", sun, ", 1.1),
            ("sky", 1.4641000000000006),
            (".", 1.1),
        ];
        let got: Vec<(&str, f64)> = parsed.iter().map(|(t, w)| (t.as_str(), *w)).collect();
        assert_eq!(got, expected);
    }
}
