//! Custom compute kernels for Ember (none yet; see ARCHITECTURE.md).
