//! The name a single file would give a tensor it lacks, so that a "missing tensor" error
//! names it as the file does (`model.diffusion_model.input_blocks.1.0.in_layers.2.weight`),
//! not only by the diffusers module path Ember loads it into.
//!
//! Key routing only goes from file names to module paths. A missing tensor has no file
//! name, so it is found by analogy: a name made of one present key's leading segments and
//! another present key's trailing segments that routes to the missing path (a damaged file
//! lacks a tensor whose kind it holds elsewhere, in another block). Only runs on the error
//! path.

use std::collections::HashSet;

/// Searches the file's keys of one network for the name of `missing` (a module path).
/// `route` maps a file key to the module paths it loads into (none for a key it ignores).
pub fn file_name_for(
    missing: &str,
    present: &[String],
    route: &dyn Fn(&str) -> Vec<String>,
) -> Option<String> {
    let missing = normalised(missing);
    // The search makes every head of a key with every tail of every key: a hand-made key
    // of thousands of segments would make it run for hours. Real keys are far shorter.
    let present: Vec<&String> = present.iter().filter(|k| k.len() <= MAX_KEY).collect();
    let mut by_closeness: Vec<(usize, &String)> = present
        .iter()
        .copied()
        .filter_map(|key| {
            let closest = route(key)
                .iter()
                .map(|m| shared_segments(&normalised(m), &missing))
                .max()?;
            Some((closest, key))
        })
        .collect();
    by_closeness.sort_by_key(|&(shared, _)| std::cmp::Reverse(shared));
    let suffixes: HashSet<&str> = present.iter().flat_map(|k| tails(k)).collect();
    for (_, key) in by_closeness.iter().take(8) {
        for head in heads(key) {
            for tail in &suffixes {
                let candidate = format!("{head}.{tail}");
                if route(&candidate).iter().any(|m| normalised(m) == missing) {
                    return Some(candidate);
                }
            }
        }
    }
    None
}

/// The longest key the search takes (the longest SDXL key is about 100 bytes).
const MAX_KEY: usize = 256;

/// Burn names norm parameters `gamma`/`beta` where the files say `weight`/`bias`.
fn normalised(path: &str) -> String {
    match path.rsplit_once('.') {
        Some((head, "gamma")) => format!("{head}.weight"),
        Some((head, "beta")) => format!("{head}.bias"),
        _ => path.to_string(),
    }
}

fn shared_segments(a: &str, b: &str) -> usize {
    a.split('.')
        .zip(b.split('.'))
        .take_while(|(x, y)| x == y)
        .count()
}

/// Every proper leading part of `key` at a dot (`a`, `a.b` of `a.b.c`).
fn heads(key: &str) -> impl Iterator<Item = &str> {
    key.match_indices('.').map(move |(i, _)| &key[..i])
}

/// Every proper trailing part of `key` at a dot (`b.c`, `c` of `a.b.c`).
fn tails(key: &str) -> impl Iterator<Item = &str> {
    key.match_indices('.').map(move |(i, _)| &key[i + 1..])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy routing: `blocks.N.a.K` loads into `down.N.first.K`, `blocks.N.b.K` into
    /// `down.N.second.K`.
    fn route(key: &str) -> Vec<String> {
        let routed = || {
            let rest = key.strip_prefix("model.blocks.")?;
            let (n, rest) = rest.split_once('.')?;
            let (part, leaf) = rest.split_once('.')?;
            let part = match part {
                "a" => "first",
                "b" => "second",
                _ => return None,
            };
            Some(format!("down.{n}.{part}.{leaf}"))
        };
        routed().into_iter().collect()
    }

    #[test]
    fn a_missing_tensor_is_named_as_the_file_names_its_kind() {
        let present: Vec<String> = ["model.blocks.0.a.weight", "model.blocks.0.b.bias"]
            .map(String::from)
            .to_vec();
        let r: &dyn Fn(&str) -> Vec<String> = &route;
        assert_eq!(
            file_name_for("down.0.second.gamma", &present, r).as_deref(),
            Some("model.blocks.0.b.weight")
        );
        assert_eq!(
            file_name_for("down.0.first.beta", &present, r).as_deref(),
            Some("model.blocks.0.a.bias")
        );
        assert_eq!(file_name_for("up.3.other.weight", &present, r), None);
    }

    /// A key of 100,000 segments (it routes, so a loader keeps it) is left out of the
    /// search, which still names the missing tensor from the others.
    #[test]
    fn an_absurdly_long_key_is_left_out_of_the_search() {
        let long = format!("model.blocks.0.a.{}weight", "x.".repeat(100_000));
        let present = vec![
            long,
            "model.blocks.0.a.weight".to_string(),
            "model.blocks.0.b.bias".to_string(),
        ];
        let r: &dyn Fn(&str) -> Vec<String> = &route;
        assert_eq!(
            file_name_for("down.0.second.gamma", &present, r).as_deref(),
            Some("model.blocks.0.b.weight")
        );
    }
}
