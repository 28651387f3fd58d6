//! Long prompts as A1111 splits them (`modules/sd_hijack_clip.py` `tokenize_line`): parsed
//! segments tokenized one by one, 75 tokens a chunk, `BREAK` ending a chunk, a chunk that
//! fills up ending after its last comma when that comma is within 20 tokens of the end,
//! each chunk wrapped as BOS + 75 + EOS with a weight per token, textual-inversion
//! embeddings placed whole in one chunk.

use super::embeddings::{EmbeddingSet, NameMatcher};
use super::emphasis::Segment;
use super::tokenizer::{BOS, ClipTokenizer, EOS, TOKENS_PER_CHUNK};
use crate::error::Result;

/// The id A1111 writes where an embedding's vectors go (they replace its token embeddings).
pub const EMBEDDING_PLACEHOLDER: u32 = 0;

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
    /// Embeddings in this chunk: their vectors replace the token embeddings from `position`
    /// (counted in the 77, so after BOS) on.
    pub fixes: Vec<EmbeddingFix>,
}

/// Where one embedding's vectors go (A1111's `PromptChunkFix`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbeddingFix {
    pub position: usize,
    /// Index of the embedding in its [`EmbeddingSet`].
    pub embedding: usize,
    pub vectors: usize,
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
    /// Embeddings of the current chunk: (token offset, embedding, vectors).
    fixes: Vec<(usize, usize, usize)>,
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
        let fixes = self
            .fixes
            .drain(..)
            .map(|(offset, embedding, vectors)| EmbeddingFix {
                position: offset + 1,
                embedding,
                vectors,
            })
            .collect();
        self.done.push(Chunk {
            ids,
            multipliers,
            fixes,
        });
        self.last_comma = None;
    }

    /// A1111's per-token step before a token (or an embedding) is added: a comma is noted;
    /// a full chunk is closed, after its last comma when that is near the end.
    fn make_room(&mut self, token: u32) {
        if token == COMMA {
            self.last_comma = Some(self.tokens.len());
        } else if self.tokens.len() == TOKENS_PER_CHUNK
            && let Some(comma) = self.last_comma
            && TOKENS_PER_CHUNK - comma <= COMMA_BACKTRACK
        {
            // Move what follows the comma into the next chunk.
            let moved_tokens = self.tokens.split_off(comma + 1);
            let moved_weights = self.weights.split_off(comma + 1);
            // Embeddings after the comma move too (A1111 leaves them behind, which turns
            // them into `!` tokens: a bug not worth copying).
            let (moved_fixes, kept) = self.fixes.drain(..).partition(|f| f.0 > comma);
            self.fixes = kept;
            self.close(false);
            self.tokens = moved_tokens;
            self.weights = moved_weights;
            self.fixes = moved_fixes
                .into_iter()
                .map(|(offset, e, v): (usize, usize, usize)| (offset - (comma + 1), e, v))
                .collect();
        }
        if self.tokens.len() == TOKENS_PER_CHUNK {
            self.close(false);
        }
    }

    fn push(&mut self, token: u32, weight: f64) {
        self.tokens.push(token);
        self.weights.push(weight);
    }

    /// An embedding's placeholders, all in one chunk (a new one when they do not fit).
    fn push_embedding(&mut self, embedding: usize, vectors: usize, weight: f64) {
        if self.tokens.len() + vectors > TOKENS_PER_CHUNK {
            self.close(false);
        }
        self.fixes.push((self.tokens.len(), embedding, vectors));
        for _ in 0..vectors {
            self.push(EMBEDDING_PLACEHOLDER, weight);
        }
    }
}

/// Splits parsed `segments` into chunks with `tokenizer`. Padding is EOS as A1111 builds it;
/// encoders whose tokenizer pads with another id replace what follows the first EOS (see
/// [`pad_after_eos`]).
pub fn chunk(tokenizer: &ClipTokenizer, segments: &[Segment]) -> Result<Chunked> {
    chunk_with_embeddings(
        tokenizer,
        segments,
        &NameMatcher::default(),
        &EmbeddingSet::from_files(Vec::new()),
    )
}

/// [`chunk`], with every name `matcher` finds replaced by the vectors of that embedding of
/// `set` (read on first use: a broken file is an error naming it).
pub fn chunk_with_embeddings(
    tokenizer: &ClipTokenizer,
    segments: &[Segment],
    matcher: &NameMatcher,
    set: &EmbeddingSet,
) -> Result<Chunked> {
    let mut b = Builder::default();
    for (text, weight) in segments {
        if text == "BREAK" && *weight == -1.0 {
            b.close(false);
            continue;
        }
        let tokens = tokenizer.tokens(text)?;
        let mut position = 0;
        while position < tokens.len() {
            b.make_room(tokens[position]);
            match matcher.at(&tokens, position) {
                Some((embedding, name_tokens)) => {
                    let vectors = set.get(embedding)?.vectors;
                    b.push_embedding(embedding, vectors, *weight);
                    position += name_tokens;
                }
                None => {
                    b.push(tokens[position], *weight);
                    position += 1;
                }
            }
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
