//! The `ember` binary.
fn main() {}
