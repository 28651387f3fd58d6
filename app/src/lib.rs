//! Ember's application crate: the desktop app ([`gui`]), the `ember` command line ([`cli`]),
//! and what both use: model downloads ([`download`]), A1111's prompt styles ([`styles`]),
//! its X/Y/Z plot ([`plot`]) and dynamic prompts ([`dynamic_prompts`]).
//!
//! **Invariant:** this crate never names a tensor type; it talks to the engine through
//! `inference`'s plain-data API.

pub mod cli;
pub mod download;
pub mod dynamic_prompts;
pub mod gui;
pub mod plot;
pub mod styles;
