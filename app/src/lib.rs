//! Ember's application crate: the desktop app ([`gui`]) and the `ember` command line ([`cli`]).
//!
//! **Invariant:** this crate never names a tensor type; it talks to the engine through
//! `inference`'s plain-data API.

pub mod cli;
pub mod gui;
