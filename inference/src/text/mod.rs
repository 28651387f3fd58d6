//! Prompt text: the CLIP tokenizer and the CLIP text encoder.

pub mod and;
pub mod chunks;
pub mod embeddings;
pub mod emphasis;
pub mod schedule;
pub mod tokenizer;

pub use tokenizer::{ClipTokenizer, PadToken, PromptIds};
