//! LoRA adapters: reading the files ([`file`]) and merging them into a loaded model's
//! weights, or taking them out again exactly ([`merge`]).

pub mod delta;
pub mod file;
pub mod merge;
mod swap;
pub mod tags;

pub use file::Network;
pub use merge::{LoraSpec, LoraState, read_weight, restore, set, set_for_request};
