//! Golden tests: every engine stage against `../shared/reference` (one test binary, one link).

mod brownian;
mod canny;
mod components;
mod config_search;
mod control_maps;
mod controlnet;
#[cfg(target_os = "linux")]
mod cuda_layout;
mod embeddings;
mod engine;
mod extra_runs;
mod extra_schedules;
mod failed_load;
mod families;
mod family_runs;
mod fuzz;
mod gpu;
mod gpu_choice;
mod gpu_lost;
mod half_precision;
mod kdiffusion;
mod kill;
mod lora;
mod lora_misshaped;
mod lora_restore;
mod pipelines;
mod prompt;
mod prompt_schedules;
mod rng;
mod sampler_runs;
mod schedules;
mod tokenizer;
mod upscale;
mod vae_tiles;
mod wgpu_lost;
mod worker;
