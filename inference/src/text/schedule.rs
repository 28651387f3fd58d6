//! Prompt editing and alternation as A1111 resolves them before any weighting
//! (`modules/prompt_parser.py`, `get_learned_conditioning_prompt_schedules`): `[from:to:when]`,
//! `[to:when]`, `[from::when]` and `[a|b|c]` become the prompt text of each step (`AND` is
//! [`super::and`]'s).
//!
//! A1111 parses with a lark grammar; this is a backtracking parser of the same grammar:
//!
//! ```text
//! start: (prompt | /[][():]/+)*
//! prompt: (emphasized | scheduled | alternate | plain | WHITESPACE)*
//! emphasized: "(" prompt ")" | "(" prompt ":" prompt ")" | "[" prompt "]"
//! scheduled: "[" [prompt ":"] prompt ":" [WHITESPACE] NUMBER [WHITESPACE] "]"
//! alternate: "[" prompt ("|" [prompt])+ "]"
//! plain: /([^\\\[\]():|]|\\.)+/
//! ```
//!
//! A prompt the grammar rejects (a `|` outside `[...]`, a trailing backslash) is used as
//! written for every step, as A1111 does.

/// Brackets nested deeper than this are read as text (the parser recurses per level; no
/// real prompt comes near it).
const MAX_NESTING: usize = 100;

/// One piece of a parsed prompt.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    Text(String),
    Scheduled {
        before: Vec<Node>,
        after: Vec<Node>,
        /// The number as written (A1111 reads `.` in it as "a fraction of the steps").
        when: String,
    },
    Alternate(Vec<Vec<Node>>),
}

struct Parser<'a> {
    chars: &'a [char],
}

impl Parser<'_> {
    fn at(&self, pos: usize) -> Option<char> {
        self.chars.get(pos).copied()
    }

    /// `prompt`: as much as parses from `pos` (possibly nothing).
    fn prompt(&self, mut pos: usize, depth: usize) -> (Vec<Node>, usize) {
        let mut nodes = Vec::new();
        let mut text = String::new();
        loop {
            match self.at(pos) {
                Some('(') => match self.round(pos, depth + 1) {
                    Some((inner, next)) => {
                        flush(&mut text, &mut nodes);
                        nodes.extend(inner);
                        pos = next;
                    }
                    None => break,
                },
                Some('[') => match self.square(pos, depth + 1) {
                    Some((inner, next)) => {
                        flush(&mut text, &mut nodes);
                        nodes.extend(inner);
                        pos = next;
                    }
                    None => break,
                },
                Some(')' | ']' | ':' | '|') | None => break,
                Some('\\') => match self.at(pos + 1) {
                    Some(c) if c != '\n' => {
                        text.push('\\');
                        text.push(c);
                        pos += 2;
                    }
                    _ => break,
                },
                Some(c) => {
                    text.push(c);
                    pos += 1;
                }
            }
        }
        flush(&mut text, &mut nodes);
        (nodes, pos)
    }

    /// `emphasized` with round brackets: kept as text around its parts.
    fn round(&self, pos: usize, depth: usize) -> Option<(Vec<Node>, usize)> {
        if depth > MAX_NESTING {
            return None;
        }
        let (first, mut next) = self.prompt(pos + 1, depth);
        let mut nodes = vec![Node::Text("(".into())];
        nodes.extend(first);
        if self.at(next) == Some(':') {
            let (second, after) = self.prompt(next + 1, depth);
            nodes.push(Node::Text(":".into()));
            nodes.extend(second);
            next = after;
        }
        (self.at(next) == Some(')')).then(|| {
            nodes.push(Node::Text(")".into()));
            (nodes, next + 1)
        })
    }

    /// `scheduled`, `alternate` or `emphasized` with square brackets.
    fn square(&self, pos: usize, depth: usize) -> Option<(Vec<Node>, usize)> {
        if depth > MAX_NESTING {
            return None;
        }
        let (first, next) = self.prompt(pos + 1, depth);
        match self.at(next) {
            Some(':') => self.scheduled(first, next, depth),
            Some('|') => self.alternate(first, next, depth),
            Some(']') => {
                let mut nodes = vec![Node::Text("[".into())];
                nodes.extend(first);
                nodes.push(Node::Text("]".into()));
                Some((nodes, next + 1))
            }
            _ => None,
        }
    }

    /// After `[` prompt, at a `:`: `[to:when]` or `[from:to:when]`.
    fn scheduled(
        &self,
        first: Vec<Node>,
        colon: usize,
        depth: usize,
    ) -> Option<(Vec<Node>, usize)> {
        if let Some((when, end)) = self.number_then_close(colon + 1) {
            let node = Node::Scheduled {
                before: Vec::new(),
                after: first,
                when,
            };
            return Some((vec![node], end));
        }
        let (second, next) = self.prompt(colon + 1, depth);
        if self.at(next) != Some(':') {
            return None;
        }
        let (when, end) = self.number_then_close(next + 1)?;
        let node = Node::Scheduled {
            before: first,
            after: second,
            when,
        };
        Some((vec![node], end))
    }

    /// `[WHITESPACE] NUMBER [WHITESPACE] "]"` from `pos`: the number and the position after
    /// the bracket.
    fn number_then_close(&self, mut pos: usize) -> Option<(String, usize)> {
        while self.at(pos).is_some_and(char::is_whitespace) {
            pos += 1;
        }
        let len = signed_number_len(&self.chars[pos..])?;
        let number: String = self.chars[pos..pos + len].iter().collect();
        pos += len;
        while self.at(pos).is_some_and(char::is_whitespace) {
            pos += 1;
        }
        (self.at(pos) == Some(']')).then_some((number, pos + 1))
    }

    /// After `[` prompt, at a `|`: the options up to `]`.
    fn alternate(
        &self,
        first: Vec<Node>,
        mut pos: usize,
        depth: usize,
    ) -> Option<(Vec<Node>, usize)> {
        let mut options = vec![first];
        while self.at(pos) == Some('|') {
            let (option, next) = self.prompt(pos + 1, depth);
            options.push(option);
            pos = next;
        }
        (self.at(pos) == Some(']')).then(|| (vec![Node::Alternate(options)], pos + 1))
    }

    /// `start`: prompts and stray brackets and colons; `None` where the grammar fails.
    fn start(&self) -> Option<Vec<Node>> {
        let mut nodes = Vec::new();
        let mut pos = 0;
        while pos < self.chars.len() {
            let (prompt, next) = self.prompt(pos, 0);
            nodes.extend(prompt);
            pos = next;
            match self.at(pos) {
                Some(c @ ('[' | ']' | '(' | ')' | ':')) => {
                    nodes.push(Node::Text(c.to_string()));
                    pos += 1;
                }
                Some(_) => return None,
                None => {}
            }
        }
        Some(nodes)
    }
}

fn flush(text: &mut String, nodes: &mut Vec<Node>) {
    if !text.is_empty() {
        nodes.push(Node::Text(std::mem::take(text)));
    }
}

/// Length of lark's `SIGNED_NUMBER` at the start of `s`, if one is there.
fn signed_number_len(s: &[char]) -> Option<usize> {
    let digits = |from: usize| s[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let mut pos = usize::from(matches!(s.first(), Some('+' | '-')));
    let int = digits(pos);
    pos += int;
    if s.get(pos) == Some(&'.') {
        let frac = digits(pos + 1);
        if int == 0 && frac == 0 {
            return None;
        }
        pos += 1 + frac;
    } else if int == 0 {
        return None;
    }
    // An exponent, when a whole one follows.
    if matches!(s.get(pos), Some('e' | 'E')) {
        let sign = usize::from(matches!(s.get(pos + 1), Some('+' | '-')));
        let exp = digits(pos + 1 + sign);
        if exp > 0 {
            pos += 1 + sign + exp;
        }
    }
    Some(pos)
}

/// The steps at which `nodes` change, with each `when` resolved (A1111's `CollectSteps`).
fn collect(nodes: &mut [Node], steps: usize, offsets: (f64, f64), out: &mut Vec<usize>) {
    for node in nodes {
        match node {
            Node::Text(_) => {}
            Node::Scheduled {
                before,
                after,
                when,
            } => {
                collect(before, steps, offsets, out);
                collect(after, steps, offsets, out);
                let v: f64 = when.parse().unwrap_or(0.0);
                let v = if when.contains('.') {
                    (v - offsets.1) * steps as f64
                } else {
                    v - offsets.0
                };
                // Python's int() truncates toward zero; A1111 then caps at the step count.
                let step = (v.trunc().clamp(-1.0, steps as f64)) as i64;
                *when = step.to_string();
                if step >= 1 {
                    out.push(step as usize);
                }
            }
            Node::Alternate(options) => {
                for option in options.iter_mut() {
                    collect(option, steps, offsets, out);
                }
                out.extend(1..=steps);
            }
        }
    }
}

/// The text of `nodes` at `step` (A1111's `AtStep`).
fn text_at(nodes: &[Node], step: usize, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Scheduled {
                before,
                after,
                when,
            } => {
                let when: i64 = when.parse().unwrap_or(0);
                let part = if (step as i64) <= when { before } else { after };
                text_at(part, step, out);
            }
            Node::Alternate(options) => text_at(&options[(step - 1) % options.len()], step, out),
        }
    }
}

/// The prompt of each stretch of steps: `(last step, text)` pairs, ascending, the last at
/// `steps`. `hires_steps` is A1111's second pass (its numbers then count from the first
/// pass's end: `1.5` is half-way through the second pass).
pub fn prompt_schedule(
    prompt: &str,
    steps: usize,
    hires_steps: Option<usize>,
) -> Vec<(usize, String)> {
    let (steps, offsets) = match hires_steps {
        Some(hires) => (hires, (steps as f64, 1.0)),
        None => (steps, (0.0, 0.0)),
    };
    let chars: Vec<char> = prompt.chars().collect();
    let Some(mut nodes) = (Parser { chars: &chars }).start() else {
        return vec![(steps, prompt.to_string())];
    };
    let mut ends = vec![steps];
    collect(&mut nodes, steps, offsets, &mut ends);
    ends.sort_unstable();
    ends.dedup();
    ends.into_iter()
        .map(|step| {
            let mut text = String::new();
            text_at(&nodes, step, &mut text);
            (step, text)
        })
        .collect()
}

/// Which entry of a schedule the denoiser call counted `call` (from 0) uses: the first
/// whose last step is `>= call` (A1111's `reconstruct_cond_batch`). Calls past the end
/// (only samplers A1111 lacks make them: DPM adaptive, Heun++) keep the last entry, where
/// A1111's lookup would fall back to the first.
pub fn entry_at(ends: &[usize], call: usize) -> usize {
    ends.iter()
        .position(|&end| call <= end)
        .unwrap_or(ends.len().saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_past_the_schedule_keep_its_last_prompt() {
        assert_eq!(entry_at(&[3, 10], 0), 0);
        assert_eq!(entry_at(&[3, 10], 3), 0);
        assert_eq!(entry_at(&[3, 10], 4), 1);
        assert_eq!(entry_at(&[3, 10], 11), 1);
    }

    #[test]
    fn absurd_prompts_parse_quickly_without_overflowing() {
        for prompt in [
            "(".repeat(10_000),
            "[".repeat(10_000),
            format!("{}x{}", "[a:".repeat(3_000), "]".repeat(3_000)),
            "[a|".repeat(3_000),
            "a\0 \u{202e}rtl 🎨 [b:c:1e999] [d:-3] [e:.5e1]".into(),
        ] {
            let schedule = prompt_schedule(&prompt, 20, None);
            assert!(!schedule.is_empty() && schedule.len() <= 20);
            assert_eq!(schedule.last().unwrap().0, 20);
        }
        // A huge `when` is the last step; a negative one is never reached.
        let s = prompt_schedule("[b:c:1e999] [d:e:-3]", 4, None);
        assert_eq!(s, vec![(4, "b e".to_string())]);
    }
}
