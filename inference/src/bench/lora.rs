//! `ember bench lora`: how long merging a kohya LoRA takes on a family's released
//! architecture with random weights loaded from a checkpoint file: the first merge
//! (reading the LoRA, merging into the loaded weights), a change of strength (the changed
//! weights read from the checkpoint again with the new merge added as they are read),
//! taking it out (read again) and merging it again. All but the first are repeated and
//! their medians reported: one merge moves over a gigabyte, and a busy machine's memory
//! bandwidth varies from one to the next.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::family::Family;
use crate::lora::merge::{LoraSpec, set};
use crate::lora::targets::kohya_linear_targets;
use crate::weights::LoadOptions;

/// What `ember bench lora` measured.
#[derive(Clone, Debug)]
pub struct LoraTimes {
    /// Modules the LoRA changes, and the file's size in bytes.
    pub modules: usize,
    pub file_bytes: u64,
    /// The size of the weights the LoRA changes (merged in place: no new memory for a
    /// model loaded from a `.safetensors` file; a copy of them for any other).
    pub merged_bytes: u64,
    pub first_merge: Duration,
    /// Medians of `runs` each.
    pub change_strength: Duration,
    pub remove: Duration,
    /// Merging it again after the removal.
    pub merge_again: Duration,
    pub runs: usize,
}

/// Builds the family's model with random weights (saved to a temporary `.safetensors` file
/// and loaded from it, as a user's checkpoint is) and times [`run_on`] it.
pub fn run(family: Family, rank: usize, runs: usize, options: &LoadOptions) -> Result<LoraTimes> {
    check_rank(rank)?;
    let temp = std::env::temp_dir();
    let mut model = crate::weights::random::random_model(family, options, &temp)?;
    run_on(&mut model, rank, runs)
}

/// Loads the checkpoint at `path` as generation would and times [`run_on`] it: the
/// memory around a real load (freed while reading and converting) is what a merge gets.
pub fn run_on_file(
    path: &std::path::Path,
    rank: usize,
    runs: usize,
    options: &LoadOptions,
) -> Result<LoraTimes> {
    check_rank(rank)?;
    let mut model = crate::weights::load(path, options)?;
    run_on(&mut model, rank, runs)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn check_rank(rank: usize) -> Result<()> {
    if !(1..=256).contains(&rank) {
        return Err(Error::settings(format!(
            "rank {rank} is out of range (1–256; kohya's usual ranks are 8–128)"
        )));
    }
    Ok(())
}

/// Writes a rank-`rank` kohya LoRA for every linear layer of `model`'s transformer blocks
/// and text encoders (f16 factors, as kohya saves them) and times merging it, changing its
/// strength, removing it and merging it again (each of the last three `runs` times, at
/// least once); the model is left without it. Every module must match.
pub fn run_on(model: &mut crate::model::Model, rank: usize, runs: usize) -> Result<LoraTimes> {
    let runs = runs.max(1);
    let model = &mut *model;
    let targets = kohya_linear_targets(model);
    let path = std::env::temp_dir().join(format!(
        "ember-bench-lora-{}.safetensors",
        std::process::id()
    ));
    write_lora(&path, &targets, rank)?;
    let element_bytes = model.precision.dtype().size() as u64;
    let merged_bytes = targets
        .iter()
        .map(|(_, [out, inp])| (out * inp) as u64 * element_bytes)
        .sum();
    let file_bytes = std::fs::metadata(&path)
        .map_err(|e| Error::io(&path, e))?
        .len();
    let spec = |strength: f32| LoraSpec {
        path: path.clone(),
        text_encoder: strength,
        unet: strength,
    };
    let timed = |model: &mut crate::model::Model, specs: &[LoraSpec]| -> Result<Duration> {
        let start = Instant::now();
        let report = set(model, specs)?;
        if !report.is_empty() {
            return Err(Error::settings(format!(
                "the benchmark LoRA did not match: {report:?}"
            )));
        }
        Ok(start.elapsed())
    };
    let result = (|| {
        let first_merge = timed(model, &[spec(1.0)])?;
        let mut changes = Vec::with_capacity(runs);
        for i in 0..runs {
            changes.push(timed(model, &[spec(if i % 2 == 0 { 0.5 } else { 1.0 })])?);
        }
        let (mut removals, mut merges) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            removals.push(timed(model, &[])?);
            merges.push(timed(model, &[spec(1.0)])?);
        }
        Ok(LoraTimes {
            modules: targets.len(),
            file_bytes,
            merged_bytes,
            first_merge,
            change_strength: median(changes),
            remove: median(removals),
            merge_again: median(merges),
            runs,
        })
    })();
    // The model is left as it came: a failed benchmark too.
    let restored = set(model, &[]);
    let _ = std::fs::remove_file(&path);
    restored?;
    result
}

/// A kohya file: `<key>.lora_down.weight` `[rank, in]`, `.lora_up.weight` `[out, rank]`
/// and `.alpha` (rank / 2), small pseudo-random f16 values.
fn write_lora(path: &std::path::Path, targets: &[(String, [usize; 2])], rank: usize) -> Result<()> {
    use safetensors::{Dtype, tensor::TensorView};
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut values = |n: usize| -> Vec<u8> {
        (0..n)
            .flat_map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let v = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                half::f16::from_f32(v * 0.02).to_le_bytes()
            })
            .collect()
    };
    let mut buffers = Vec::new();
    for (key, [out, inp]) in targets {
        buffers.push((
            format!("{key}.lora_down.weight"),
            vec![rank, *inp],
            values(rank * inp),
            Dtype::F16,
        ));
        buffers.push((
            format!("{key}.lora_up.weight"),
            vec![*out, rank],
            values(out * rank),
            Dtype::F16,
        ));
        let alpha = half::f16::from_f32(rank as f32 / 2.0)
            .to_le_bytes()
            .to_vec();
        buffers.push((format!("{key}.alpha"), vec![], alpha, Dtype::F16));
    }
    let views = buffers
        .iter()
        .map(|(name, shape, bytes, dtype)| {
            TensorView::new(*dtype, shape.clone(), bytes)
                .map(|v| (name.clone(), v))
                .map_err(|e| Error::settings(format!("benchmark LoRA: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    safetensors::serialize_to_file(views, None, path)
        .map_err(|e| Error::settings(format!("benchmark LoRA {}: {e}", path.display())))
}
