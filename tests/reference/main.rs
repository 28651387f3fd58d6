//! Golden tests: every engine stage against `../shared/reference` (one test binary, one link).

mod brownian;
mod canny;
mod components;
mod config_search;
mod control_maps;
mod controlnet;
mod embeddings;
mod engine;
mod extra_runs;
mod extra_schedules;
mod failed_load;
mod families;
mod family_runs;
mod fuzz;
mod kdiffusion;
mod kill;
mod lora;
mod pipelines;
mod prompt;
mod prompt_schedules;
mod rng;
mod sampler_runs;
mod schedules;
mod tokenizer;
mod upscale;
mod worker;
