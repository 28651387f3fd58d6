//! CLIP BPE tokenization exactly as transformers' `CLIPTokenizer` does it for diffusers.
//!
//! The pipeline (see `../shared/reference/README.md`, tokenizer section) is built from the
//! `tokenizers` crate's parts: NFC, whitespace runs to one space, lowercase; split on the CLIP
//! regex; byte-level symbols; BPE with the `</w>` end-of-word suffix. The special tokens
//! `<|startoftext|>` / `<|endoftext|>` are matched in the raw text first. A tokenizer whose pad
//! token is `!` (SD 2.x, SDXL's second encoder) treats `!` as a special token too, so a literal
//! `!` in a prompt becomes id 0 there, as it does in transformers.

use std::path::Path;

use tokenizers::models::bpe::{BPE, Merges, Vocab};
use tokenizers::normalizers::replace::ReplacePattern;
use tokenizers::normalizers::{Lowercase, NFC, Replace, Sequence as NormalizerSequence};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence as PreTokenizerSequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

use crate::error::{Error, Result};

/// Beginning-of-text id (`<|startoftext|>`).
pub const BOS: u32 = 49406;
/// End-of-text id (`<|endoftext|>`).
pub const EOS: u32 = 49407;
/// Token positions the CLIP text encoder takes: BOS + 75 tokens + EOS.
pub const CONTEXT_LENGTH: usize = 77;
/// Prompt tokens that fit between BOS and EOS.
pub const TOKENS_PER_CHUNK: usize = CONTEXT_LENGTH - 2;

const START_OF_TEXT: &str = "<|startoftext|>";
const END_OF_TEXT: &str = "<|endoftext|>";
const SPLIT_PATTERN: &str =
    r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+";

/// The CLIP vocabulary shipped with Ember (`assets/clip`), the standard
/// `bpe_simple_vocab_16e6` in Hugging Face layout.
const BUNDLED_VOCAB: &[u8] = include_bytes!("../../../assets/clip/vocab.json");
const BUNDLED_MERGES: &str = include_str!("../../../assets/clip/merges.txt");

/// The id that pads a prompt to 77 positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadToken {
    /// `<|endoftext|>` (49407): SD 1.x and SDXL's first text encoder.
    EndOfText,
    /// `!` (0): SD 2.x and SDXL's second text encoder. `!` is then a special token.
    Exclamation,
}

impl PadToken {
    pub fn id(self) -> u32 {
        match self {
            PadToken::EndOfText => EOS,
            PadToken::Exclamation => 0,
        }
    }
}

/// Ids ready for the text encoder: BOS + up to 75 tokens + EOS, padded to 77.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptIds {
    /// Exactly [`CONTEXT_LENGTH`] ids.
    pub ids: Vec<u32>,
    /// Prompt tokens that did not fit and were dropped (diffusers truncates the same way).
    pub truncated_tokens: usize,
}

/// A CLIP BPE tokenizer.
pub struct ClipTokenizer {
    inner: Tokenizer,
    pad: PadToken,
}

impl ClipTokenizer {
    /// The vocabulary shipped with Ember.
    pub fn bundled(pad: PadToken) -> Result<Self> {
        Self::from_parts(BUNDLED_VOCAB, BUNDLED_MERGES, pad)
    }

    /// A diffusers `tokenizer/` folder: `vocab.json` and `merges.txt`, or (as transformers 5
    /// saves it) only `tokenizer.json`; the pad token from `tokenizer_config.json`.
    pub fn from_folder(dir: &Path) -> Result<Self> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|e| Error::io(&path, e))
        };
        let (vocab, merges) = if dir.join("vocab.json").is_file() {
            let merges = String::from_utf8(read("merges.txt")?)
                .map_err(|_| Error::invalid_model(dir, "tokenizer/merges.txt is not UTF-8 text"))?;
            (read("vocab.json")?, merges)
        } else {
            vocab_and_merges_of_tokenizer_json(&read("tokenizer.json")?)
                .map_err(|e| Error::invalid_model(dir, format!("tokenizer.json: {e}")))?
        };
        let pad = match std::fs::read(dir.join("tokenizer_config.json")) {
            Ok(config) => pad_token_from_config(&config).ok_or_else(|| {
                Error::invalid_model(dir, "tokenizer_config.json is not valid JSON")
            })?,
            Err(_) => PadToken::EndOfText,
        };
        Self::from_parts(&vocab, &merges, pad)
            .map_err(|e| Error::invalid_model(dir, format!("tokenizer: {e}")))
    }

    fn from_parts(vocab_json: &[u8], merges_txt: &str, pad: PadToken) -> Result<Self> {
        let vocab: std::collections::HashMap<String, u32> = serde_json::from_slice(vocab_json)
            .map_err(|e| Error::Tokenizer(format!("vocab.json: {e}")))?;
        let vocab: Vocab = vocab.into_iter().collect();
        let merges: Merges = merges_txt
            .lines()
            .filter(|line| !line.starts_with("#version") && !line.trim().is_empty())
            .map(|line| {
                let (left, right) = line
                    .split_once(' ')
                    .ok_or_else(|| Error::Tokenizer(format!("merges.txt: bad line {line:?}")))?;
                Ok((left.to_string(), right.to_string()))
            })
            .collect::<Result<_>>()?;
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .unk_token(END_OF_TEXT.to_string())
            .end_of_word_suffix("</w>".to_string())
            .build()
            .map_err(|e| Error::Tokenizer(e.to_string()))?;

        let tk_err = |e: tokenizers::Error| Error::Tokenizer(e.to_string());
        let mut inner = Tokenizer::new(bpe);
        inner.with_normalizer(Some(NormalizerSequence::new(vec![
            NFC.into(),
            Replace::new(ReplacePattern::Regex(r"\s+".into()), " ")
                .map_err(tk_err)?
                .into(),
            Lowercase.into(),
        ])));
        inner.with_pre_tokenizer(Some(PreTokenizerSequence::new(vec![
            Split::new(
                SplitPattern::Regex(SPLIT_PATTERN.into()),
                SplitDelimiterBehavior::Removed,
                true,
            )
            .map_err(tk_err)?
            .into(),
            ByteLevel::new(false, true, false).into(),
        ])));
        let mut special = vec![
            AddedToken::from(START_OF_TEXT, true),
            AddedToken::from(END_OF_TEXT, true),
        ];
        if pad == PadToken::Exclamation {
            special.push(AddedToken::from("!", true));
        }
        inner.add_special_tokens(&special);
        Ok(Self { inner, pad })
    }

    /// The pad token this tokenizer uses.
    pub fn pad_token(&self) -> PadToken {
        self.pad
    }

    /// The prompt's token ids, without BOS/EOS and untruncated.
    pub fn tokens(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self
            .inner
            .encode(text, false)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The BPE token strings (byte-level symbols, `</w>` marking word ends).
    pub fn token_strings(&self, text: &str) -> Result<Vec<String>> {
        let encoding = self
            .inner
            .encode(text, false)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(encoding.get_tokens().to_vec())
    }

    /// BOS + every token + EOS, untruncated.
    pub fn full_ids(&self, text: &str) -> Result<Vec<u32>> {
        let mut ids = vec![BOS];
        ids.extend(self.tokens(text)?);
        ids.push(EOS);
        Ok(ids)
    }

    /// What the text encoder takes: BOS + the first 75 tokens + EOS, padded to 77.
    pub fn encode(&self, text: &str) -> Result<PromptIds> {
        let tokens = self.tokens(text)?;
        let kept = tokens.len().min(TOKENS_PER_CHUNK);
        Ok(PromptIds {
            ids: self.wrap(&tokens[..kept]),
            truncated_tokens: tokens.len() - kept,
        })
    }

    /// Consecutive 75-token chunks, each wrapped in BOS/EOS and padded to 77 (at least one).
    pub fn chunks(&self, text: &str) -> Result<Vec<Vec<u32>>> {
        let tokens = self.tokens(text)?;
        if tokens.is_empty() {
            return Ok(vec![self.wrap(&[])]);
        }
        Ok(tokens
            .chunks(TOKENS_PER_CHUNK)
            .map(|chunk| self.wrap(chunk))
            .collect())
    }

    fn wrap(&self, tokens: &[u32]) -> Vec<u32> {
        let mut ids = Vec::with_capacity(CONTEXT_LENGTH);
        ids.push(BOS);
        ids.extend_from_slice(tokens);
        ids.push(EOS);
        ids.resize(CONTEXT_LENGTH, self.pad.id());
        ids
    }
}

/// The BPE vocabulary (as `vocab.json` bytes) and merges (as `merges.txt` text) inside a
/// tokenizers `tokenizer.json`, whose merges are `"a b"` strings or `["a", "b"]` pairs.
fn vocab_and_merges_of_tokenizer_json(
    bytes: &[u8],
) -> std::result::Result<(Vec<u8>, String), String> {
    let json: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let model = &json["model"];
    if model["type"] != "BPE" || !model["vocab"].is_object() {
        return Err("not a BPE tokenizer with a vocabulary".into());
    }
    let vocab = serde_json::to_vec(&model["vocab"]).map_err(|e| e.to_string())?;
    let merges = model["merges"]
        .as_array()
        .ok_or("no merges")?
        .iter()
        .map(|m| match m {
            serde_json::Value::String(s) => Ok(s.clone()),
            serde_json::Value::Array(pair) => match (pair.first(), pair.get(1)) {
                (Some(serde_json::Value::String(a)), Some(serde_json::Value::String(b))) => {
                    Ok(format!("{a} {b}"))
                }
                _ => Err(format!("bad merge {m}")),
            },
            _ => Err(format!("bad merge {m}")),
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok((vocab, merges.join("\n")))
}

/// The pad token named by a `tokenizer_config.json`; `None` if it is not JSON.
fn pad_token_from_config(config: &[u8]) -> Option<PadToken> {
    let config: serde_json::Value = serde_json::from_slice(config).ok()?;
    let pad = match &config["pad_token"] {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(o) => o
            .get("content")
            .and_then(|c| c.as_str())
            .unwrap_or("")
            .to_string(),
        _ => String::new(),
    };
    Some(if pad == "!" {
        PadToken::Exclamation
    } else {
        PadToken::EndOfText
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_with_only_tokenizer_json_tokenizes_as_vocab_and_merges_do() {
        let vocab: serde_json::Value = serde_json::from_slice(BUNDLED_VOCAB).unwrap();
        let merges: Vec<serde_json::Value> = BUNDLED_MERGES
            .lines()
            .filter(|l| !l.starts_with("#version") && !l.trim().is_empty())
            .map(|l| {
                let (a, b) = l.split_once(' ').unwrap();
                serde_json::json!([a, b])
            })
            .collect();
        let json = serde_json::json!({"model": {"type": "BPE", "vocab": vocab, "merges": merges}});
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tokenizer.json"), json.to_string()).unwrap();
        std::fs::write(
            dir.path().join("tokenizer_config.json"),
            r#"{"pad_token": "!"}"#,
        )
        .unwrap();
        let from_json = ClipTokenizer::from_folder(dir.path()).unwrap();
        let bundled = ClipTokenizer::bundled(PadToken::Exclamation).unwrap();
        assert_eq!(from_json.pad_token(), PadToken::Exclamation);
        for text in [
            "a photograph of an astronaut riding a horse!",
            "über-detailed, 8k",
        ] {
            assert_eq!(
                from_json.encode(text).unwrap(),
                bundled.encode(text).unwrap(),
                "{text}"
            );
        }
    }
}
