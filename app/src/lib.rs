//! Ember application library.
