//! Ember's application crate: the desktop app ([`gui`]), the `ember` command line ([`cli`]),
//! and what both use: model downloads ([`download`]) and A1111's prompt styles ([`styles`]).
//!
//! **Invariant:** this crate never names a tensor type; it talks to the engine through
//! `inference`'s plain-data API.

pub mod cli;
pub mod download;
pub mod gui;
pub mod styles;
