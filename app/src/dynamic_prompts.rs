//! Dynamic prompts (ComfyUI's `{a|b}`, the sd-dynamic-prompts extension's syntax): variant
//! groups and `__wildcard__` files, resolved per image from its seed, so an image's prompt
//! is fixed by its seed and written in its metadata as A1111 shows it (the template beside
//! it as `Template`).
//!
//! Syntax: `{a|b|c}` one of them; `{2$$a|b|c}` two different ones joined by `, `;
//! `{1-3$$a|b|c}` one to three; `{2$$ and $$a|b|c}` joined by ` and `; `{3::a|b}` `a`
//! three times as likely; groups nest; `__name__` one line of `name.txt` in a wildcards
//! folder (itself resolved), `{2$$__name__}` two different lines; `\{`, `\}`, `\|` are
//! literal. A brace group without `|` or `$$` is left as typed (A1111 reads braces as plain
//! text, and NovelAI-style prompts use them), and so is A1111's `[a|b]` alternation.

use std::path::{Path, PathBuf};

use inference::api::GenerateRequest;

/// Wildcard files within wildcard files, at most: a file naming itself is a mistake.
const MAX_DEPTH: usize = 16;
/// Groups within groups, at most (the parser recurses once a level).
const MAX_NESTING: usize = 64;

/// The folders wildcards are read from, by name (sd-dynamic-prompts' `wildcards/`).
pub const WILDCARDS: &[&str] = &["wildcards"];

/// A prompt resolved, with what could not be (a wildcard no folder holds).
#[derive(Debug, PartialEq)]
pub struct Resolved {
    pub text: String,
    pub warnings: Vec<String>,
}

/// Resolves a request's prompts (and SDXL's second ones) for its seed, the image's, and
/// records the templates as sd-dynamic-prompts does (`Template`, `Negative Template`).
/// Returns the warnings (wildcards not found); a syntax error is an `Err`.
pub fn apply(request: &mut GenerateRequest, dirs: &[PathBuf]) -> Result<Vec<String>, String> {
    // A batch with a variation seed shares its seed: the variation seed tells its images
    // apart (both are in the metadata, so the choice is still reproducible).
    let seed = match request.noise.active_variation() {
        Some(v) => request.seed ^ v.seed.rotate_left(32),
        None => request.seed,
    };
    let mut warnings = Vec::new();
    let mut fields = Vec::new();
    let mut one = |text: &mut String, stream: u64, field: Option<&str>| {
        if !is_dynamic(text)? {
            return Ok::<_, String>(());
        }
        let resolved = resolve(text, seed, stream, dirs)?;
        warnings.extend(resolved.warnings);
        if let Some(field) = field.filter(|_| resolved.text != *text) {
            fields.push((field.to_string(), text.clone()));
        }
        *text = resolved.text;
        Ok(())
    };
    let (prompt, negative) = (request.prompt.clone(), request.negative_prompt.clone());
    one(&mut request.prompt, 0, Some("Template"))?;
    one(&mut request.negative_prompt, 1, Some("Negative Template"))?;
    // SDXL's second prompts: the same template makes the same choice for both encoders.
    let firsts = [
        (prompt, request.prompt.clone()),
        (negative, request.negative_prompt.clone()),
    ];
    let seconds = [&mut request.prompt_2, &mut request.negative_prompt_2];
    for ((second, (template, resolved)), stream) in seconds.into_iter().zip(firsts).zip([2, 3]) {
        match second {
            Some(text) if *text == template => *text = resolved,
            Some(text) => one(text, stream, None)?,
            None => {}
        }
    }
    request.metadata_fields.extend(fields);
    Ok(warnings)
}

/// Whether `text` holds anything to resolve (a group, a wildcard, an escape), or its syntax
/// error (a bad count, groups nested too deep).
pub fn is_dynamic(text: &str) -> Result<bool, String> {
    let nodes = parse(text, 0)?;
    let plain: Option<String> = nodes
        .iter()
        .map(|n| match n {
            Node::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    Ok(plain.as_deref() != Some(text))
}

/// `text` with what dynamic prompts would read in it escaped, so that it resolves to itself:
/// `{`, `}`, and a backslash before `{ } | \`. Text without groups is returned as it is
/// (plain braces like `{a}` stay). Wildcard names (`__name__`) have no escape and stay.
pub fn literal(text: &str) -> String {
    if !is_dynamic(text).unwrap_or(true) {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            '\\' if matches!(chars.get(i + 1), Some('{' | '}' | '|' | '\\')) => {
                out.push_str("\\\\")
            }
            c => out.push(c),
        }
    }
    out
}

/// `template` resolved with the generator seeded from `seed` (and `stream`, so a prompt and
/// its negative choose independently); wildcards are read from `dirs`.
pub fn resolve(
    template: &str,
    seed: u64,
    stream: u64,
    dirs: &[PathBuf],
) -> Result<Resolved, String> {
    let nodes = parse(template, 0)?;
    let mut rng = SplitMix64(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut out = Resolved {
        text: String::new(),
        warnings: Vec::new(),
    };
    render(&nodes, &mut rng, dirs, 0, &mut out)?;
    Ok(out)
}

#[derive(Clone, Debug, PartialEq)]
enum Node {
    Text(String),
    Group(Group),
    Wildcard(String),
}

#[derive(Clone, Debug, PartialEq)]
struct Group {
    /// Each option's weight and contents.
    options: Vec<(f64, Vec<Node>)>,
    /// How many to choose, at least and at most.
    count: (usize, usize),
    separator: String,
}

fn parse(text: &str, nesting: usize) -> Result<Vec<Node>, String> {
    if nesting > MAX_NESTING {
        return Err(format!("groups nest more than {MAX_NESTING} deep"));
    }
    let chars: Vec<char> = text.chars().collect();
    let closes = closing_braces(&chars);
    let mut nodes = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() && matches!(chars[i + 1], '{' | '}' | '|' | '\\') => {
                text.push(chars[i + 1]);
                i += 2;
            }
            '{' => match closes[i] {
                Some(end) => {
                    let inner: String = chars[i + 1..end].iter().collect();
                    match group(&inner, nesting)? {
                        Some(group) => {
                            flush(&mut text, &mut nodes);
                            nodes.push(Node::Group(group));
                            i = end + 1;
                        }
                        // Plain braces: kept, and what is inside read on (`{{a|b}}`).
                        None => {
                            text.push('{');
                            i += 1;
                        }
                    }
                }
                None => {
                    text.push('{');
                    i += 1;
                }
            },
            '_' if chars.get(i + 1) == Some(&'_') => match wildcard_name(&chars, i + 2) {
                Some((name, end)) => {
                    flush(&mut text, &mut nodes);
                    nodes.push(Node::Wildcard(name));
                    i = end;
                }
                None => {
                    text.push_str("__");
                    i += 2;
                }
            },
            c => {
                text.push(c);
                i += 1;
            }
        }
    }
    flush(&mut text, &mut nodes);
    Ok(nodes)
}

fn flush(text: &mut String, nodes: &mut Vec<Node>) {
    if !text.is_empty() {
        nodes.push(Node::Text(std::mem::take(text)));
    }
}

/// For each `{`, the index of the `}` closing it (escapes skipped), found in one pass.
fn closing_braces(chars: &[char]) -> Vec<Option<usize>> {
    let mut closes = vec![None; chars.len()];
    let mut open = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '{' => open.push(i),
            '}' => {
                if let Some(at) = open.pop() {
                    closes[at] = Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    closes
}

/// `name__` from `start`: letters, digits, `_`, `-`, `.`, `/` up to the closing `__`.
fn wildcard_name(chars: &[char], start: usize) -> Option<(String, usize)> {
    let mut i = start;
    while i + 1 < chars.len() {
        if chars[i] == '_' && chars[i + 1] == '_' && i > start {
            return Some((chars[start..i].iter().collect(), i + 2));
        }
        let c = chars[i];
        if !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/')) {
            return None;
        }
        i += 1;
    }
    None
}

/// Splits `text` at its top-level `|` (not inside braces, nor inside A1111's `[a|b]`
/// alternation, nor escaped).
fn split_options(text: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let (mut braces, mut brackets) = (0usize, 0usize);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        let part = parts.last_mut().expect("one part at least");
        match c {
            '\\' => {
                part.push(c);
                if let Some(next) = chars.next() {
                    part.push(next);
                }
                continue;
            }
            '{' => braces += 1,
            '}' => braces = braces.saturating_sub(1),
            '[' => brackets += 1,
            ']' => brackets = brackets.saturating_sub(1),
            '|' if braces == 0 && brackets == 0 => {
                parts.push(String::new());
                continue;
            }
            _ => {}
        }
        part.push(c);
    }
    parts
}

/// A variant group from what is between its braces; `None` when it is none (no `|` and no
/// `$$` at its top level: plain braces).
fn group(inner: &str, nesting: usize) -> Result<Option<Group>, String> {
    let mut options = split_options(inner);
    let mut count = (1, 1);
    let mut separator = ", ".to_string();
    let head: Vec<&str> = options[0].splitn(3, "$$").collect();
    if head.len() == 1 && options.len() == 1 {
        return Ok(None);
    }
    if head.len() > 1 {
        count = parse_count(head[0].trim()).ok_or_else(|| {
            format!(
                "{{{inner}}}: `{}` before $$ is not a count such as 2 or 1-3",
                head[0]
            )
        })?;
        if head.len() == 3 {
            separator = head[1].to_string();
        }
        options[0] = head[head.len() - 1].to_string();
    }
    let options = options
        .iter()
        .map(|option| {
            let (weight, text) = match option.split_once("::") {
                Some((w, rest)) if w.trim().parse::<f64>().is_ok_and(|w| w >= 0.0) => {
                    (w.trim().parse().unwrap_or(1.0), rest)
                }
                _ => (1.0, option.as_str()),
            };
            Ok((weight, parse(text, nesting + 1)?))
        })
        .collect::<Result<_, String>>()?;
    Ok(Some(Group {
        options,
        count,
        separator,
    }))
}

/// `2`, `1-3`, `-3` (one to three) or `2-` (two to all).
fn parse_count(text: &str) -> Option<(usize, usize)> {
    match text.split_once('-') {
        None => text.parse().ok().map(|n| (n, n)),
        Some((low, high)) => {
            let low = if low.trim().is_empty() {
                1
            } else {
                low.trim().parse().ok()?
            };
            let high = if high.trim().is_empty() {
                usize::MAX
            } else {
                high.trim().parse().ok()?
            };
            (low <= high).then_some((low, high))
        }
    }
}

fn render(
    nodes: &[Node],
    rng: &mut SplitMix64,
    dirs: &[PathBuf],
    depth: usize,
    out: &mut Resolved,
) -> Result<(), String> {
    for node in nodes {
        match node {
            Node::Text(text) => out.text.push_str(text),
            Node::Group(group) => render_group(group, rng, dirs, depth, out)?,
            Node::Wildcard(name) => match wildcard_lines(name, dirs) {
                Ok(lines) => {
                    if depth >= MAX_DEPTH {
                        return Err(format!(
                            "the wildcard __{name}__ nests more than {MAX_DEPTH} deep: does a \
                             file name itself?"
                        ));
                    }
                    let line = &lines[rng.below(lines.len())];
                    render(&parse(line, 0)?, rng, dirs, depth + 1, out)?;
                }
                Err(why) => {
                    out.warnings
                        .push(format!("__{name}__ was left as typed: {why}"));
                    out.text.push_str(&format!("__{name}__"));
                }
            },
        }
    }
    Ok(())
}

fn render_group(
    group: &Group,
    rng: &mut SplitMix64,
    dirs: &[PathBuf],
    depth: usize,
    out: &mut Resolved,
) -> Result<(), String> {
    // `{2$$__name__}`: two different lines of the file.
    let from_file;
    let mut options: Vec<&(f64, Vec<Node>)> = match group.options.as_slice() {
        [(_, only)] => match only.as_slice() {
            [Node::Wildcard(name)] => match wildcard_lines(name, dirs) {
                Ok(lines) => {
                    from_file = lines
                        .iter()
                        .map(|l| Ok((1.0, parse(l, 0)?)))
                        .collect::<Result<Vec<_>, String>>()?;
                    from_file.iter().collect()
                }
                Err(_) => group.options.iter().collect(),
            },
            _ => group.options.iter().collect(),
        },
        _ => group.options.iter().collect(),
    };
    let high = group.count.1.min(options.len());
    let low = group.count.0.min(high);
    let count = low + rng.below(high - low + 1);
    for n in 0..count {
        let total: f64 = options.iter().map(|(w, _)| w).sum();
        // Options of weight 0 are never chosen, not even to make up the count.
        if total.is_nan() || total <= 0.0 {
            break;
        }
        if n > 0 {
            out.text.push_str(&group.separator);
        }
        let mut at = rng.unit() * total;
        let pick = options
            .iter()
            .position(|(w, _)| {
                at -= w;
                at < 0.0
            })
            .unwrap_or(options.len() - 1);
        let (_, option) = options.remove(pick);
        render(option, rng, dirs, depth, out)?;
    }
    Ok(())
}

/// The choices of wildcard `name`: the lines of the first `name.txt` with any, trimmed,
/// blank and `#` lines left out; why there are none.
fn wildcard_lines(name: &str, dirs: &[PathBuf]) -> Result<Vec<String>, String> {
    // A name never climbs out of its folder, nor names a device (Windows' `con`, `nul`…).
    let reserved = |part: &str| {
        let stem = part.split('.').next().unwrap_or(part).to_ascii_lowercase();
        matches!(stem.as_str(), "con" | "prn" | "aux" | "nul")
            || (stem.len() == 4
                && (stem.starts_with("com") || stem.starts_with("lpt"))
                && stem.ends_with(|c: char| c.is_ascii_digit()))
    };
    if name
        .split('/')
        .any(|part| part.is_empty() || part == ".." || part == "." || reserved(part))
    {
        return Err(format!("{name:?} is not a wildcard name Ember reads"));
    }
    if dirs.is_empty() {
        return Err(format!(
            "there is no wildcards folder for {name}.txt (add one named wildcards to the \
             models folder)"
        ));
    }
    for dir in dirs {
        let path: PathBuf = dir.join(format!("{name}.txt"));
        if let Some(lines) = read_lines(&path).filter(|l| !l.is_empty()) {
            return Ok(lines);
        }
    }
    let names: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    Err(format!(
        "no wildcard file {name}.txt with a line in it in {}",
        names.join(", ")
    ))
}

fn read_lines(path: &Path) -> Option<Vec<String>> {
    let bytes = std::fs::read(path).ok()?;
    let text = String::from_utf8_lossy(bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes));
    Some(
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect(),
    )
}

/// A small seeded generator (SplitMix64): the same seed, the same choices, on every machine.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A whole number below `n` (`n` > 0), without modulo bias.
    fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let v = self.next();
            if v < zone {
                return (v % n) as usize;
            }
        }
    }
}

#[cfg(test)]
mod tests;
