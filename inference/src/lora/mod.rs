//! LoRA adapters: reading the files ([`mod@file`]) and merging them into a loaded model's
//! weights, or taking them out again exactly ([`merge`]), or changing them in one pass over
//! the weights ([`refill`]).

mod adapter_config;
pub mod delta;
pub mod file;
mod matching;
pub mod merge;
mod refill;
mod shapes;
pub mod swap;
pub mod tags;
pub mod targets;
mod unmerge;

pub use file::Network;
pub use merge::{LoraSpec, LoraState, read_weight, set, set_for_request};
pub use unmerge::restore;
