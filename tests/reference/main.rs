//! Golden tests: every engine stage against `../shared/reference` (one test binary, one link).

mod rng;
mod sampler_runs;
mod schedules;
mod tokenizer;
