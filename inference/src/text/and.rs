//! A1111's composable prompts (`get_multicond_prompt_list`): `AND` with `:weight` splits a
//! prompt into weighted subprompts.

/// A prompt split at `AND` into subprompts, each with the weight a trailing `:number` gives
/// it (A1111's `get_multicond_prompt_list`; a prompt without `AND` is one subprompt, and a
/// `:number` at its very end is still its weight, as in A1111).
pub fn split_and(prompt: &str) -> Vec<(String, f64)> {
    split_on_and_word(prompt)
        .into_iter()
        .map(|part| trailing_weight(&part))
        .collect()
}

/// `re.split(r"\bAND\b", prompt)`.
fn split_on_and_word(prompt: &str) -> Vec<String> {
    let chars: Vec<char> = prompt.chars().collect();
    let word = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || *c == '_');
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut i = 0;
    while i < chars.len() {
        let is_and = chars[i..].starts_with(&['A', 'N', 'D'])
            && !word(i.checked_sub(1).and_then(|j| chars.get(j)))
            && !word(chars.get(i + 3));
        if is_and {
            parts.push(std::mem::take(&mut current));
            i += 3;
        } else {
            current.push(chars[i]);
            i += 1;
        }
    }
    parts.push(current);
    parts
}

/// `^((?:\s|.)*?)(?:\s*:\s*([-+]?(?:\d+\.?|\d*\.\d+)))?\s*$` on one subprompt.
fn trailing_weight(part: &str) -> (String, f64) {
    let trimmed = part.trim_end();
    if let Some(colon) = trimmed.rfind(':') {
        let number = trimmed[colon + 1..].trim_start();
        if is_plain_number(number) {
            let text = trimmed[..colon].trim_end();
            if let Ok(weight) = number.parse::<f64>() {
                return (text.to_string(), weight);
            }
        }
    }
    (trimmed.to_string(), 1.0)
}

/// `[-+]?(?:\d+\.?|\d*\.\d+)`, the whole of `s`.
fn is_plain_number(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s, None),
    };
    let digits = |t: &str| t.chars().all(|c| c.is_ascii_digit());
    match frac {
        None => !int.is_empty() && digits(int),
        Some(f) => digits(int) && digits(f) && !(int.is_empty() && f.is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn and_splits_with_weights() {
        assert_eq!(split_and("a cat"), vec![("a cat".into(), 1.0)]);
        assert_eq!(
            split_and("a cat :1.2 AND a dog: .5"),
            vec![("a cat".into(), 1.2), (" a dog".into(), 0.5)]
        );
        assert_eq!(split_and("BRAND ANDY"), vec![("BRAND ANDY".into(), 1.0)]);
        assert_eq!(split_and("(cat:1.2)"), vec![("(cat:1.2)".into(), 1.0)]);
    }
}
