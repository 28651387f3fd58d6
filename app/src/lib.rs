//! Ember's application crate: the `ember` command line (and, later, the desktop app).
//!
//! **Invariant:** this crate never names a tensor type; it talks to the engine through
//! `inference`'s plain-data API.

pub mod cli;
