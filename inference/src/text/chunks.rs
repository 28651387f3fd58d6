//! Long prompts as A1111 splits them (`modules/sd_hijack_clip.py` `tokenize_line`): parsed
//! segments tokenized one by one, 75 tokens a chunk, `BREAK` ending a chunk, a chunk that
//! fills up ending after its last comma when that comma is within 20 tokens of the end,
//! each chunk wrapped as BOS + 75 + EOS with a weight per token.

use super::emphasis::Segment;
use super::tokenizer::{BOS, ClipTokenizer, EOS, TOKENS_PER_CHUNK};
use crate::error::Result;

/// `,</w>` in the CLIP vocabulary.
pub const COMMA: u32 = 267;

/// A1111's `comma_padding_backtrack` default: how far back a full chunk looks for a comma.
pub const COMMA_BACKTRACK: usize = 20;

/// One 77-token chunk: BOS, 75 tokens or padding, EOS, and a weight per position (1.0 for
/// BOS, EOS and padding).
#[derive(Clone, Debug, PartialEq)]
pub struct Chunk {
    pub ids: Vec<u32>,
    pub multipliers: Vec<f64>,
}

/// A prompt's chunks and its token count as A1111 shows it (75 for every chunk but the last,
/// whose real length counts).
#[derive(Clone, Debug, PartialEq)]
pub struct Chunked {
    pub chunks: Vec<Chunk>,
    pub token_count: usize,
}

/// The chunk being filled.
#[derive(Default)]
struct Builder {
    tokens: Vec<u32>,
    weights: Vec<f64>,
    last_comma: Option<usize>,
    done: Vec<Chunk>,
    token_count: usize,
}

impl Builder {
    /// Pads the current chunk with EOS to 75, wraps it, starts the next one.
    fn close(&mut self, last: bool) {
        self.token_count += if last {
            self.tokens.len()
        } else {
            TOKENS_PER_CHUNK
        };
        let mut ids = Vec::with_capacity(TOKENS_PER_CHUNK + 2);
        ids.push(BOS);
        ids.append(&mut self.tokens);
        ids.resize(TOKENS_PER_CHUNK + 1, EOS);
        ids.push(EOS);
        let mut multipliers = vec![1.0];
        multipliers.append(&mut self.weights);
        multipliers.resize(TOKENS_PER_CHUNK + 2, 1.0);
        self.done.push(Chunk { ids, multipliers });
        self.last_comma = None;
    }

    fn push(&mut self, token: u32, weight: f64) {
        if token == COMMA {
            self.last_comma = Some(self.tokens.len());
        } else if self.tokens.len() == TOKENS_PER_CHUNK
            && let Some(comma) = self.last_comma
            && TOKENS_PER_CHUNK - comma <= COMMA_BACKTRACK
        {
            // Move what follows the comma into the next chunk.
            let moved_tokens = self.tokens.split_off(comma + 1);
            let moved_weights = self.weights.split_off(comma + 1);
            self.close(false);
            self.tokens = moved_tokens;
            self.weights = moved_weights;
        }
        if self.tokens.len() == TOKENS_PER_CHUNK {
            self.close(false);
        }
        self.tokens.push(token);
        self.weights.push(weight);
    }
}

/// Splits parsed `segments` into chunks with `tokenizer`. Padding is EOS as A1111 builds it;
/// encoders whose tokenizer pads with another id replace what follows the first EOS (see
/// [`pad_after_eos`]).
pub fn chunk(tokenizer: &ClipTokenizer, segments: &[Segment]) -> Result<Chunked> {
    let mut b = Builder::default();
    for (text, weight) in segments {
        if text == "BREAK" && *weight == -1.0 {
            b.close(false);
            continue;
        }
        for token in tokenizer.tokens(text)? {
            b.push(token, *weight);
        }
    }
    if !b.tokens.is_empty() || b.done.is_empty() {
        b.close(true);
    }
    Ok(Chunked {
        chunks: b.done,
        token_count: b.token_count,
    })
}

/// Replaces every id after the first EOS with `pad` (OpenCLIP encoders, which pad with `!`).
pub fn pad_after_eos(ids: &mut [u32], pad: u32) {
    if let Some(eos) = ids.iter().position(|&t| t == EOS) {
        for id in &mut ids[eos + 1..] {
            *id = pad;
        }
    }
}
