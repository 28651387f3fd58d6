//! Ctrl+Up / Ctrl+Down in a prompt box: A1111's `edit-attention.js` (raise or lower the weight
//! of the selection, the bracket block around the cursor, or the word under it), on char
//! indices, with A1111's default precision (0.1; 0.05 inside `<lora:…>` tags) and delimiters.

/// A1111's `keyedit_delimiters` default plus its whitespace ones (tab, CR, LF).
const DELIMITERS: &str = ".,\\/!?%^*;:{}=`~() \t\r\n";
const ATTENTION_STEP: f64 = 0.1;
const EXTRA_STEP: f64 = 0.05;

/// The prompt after one Ctrl+Up (`up`) or Ctrl+Down with `selection` (char indices, start
/// <= end), and the new selection; `None` when A1111 would change nothing.
#[must_use]
pub fn edit_attention(
    text: &str,
    selection: (usize, usize),
    up: bool,
) -> Option<(String, (usize, usize))> {
    let mut t: Vec<char> = text.chars().collect();
    let (mut start, mut end) = selection;
    if start > end || end > t.len() {
        return None;
    }
    if start == end {
        let block = [('<', '>'), ('(', ')'), ('[', ']')]
            .into_iter()
            .find_map(|(open, close)| bracket_block(&t, start, open, close));
        (start, end) = block.unwrap_or_else(|| current_word(&t, start));
    }
    let mut close = ')';
    let mut delta = ATTENTION_STEP;
    let before = start.checked_sub(1).map(|i| t[i]);
    let after = t.get(end).copied();
    if before == Some('<') {
        close = '>';
        delta = EXTRA_STEP;
    } else if (before == Some('(') && after == Some(')'))
        || (before == Some('[') && after == Some(']'))
    {
        // Old-style `((word))`: rewritten as `(word:1.2)`.
        let (open, shut) = (before?, after?);
        let mut n = 0;
        while start > n && t[start - n - 1] == open && t.get(end + n) == Some(&shut) {
            n += 1;
        }
        let base: f64 = if open == '[' { 1.0 / 1.1 } else { 1.1 };
        let weight = (base.powi(n as i32) / ATTENTION_STEP).round() * ATTENTION_STEP;
        let inner: String = t[start..end].iter().collect();
        let replaced = format!("({inner}:{})", js_number(weight));
        t.splice(start - n..end + n, replaced.chars());
        start = start - n + 1;
        end = end - n + 1;
    } else if before != Some('(') {
        while end > start && t[end - 1] == ' ' {
            end -= 1;
        }
        if start == end {
            return None;
        }
        t.splice(end..end, ":1.0)".chars());
        t.insert(start, '(');
        start += 1;
        end += 1;
    }
    if t.get(end) != Some(&':') {
        return None;
    }
    let length = t[end + 1..].iter().position(|&c| c == close)? + 1;
    let number: String = t[end + 1..end + length].iter().collect();
    let weight = parse_float_prefix(&number)?;
    let weight = weight + if up { delta } else { -delta };
    let weight: f64 = format!("{weight:.11e}").parse().ok()?;
    if close == ')' && weight == 1.0 {
        // Weight 1: the brackets go.
        let paren = t[end..].iter().position(|&c| c == ')')?;
        t.drain(end..=end + paren);
        t.remove(start - 1);
        start -= 1;
        end -= 1;
    } else {
        let written = if weight.fract() == 0.0 {
            format!("{weight:.1}")
        } else {
            js_number(weight)
        };
        t.splice(end + 1..end + length, written.chars());
    }
    Some((t.into_iter().collect(), (start, end)))
}

/// The text of the `open`…`close` block around an empty selection at `at`, without a
/// trailing `:weight` (A1111's `selectCurrentParenthesisBlock`).
fn bracket_block(t: &[char], at: usize, open: char, close: char) -> Option<(usize, usize)> {
    let before = &t[..at];
    let open_at = before.iter().rposition(|&c| c == open)?;
    if before
        .iter()
        .rposition(|&c| c == close)
        .is_some_and(|c| c > open_at)
    {
        return None;
    }
    let after = &t[at..];
    let close_at = after.iter().position(|&c| c == close)?;
    if after
        .iter()
        .position(|&c| c == open)
        .is_some_and(|o| o < close_at)
    {
        return None;
    }
    let content = &t[open_at + 1..at + close_at];
    let start = open_at + 1;
    Some(match weight_colon(content) {
        Some(colon) => (start, start + colon),
        None => (start, start + content.len()),
    })
}

/// The last `:` of `content` when it matches A1111's `/.*:-?[\d.]+/s` (a colon followed by
/// a number somewhere).
fn weight_colon(content: &[char]) -> Option<usize> {
    let has_weight = content.iter().enumerate().any(|(i, &c)| {
        c == ':' && {
            let rest = &content[i + 1..];
            let rest = rest.strip_prefix(&['-']).unwrap_or(rest);
            rest.first()
                .is_some_and(|c| c.is_ascii_digit() || *c == '.')
        }
    });
    has_weight
        .then(|| content.iter().rposition(|&c| c == ':'))
        .flatten()
}

/// The word around `at` (A1111's `selectCurrentWord`), spaces trimmed.
fn current_word(t: &[char], at: usize) -> (usize, usize) {
    let (mut start, mut end) = (at, at);
    while start > 0 && !DELIMITERS.contains(t[start - 1]) {
        start -= 1;
    }
    while end < t.len() && !DELIMITERS.contains(t[end]) {
        end += 1;
    }
    while start < end && t[start] == ' ' {
        start += 1;
    }
    while end > start && t[end - 1] == ' ' {
        end -= 1;
    }
    (start, end)
}

/// JavaScript's `parseFloat`: the longest number at the start (after spaces).
fn parse_float_prefix(s: &str) -> Option<f64> {
    let s = s.trim_start();
    (1..=s.len())
        .rev()
        .filter(|&n| s.is_char_boundary(n))
        .find_map(|n| s[..n].parse::<f64>().ok().filter(|v| v.is_finite()))
}

/// A number as JavaScript writes it (shortest round trip; Rust's `{}` agrees for these).
fn js_number(v: f64) -> String {
    format!("{v}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(text: &str, sel: (usize, usize), up: bool) -> Option<(String, (usize, usize))> {
        edit_attention(text, sel, up)
    }

    #[test]
    fn a_word_under_the_cursor_gets_weighted() {
        assert_eq!(
            edit("a cat, dog", (3, 3), true),
            Some(("a (cat:1.1), dog".into(), (3, 6)))
        );
        assert_eq!(
            edit("a cat, dog", (3, 3), false),
            Some(("a (cat:0.9), dog".into(), (3, 6)))
        );
    }

    #[test]
    fn weights_step_and_vanish_at_one() {
        let (text, sel) = edit("a (cat:1.1), dog", (4, 4), true).unwrap();
        assert_eq!((text.as_str(), sel), ("a (cat:1.2), dog", (3, 6)));
        let (text, sel) = edit("a (cat:1.1), dog", (4, 4), false).unwrap();
        assert_eq!((text.as_str(), sel), ("a cat, dog", (2, 5)));
        assert_eq!(edit("(x:1.9)", (2, 2), true).unwrap().0, "(x:2.0)");
    }

    #[test]
    fn a_selection_is_weighted_whole() {
        assert_eq!(
            edit("red house ", (0, 10), true).unwrap().0,
            "(red house:1.1) "
        );
    }

    #[test]
    fn old_style_brackets_become_a_number() {
        assert_eq!(edit("((cat))", (2, 5), true).unwrap().0, "(cat:1.3)");
        assert_eq!(edit("[cat]", (1, 4), false).unwrap().0, "(cat:0.8)");
    }

    #[test]
    fn lora_tags_step_by_a_twentieth() {
        assert_eq!(
            edit("<lora:x:0.8>", (3, 3), true).unwrap().0,
            "<lora:x:0.85>"
        );
    }

    #[test]
    fn nothing_to_weigh_changes_nothing() {
        assert_eq!(edit("", (0, 0), true), None);
        assert_eq!(edit("a , b", (2, 2), true), None);
        assert_eq!(edit("x", (3, 3), true), None);
    }
}
