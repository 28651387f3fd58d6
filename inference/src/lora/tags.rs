//! A1111's extra-network tags in prompts (`modules/extra_networks.py`): `<lora:name:w>`,
//! `<lora:name:te:unet>`, `<lora:name:te=0.5:unet=1>` (and `<lyco:…>`), removed from the
//! text before it is encoded, and the LoRA files they name, found by stem.

use std::path::{Path, PathBuf};

use super::merge::LoraSpec;
use crate::error::{Error, Result};

/// One `<lora:…>` tag.
#[derive(Clone, Debug, PartialEq)]
pub struct LoraTag {
    pub name: String,
    pub text_encoder: f32,
    pub unet: f32,
}

/// Every `<word:args>` tag of `prompt` (A1111's `<(\w+):([^>]+)>`), as (network, args) byte
/// ranges: `(start, end, network, args)`.
fn tags(prompt: &str) -> Vec<(usize, usize, &str, &str)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(offset) = prompt[from..].find('<') {
        let start = from + offset;
        let rest = &prompt[start + 1..];
        let word_len = rest
            .char_indices()
            .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
            .map_or(rest.len(), |(i, _)| i);
        let after_word = &rest[word_len..];
        let args_len = after_word
            .strip_prefix(':')
            .and_then(|args| args.find('>').map(|end| (args, end)));
        match args_len {
            Some((args, end)) if word_len > 0 && end > 0 && !args[..end].contains('<') => {
                let tag_end = start + 1 + word_len + 1 + end + 1;
                found.push((start, tag_end, &rest[..word_len], &args[..end]));
                from = tag_end;
            }
            _ => from = start + 1,
        }
    }
    found
}

/// `prompt` without its extra-network tags (each replaced by nothing, as A1111 does), and its
/// LoRA tags. A tag whose weights are not numbers is an error naming it.
pub fn extract(prompt: &str) -> Result<(String, Vec<LoraTag>)> {
    let mut text = String::with_capacity(prompt.len());
    let mut loras = Vec::new();
    let mut last = 0;
    for (start, end, network, args) in tags(prompt) {
        text.push_str(&prompt[last..start]);
        last = end;
        if network == "lora" || network == "lyco" {
            loras.push(parse_lora(args, &prompt[start..end])?);
        }
    }
    text.push_str(&prompt[last..]);
    Ok((text, loras))
}

/// Every readable LoRA tag of `prompt` with its byte range (tags whose weights are not
/// numbers are left out), for editing weights in place.
pub fn spans(prompt: &str) -> Vec<(std::ops::Range<usize>, LoraTag)> {
    tags(prompt)
        .into_iter()
        .filter(|(_, _, network, _)| *network == "lora" || *network == "lyco")
        .filter_map(|(start, end, _, args)| {
            Some((start..end, parse_lora(args, &prompt[start..end]).ok()?))
        })
        .collect()
}

/// `prompt` with the tag at `range` rewritten to `tag`'s weights, as A1111 writes them:
/// `<lora:name:w>`, or `<lora:name:te:unet>` when they differ (weights rounded to 0.01).
pub fn set_weights(prompt: &str, range: std::ops::Range<usize>, tag: &LoraTag) -> String {
    let network = if prompt[range.clone()].starts_with("<lyco:") {
        "lyco"
    } else {
        "lora"
    };
    let w = |v: f32| {
        let text = format!("{:.2}", v);
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    let weights = if w(tag.text_encoder) == w(tag.unet) {
        w(tag.unet)
    } else {
        format!("{}:{}", w(tag.text_encoder), w(tag.unet))
    };
    format!(
        "{}<{network}:{}:{weights}>{}",
        &prompt[..range.start],
        tag.name,
        &prompt[range.end..]
    )
}

/// A1111's `ExtraNetworkParams` for LoRA: positional name, te, unet; named `te=`, `unet=`.
fn parse_lora(args: &str, tag: &str) -> Result<LoraTag> {
    let number = |s: &str| {
        s.trim()
            .parse::<f32>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| {
                Error::settings(format!(
                    "{tag}: {s:?} is not a weight (write <lora:name:0.8>)"
                ))
            })
    };
    let mut positional = Vec::new();
    let (mut te, mut unet) = (None, None);
    for item in args.split(':') {
        match item.split_once('=') {
            Some(("te", v)) => te = Some(number(v)?),
            Some(("unet", v)) => unet = Some(number(v)?),
            Some(_) => {} // dyn= and others: not used by a merge
            None => positional.push(item),
        }
    }
    let name = positional
        .first()
        .map(|n| n.trim().to_string())
        .unwrap_or_default();
    if name.is_empty() {
        return Err(Error::settings(format!("{tag}: the tag names no LoRA")));
    }
    let te_positional = positional.get(1).map(|v| number(v)).transpose()?;
    let text_encoder = te.or(te_positional).unwrap_or(1.0);
    let unet_positional = positional.get(2).map(|v| number(v)).transpose()?;
    let unet = unet.or(unet_positional).unwrap_or(text_encoder);
    Ok(LoraTag {
        name,
        text_encoder,
        unet,
    })
}

/// LoRA files under `dirs` by stem (`.safetensors`, `.pt`, `.ckpt`, subfolders included).
pub fn find(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    fn walk(dir: &Path, name: &str, depth: usize) -> Option<PathBuf> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        let is_lora = |p: &Path| {
            p.extension().and_then(|e| e.to_str()).is_some_and(|e| {
                ["safetensors", "pt", "ckpt"].contains(&e.to_ascii_lowercase().as_str())
            })
        };
        let hit = entries
            .iter()
            .find(|p| p.is_file() && is_lora(p) && p.file_stem().is_some_and(|s| s == name));
        if let Some(hit) = hit {
            return Some(hit.clone());
        }
        if depth == 0 {
            return None;
        }
        entries
            .iter()
            .filter(|p| p.is_dir())
            .find_map(|p| walk(p, name, depth - 1))
    }
    dirs.iter().find_map(|d| walk(d, name, 8))
}

/// The LoRAs a request asks for: `explicit` ones first, then the prompt's tags found in
/// `dirs`; tags naming no file are returned by name (A1111 warns and goes on).
pub fn resolve(
    prompt: &str,
    explicit: &[LoraSpec],
    dirs: &[PathBuf],
) -> Result<(Vec<LoraSpec>, Vec<String>)> {
    let (_, tags) = extract(prompt)?;
    let mut specs = explicit.to_vec();
    let mut missing = Vec::new();
    for tag in tags {
        match find(&tag.name, dirs) {
            Some(path) => specs.push(LoraSpec {
                path,
                text_encoder: tag.text_encoder,
                unet: tag.unet,
            }),
            None => missing.push(tag.name),
        }
    }
    Ok((specs, missing))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(name: &str, te: f32, unet: f32) -> LoraTag {
        LoraTag {
            name: name.into(),
            text_encoder: te,
            unet,
        }
    }

    #[test]
    fn weights_are_rewritten_in_place() {
        let prompt = "a cat <lora:ink:0.8>, <lyco:pen:0.5:1.2> <lora:bad:x>";
        let spans = spans(prompt);
        assert_eq!(spans.len(), 2, "the unreadable tag is left out");
        assert_eq!(&prompt[spans[0].0.clone()], "<lora:ink:0.8>");
        let edited = set_weights(prompt, spans[0].0.clone(), &tag("ink", 0.65, 0.65));
        assert_eq!(
            edited,
            "a cat <lora:ink:0.65>, <lyco:pen:0.5:1.2> <lora:bad:x>"
        );
        let edited = set_weights(prompt, spans[1].0.clone(), &tag("pen", 0.0, 1.0));
        assert_eq!(edited, "a cat <lora:ink:0.8>, <lyco:pen:0:1> <lora:bad:x>");
    }

    #[test]
    fn tags_are_removed_and_read_as_a1111_reads_them() {
        let (text, loras) =
            extract("a cat <lora:ink:0.8>, <lora:pen:0.5:1.2> <lora:x> <lora:y:te=0.3:unet=0.6> <hypernet:h:1>").unwrap();
        assert_eq!(text, "a cat ,    ");
        assert_eq!(
            loras,
            vec![
                tag("ink", 0.8, 0.8),
                tag("pen", 0.5, 1.2),
                tag("x", 1.0, 1.0),
                tag("y", 0.3, 0.6)
            ]
        );
        let (text, loras) = extract("a <b> c < d <lora:> e <:x>").unwrap();
        assert_eq!(text, "a <b> c < d <lora:> e <:x>");
        assert!(loras.is_empty());
        assert!(
            extract("<lora:ink:strong>")
                .unwrap_err()
                .to_string()
                .contains("not a weight")
        );
    }
}
