//! One text encoder over one prompt's texts, as A1111 encodes them together
//! (`FrozenCLIPEmbedderWithCustomWords.forward`): each text in 77-token chunks with its
//! embeddings placed, every text padded to the group's chunk count with the empty chunk, and
//! the emphasis applied per chunk index over the whole group.

use burn::tensor::{Int, Tensor, TensorData};

use crate::error::{Error, Result};
use crate::family::EncoderOutput;
use crate::model::{Model, TextEncoder};
use crate::text::chunks::{Chunk, chunk, chunk_with_embeddings, pad_after_eos};
use crate::text::embeddings::EmbeddingSet;
use crate::text::emphasis::Emphasis;
use crate::text::tokenizer::{CONTEXT_LENGTH, EOS, TOKENS_PER_CHUNK};

/// Largest prompt weight taken (A1111 takes any; far beyond this the image is noise).
pub const MAX_WEIGHT: f64 = 100.0;

/// Most 75-token chunks a prompt may have (1,500 tokens): beyond this it is not a prompt.
pub const MAX_CHUNKS: usize = 20;

/// One encoder's output for a group of texts.
pub struct EncoderRun {
    /// Each text's output `[1, 77 * chunks, width]`, all with the group's chunk count.
    pub rows: Vec<Tensor<3>>,
    /// Each text's pooled embedding `[1, projection]` (from its first chunk), for pooled
    /// encoders.
    pub pooled: Vec<Option<Tensor<2>>>,
    /// The empty prompt's chunk `[1, 77, width]`.
    pub empty: Tensor<3>,
    /// Indices (in the [`EmbeddingSet`]) of the embeddings the texts used.
    pub used: Vec<usize>,
}

/// Encodes `texts` (one prompt's texts, e.g. the stretches of its schedule) together.
pub fn run_encoder(
    model: &Model,
    encoder: &TextEncoder,
    texts: &[&str],
    (clip_skip, emphasis): (usize, Emphasis),
    embeddings: &EmbeddingSet,
) -> Result<EncoderRun> {
    let matcher = embeddings.matcher(&encoder.tokenizer)?;
    let mut chunked = Vec::with_capacity(texts.len());
    for text in texts {
        let segments = emphasis.segments(text)?;
        if let Some((word, weight)) = segments
            .iter()
            .find(|(_, w)| !w.is_finite() || w.abs() > MAX_WEIGHT)
        {
            return Err(Error::settings(format!(
                "the weight {weight} on {:?} is out of range: weights go from -{MAX_WEIGHT} to \
                 {MAX_WEIGHT} (1 = unweighted)",
                abbreviate(word)
            )));
        }
        chunked.push(
            chunk_with_embeddings(&encoder.tokenizer, &segments, &matcher, embeddings)?.chunks,
        );
    }
    let most = chunked.iter().map(Vec::len).max().unwrap_or(1);
    if most > MAX_CHUNKS {
        return Err(Error::settings(format!(
            "the prompt is {most} chunks of 75 tokens long; Ember takes at most {MAX_CHUNKS} \
             ({} tokens)",
            MAX_CHUNKS * TOKENS_PER_CHUNK
        )));
    }
    // Chunk index by chunk index, every text (the empty chunk where a text has no more),
    // then the empty chunk once more on its own.
    let empty_chunk = chunk(&encoder.tokenizer, &[(String::new(), 1.0)])?
        .chunks
        .remove(0);
    let mut sequences: Vec<&Chunk> = Vec::with_capacity(most * texts.len() + 1);
    for c in 0..most {
        sequences.extend(chunked.iter().map(|row| row.get(c).unwrap_or(&empty_chunk)));
    }
    sequences.push(&empty_chunk);
    let pad = encoder.tokenizer.pad_token().id();
    let mut ids: Vec<u32> = Vec::with_capacity(sequences.len() * CONTEXT_LENGTH);
    for sequence in &sequences {
        let start = ids.len();
        ids.extend(&sequence.ids);
        if pad != EOS {
            pad_after_eos(&mut ids[start..], pad);
        }
    }
    let ids_i64: Vec<i64> = ids.iter().map(|&i| i64::from(i)).collect();
    let tensor = Tensor::<2, Int>::from_data(
        TensorData::new(ids_i64, [sequences.len(), CONTEXT_LENGTH]),
        &model.device,
    );
    let network = encoder.network_on(&model.device);
    let tokens = network.token_embeddings(tensor);
    let tokens = place_embeddings(tokens, &sequences, embeddings, encoder.spec.embedding_key)?;
    let out = network.forward_embedded(tokens);
    let n = out.hidden_states.len();
    let hidden = match encoder.spec.output {
        // A1111's CLIP skip s uses the output of layer (layers + 1 - s), then the final norm.
        EncoderOutput::FinalNormed if clip_skip <= 1 => out.last_hidden_state.clone(),
        EncoderOutput::FinalNormed => {
            network.final_layer_norm(out.hidden_states[n - clip_skip].clone())
        }
        // SDXL: the penultimate layer, no final norm; CLIP skip s takes layer -max(s, 2) of
        // both encoders (Forge; ComfyUI's CLIPSetLastLayer(-s); diffusers' clip_skip s - 2).
        EncoderOutput::Penultimate => out.hidden_states[n - clip_skip.max(2)].clone(),
    };
    let count = texts.len();
    let weighted: Vec<Tensor<3>> = (0..most)
        .map(|c| {
            let multipliers: Vec<f64> = sequences[c * count..(c + 1) * count]
                .iter()
                .flat_map(|s| s.multipliers.iter().copied())
                .collect();
            weigh(
                hidden.clone().narrow(0, c * count, count),
                &multipliers,
                emphasis,
            )
        })
        .collect();
    let rows = (0..count)
        .map(|r| {
            let parts = weighted.iter().map(|z| z.clone().narrow(0, r, 1)).collect();
            Tensor::cat(parts, 1)
        })
        .collect();
    let pooled = (0..count)
        .map(|r| {
            if !encoder.spec.pooled {
                return Ok(None);
            }
            // A1111 (and diffusers, which has one chunk) pool the first chunk.
            let last = out.last_hidden_state.clone().narrow(0, r, 1);
            let first_ids = &ids[r * CONTEXT_LENGTH..(r + 1) * CONTEXT_LENGTH];
            network
                .pooled(&last, first_ids)
                .map(Some)
                .ok_or_else(|| Error::settings("the pooled text encoder has no text_projection"))
        })
        .collect::<Result<_>>()?;
    let mut used: Vec<usize> = Vec::new();
    for fix in sequences.iter().flat_map(|s| &s.fixes) {
        if !used.contains(&fix.embedding) {
            used.push(fix.embedding);
        }
    }
    Ok(EncoderRun {
        rows,
        pooled,
        empty: hidden.narrow(0, sequences.len() - 1, 1),
        used,
    })
}

/// Writes each chunk's embedding vectors over its placeholder token embeddings.
///
/// # Shapes
/// - `x`: `[sequences, 77, width]`, one row per entry of `sequences`
fn place_embeddings(
    mut x: Tensor<3>,
    sequences: &[&Chunk],
    set: &EmbeddingSet,
    key: &str,
) -> Result<Tensor<3>> {
    let width = x.dims()[2];
    for (s, sequence) in sequences.iter().enumerate() {
        for fix in &sequence.fixes {
            let rows = set.get(fix.embedding)?.rows_for(key, width)?.to_vec();
            let end = fix.position + fix.vectors;
            let values =
                Tensor::<3>::from_data(TensorData::new(rows, [1, fix.vectors, width]), &x.device())
                    .cast(x.dtype());
            x = x.slice_assign([s..s + 1, fix.position..end, 0..width], values);
        }
    }
    Ok(x)
}

/// A1111's emphasis on one chunk index's output `z` `[texts, 77, width]` (every text of a
/// group at that chunk): "Original" scales each token by its weight and restores the mean of
/// the whole batch, as A1111's `z.mean()` does; "No norm" only scales. Weights of 1 throughout
/// leave `z` exactly as it is.
pub fn weigh(z: Tensor<3>, multipliers: &[f64], emphasis: Emphasis) -> Tensor<3> {
    let plain = multipliers.iter().all(|&m| m == 1.0);
    if plain || matches!(emphasis, Emphasis::Ignore | Emphasis::Off) {
        return z;
    }
    // A1111 builds the multipliers as a float32 tensor from the float64 weights.
    let m: Vec<f32> = multipliers.iter().map(|&m| m as f32).collect();
    let [texts, tokens, _] = z.dims();
    let m = Tensor::<3>::from_data(TensorData::new(m, [texts, tokens, 1]), &z.device());
    match emphasis {
        Emphasis::Original => {
            // A1111's `z * (mean0 / z.mean())` with torch's own float32 means (see
            // `torch_mean`): a chunk's mean can be tiny beside its values, so its rounding
            // shows in the result.
            let before = host_mean(&z);
            let scaled = z * m;
            let after = host_mean(&scaled);
            scaled.mul_scalar(before / after)
        }
        _ => z * m,
    }
}

/// The mean of every value of `t`, as PyTorch computes it.
fn host_mean(t: &Tensor<3>) -> f32 {
    let values = crate::device::tensor_to_vec(t.clone());
    super::torch_mean::torch_mean(&values)
}

/// A prompt shortened for a message.
fn abbreviate(text: &str) -> String {
    let mut short: String = text.chars().take(40).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}
