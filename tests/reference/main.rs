//! Golden tests: every engine stage against `../shared/reference` (one test binary, one link).

mod rng;
mod tokenizer;
