//! Text conditioning: every text encoder of the model's family on its prompt, CLIP skip,
//! SDXL's pooled embedding and time ids, laid out as the guidance batch.

use burn::tensor::{Int, Tensor, TensorData};

use crate::api::{DEFAULT_AESTHETIC_SCORE, DEFAULT_NEGATIVE_AESTHETIC_SCORE, GenerateRequest};
use crate::error::{Error, Result};
use crate::family::{EncoderOutput, PromptSlot, TimeIds};
use crate::model::{Model, TextEncoder};
use crate::models::unet::AddedConditioning;
use crate::text::chunks::{Chunk, chunk, chunk_with_embeddings, pad_after_eos};
use crate::text::embeddings::{EmbeddingSet, unknown_embedding_words};
use crate::text::emphasis::Emphasis;
use crate::text::tokenizer::{CONTEXT_LENGTH, EOS, TOKENS_PER_CHUNK};

/// Encoded prompts, laid out for the UNet: rows `[negative x batch, prompt x batch]` with
/// guidance, `[prompt x batch]` without.
pub struct Conditioning {
    /// `[rows, 77, context_dim]`: the encoders' outputs concatenated along the last axis.
    pub context: Tensor<3>,
    /// SDXL's pooled text and time ids, one row per context row.
    pub added: Option<AddedConditioning>,
    pub warnings: Vec<String>,
    /// The embeddings the prompts used: name and A1111 short hash, for `TI hashes`.
    pub embeddings: Vec<(String, String)>,
    /// The weight of each positive row group (A1111's `AND` subprompts; `[1.0]` without).
    pub weights: Vec<f32>,
    /// Whether rows of different chunk counts were padded to one length (A1111's "Pad
    /// prompt/negative prompt" option, written as `Pad conds: True`).
    pub padded: bool,
}

/// The texts of one conditioning row: what the first and the second prompt slot read
/// (SDXL's second encoder reads `second`; other models only `first`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RowTexts {
    pub first: String,
    pub second: String,
}

/// One encoder's output for all rows.
struct EncoderRun {
    /// `[rows, 77 * chunks, width]`.
    hidden: Tensor<3>,
    /// `[rows, projection]` for pooled encoders.
    pooled: Option<Tensor<2>>,
    /// The empty prompt's chunk `[1, 77, width]`, to pad to another encoder's length.
    empty: Tensor<3>,
    /// Indices (in the [`EmbeddingSet`]) of the embeddings the rows used.
    used: Vec<usize>,
    /// Whether a row had fewer chunks than another and was padded.
    padded: bool,
}

/// Largest prompt weight taken (A1111 takes any; far beyond this the image is noise).
pub const MAX_WEIGHT: f64 = 100.0;

/// Most 75-token chunks a prompt may have (1,500 tokens): beyond this it is not a prompt.
pub const MAX_CHUNKS: usize = 20;

/// One encoder's output for `rows` texts, each split into A1111's 77-token chunks and weighted
/// per `emphasis`: `[rows, 77 * chunks, width]` (rows with fewer chunks than the longest are
/// padded with the empty prompt's chunk, as A1111 pads), and for pooled encoders the pooled
/// embedding of each row's first chunk.
fn run_encoder(
    model: &Model,
    encoder: &TextEncoder,
    rows: &[&str],
    clip_skip: usize,
    emphasis: Emphasis,
    embeddings: &EmbeddingSet,
) -> Result<EncoderRun> {
    let matcher = embeddings.matcher(&encoder.tokenizer)?;
    let mut chunked = Vec::with_capacity(rows.len() + 1);
    for text in rows {
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
    // The empty prompt's chunk pads shorter rows (encoded once, last).
    let padding = chunk(&encoder.tokenizer, &[(String::new(), 1.0)])?.chunks;
    let sequences: Vec<&Chunk> = chunked.iter().flatten().chain(&padding).collect();
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
    let tokens = encoder.network.token_embeddings(tensor);
    let tokens = place_embeddings(tokens, &sequences, embeddings, encoder.spec.embedding_key)?;
    let out = encoder.network.forward_embedded(tokens);
    let n = out.hidden_states.len();
    let hidden = match encoder.spec.output {
        // A1111's CLIP skip s uses the output of layer (layers + 1 - s), then the final norm.
        EncoderOutput::FinalNormed if clip_skip <= 1 => out.last_hidden_state.clone(),
        EncoderOutput::FinalNormed => encoder
            .network
            .final_layer_norm(out.hidden_states[n - clip_skip].clone()),
        // SDXL: the penultimate layer, no final norm; CLIP skip s takes layer -max(s, 2) of
        // both encoders (Forge; ComfyUI's CLIPSetLastLayer(-s); diffusers' clip_skip s - 2).
        EncoderOutput::Penultimate => out.hidden_states[n - clip_skip.max(2)].clone(),
    };
    let weighted: Vec<Tensor<3>> = sequences
        .iter()
        .enumerate()
        .map(|(i, sequence)| {
            weigh(
                hidden.clone().narrow(0, i, 1),
                &sequence.multipliers,
                emphasis,
            )
        })
        .collect();
    let empty = weighted
        .last()
        .cloned()
        .expect("the padding chunk is encoded");
    let mut next = 0;
    let mut padded = false;
    let mut row_tensors = Vec::with_capacity(rows.len());
    let mut first_chunks = Vec::with_capacity(rows.len());
    for row in &chunked {
        first_chunks.push(next);
        let mut parts: Vec<Tensor<3>> = weighted[next..next + row.len()].to_vec();
        padded |= parts.len() < most;
        parts.resize(most, empty.clone());
        row_tensors.push(Tensor::cat(parts, 1));
        next += row.len();
    }
    let pooled = if encoder.spec.pooled {
        // A1111 (and diffusers, which has one chunk) pool the first chunk.
        let last = Tensor::cat(
            first_chunks
                .iter()
                .map(|&i| out.last_hidden_state.clone().narrow(0, i, 1))
                .collect(),
            0,
        );
        let first_ids: Vec<u32> = first_chunks
            .iter()
            .flat_map(|&i| ids[i * CONTEXT_LENGTH..(i + 1) * CONTEXT_LENGTH].to_vec())
            .collect();
        let pooled = encoder.network.pooled(&last, &first_ids);
        Some(
            pooled
                .ok_or_else(|| Error::settings("the pooled text encoder has no text_projection"))?,
        )
    } else {
        None
    };
    let mut used: Vec<usize> = Vec::new();
    for fix in sequences.iter().flat_map(|s| &s.fixes) {
        if !used.contains(&fix.embedding) {
            used.push(fix.embedding);
        }
    }
    Ok(EncoderRun {
        hidden: Tensor::cat(row_tensors, 0),
        pooled,
        empty,
        used,
        padded,
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

/// A1111's emphasis on one chunk's output `z` `[1, 77, width]`: "Original" scales each token
/// by its weight and restores the chunk's mean; "No norm" only scales. A chunk of weight 1
/// throughout is left exactly as it is.
pub fn weigh(z: Tensor<3>, multipliers: &[f64], emphasis: Emphasis) -> Tensor<3> {
    let plain = multipliers.iter().all(|&m| m == 1.0);
    if plain || matches!(emphasis, Emphasis::Ignore | Emphasis::Off) {
        return z;
    }
    // A1111 builds the multipliers as a float32 tensor from the float64 weights.
    let m: Vec<f32> = multipliers.iter().map(|&m| m as f32).collect();
    let tokens = m.len();
    let m = Tensor::<3>::from_data(TensorData::new(m, [1, tokens, 1]), &z.device());
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

/// `[neg, pos]` rows with the negative row replaced by zeros.
fn zero_first_row<const D: usize>(t: Tensor<D>) -> Tensor<D> {
    let zeros = t.clone().narrow(0, 0, 1).zeros_like();
    let rest = t.clone().narrow(0, 1, t.dims()[0] - 1);
    Tensor::cat(vec![zeros, rest], 0)
}

/// Encodes the prompts (and with guidance the negative prompts) with every encoder of the
/// model, in one call per encoder.
pub fn encode(model: &Model, request: &GenerateRequest, guided: bool) -> Result<Conditioning> {
    let negative = RowTexts {
        first: request.negative_prompt.clone(),
        second: request
            .negative_prompt_2
            .clone()
            .unwrap_or_else(|| request.negative_prompt.clone()),
    };
    let positive = RowTexts {
        first: request.prompt.clone(),
        second: request
            .prompt_2
            .clone()
            .unwrap_or_else(|| request.prompt.clone()),
    };
    let negative = guided.then_some(negative);
    encode_rows(model, request, negative.as_ref(), &[(positive, 1.0)])
}

/// Encodes one conditioning: the `negative` row (with guidance) and each weighted positive
/// row, every row `request.batch` times, in one call per encoder.
pub fn encode_rows(
    model: &Model,
    request: &GenerateRequest,
    negative: Option<&RowTexts>,
    positives: &[(RowTexts, f32)],
) -> Result<Conditioning> {
    let guided = negative.is_some();
    let all_rows: Vec<&RowTexts> = negative
        .into_iter()
        .chain(positives.iter().map(|(r, _)| r))
        .collect();
    let spec = model.spec();
    let embeddings = EmbeddingSet::new(&request.embedding_dirs);
    let mut warnings = Vec::new();
    let mut contexts = Vec::with_capacity(model.encoders.len());
    let mut empties = Vec::with_capacity(model.encoders.len());
    let mut pooled = None;
    let mut used: Vec<usize> = Vec::new();
    let mut padded = false;
    for encoder in &model.encoders {
        let rows: Vec<&str> = all_rows
            .iter()
            .map(|r| match encoder.spec.prompt {
                PromptSlot::First => r.first.as_str(),
                PromptSlot::Second => r.second.as_str(),
            })
            .collect();
        let run = run_encoder(
            model,
            encoder,
            &rows,
            request.clip_skip as usize,
            request.emphasis,
            &embeddings,
        )?;
        check_finite(&run.hidden, "text encoder")?;
        contexts.push(run.hidden);
        empties.push(run.empty);
        padded |= run.padded;
        pooled = run.pooled.or(pooled);
        for index in run.used {
            if !used.contains(&index) {
                used.push(index);
            }
        }
        for text in rows {
            for word in unknown_embedding_words(text, &embeddings) {
                let warning = format!(
                    "{word:?} looks like an embedding, but no embedding file has that name: it \
                     was read as plain text"
                );
                if !warnings.contains(&warning) {
                    warnings.push(warning);
                }
            }
        }
    }
    // Encoders whose prompts gave fewer chunks (SDXL's second prompt) are padded with their
    // empty prompt's chunk, so all contexts have the same length.
    let longest = contexts.iter().map(|c| c.dims()[1]).max().unwrap_or(0);
    for (context, empty) in contexts.iter_mut().zip(empties) {
        let rows = context.dims()[0];
        let missing = (longest - context.dims()[1]) / CONTEXT_LENGTH;
        if missing > 0 {
            let pad = empty.repeat_dim(0, rows).repeat_dim(1, missing);
            *context = Tensor::cat(vec![context.clone(), pad], 1);
        }
    }
    let mut context = Tensor::cat(contexts, 2);
    // diffusers' force_zeros_for_empty_prompt: no negative prompt is zero conditioning.
    let zero_negative = model.zero_empty_negative
        && negative.is_some_and(|n| n.first.is_empty() && n.second.is_empty());
    if zero_negative {
        context = zero_first_row(context);
        pooled = pooled.map(zero_first_row);
    }
    let rows = all_rows.len();
    let batch = request.batch as usize;
    let [_, tokens, dim] = context.dims();
    let context =
        context
            .unsqueeze_dim::<4>(1)
            .repeat_dim(1, batch)
            .reshape([rows * batch, tokens, dim]);
    let added = match (spec.time_ids, pooled) {
        (Some(kind), Some(pooled)) => {
            let width = pooled.dims()[1];
            let text_embeds = pooled
                .unsqueeze_dim::<3>(1)
                .repeat_dim(1, batch)
                .reshape([rows * batch, width]);
            let mut ids = Vec::with_capacity(rows * batch * kind.count());
            for row in 0..rows {
                let negative = guided && row == 0;
                let one = time_ids(kind, request, negative);
                for _ in 0..batch {
                    ids.extend_from_slice(&one);
                }
            }
            Some(AddedConditioning {
                text_embeds,
                time_ids: ids,
            })
        }
        (None, _) => None,
        (Some(_), None) => {
            return Err(Error::settings(
                "this model needs a pooled text embedding, and none of its encoders gives one",
            ));
        }
    };
    let mut names = Vec::with_capacity(used.len());
    for index in used {
        let e = embeddings.get(index)?;
        names.push((e.name.clone(), e.short_hash.clone()));
    }
    Ok(Conditioning {
        context,
        added,
        warnings,
        embeddings: names,
        weights: positives.iter().map(|(_, w)| *w).collect(),
        padded,
    })
}

/// One row of SDXL time ids (diffusers' `_get_add_time_ids`; sizes as height, width).
pub fn time_ids(kind: TimeIds, request: &GenerateRequest, negative: bool) -> Vec<f32> {
    let size = (request.width, request.height);
    let sc = &request.size_conditioning;
    let (ow, oh) = sc.original.unwrap_or(size);
    let (crop_left, crop_top) = sc.crop;
    let mut ids = vec![oh as f32, ow as f32, crop_top as f32, crop_left as f32];
    match kind {
        TimeIds::SizeCropTarget => {
            let (tw, th) = sc.target.unwrap_or(size);
            ids.extend([th as f32, tw as f32]);
        }
        TimeIds::SizeCropAesthetic => ids.push(if negative {
            request
                .negative_aesthetic_score
                .unwrap_or(DEFAULT_NEGATIVE_AESTHETIC_SCORE)
        } else {
            request.aesthetic_score.unwrap_or(DEFAULT_AESTHETIC_SCORE)
        }),
    }
    ids
}

/// An error naming `stage` when `t` holds NaN or infinity.
pub fn check_finite<const D: usize>(t: &Tensor<D>, stage: &str) -> Result<()> {
    if t.clone().is_finite().all().into_scalar::<bool>() {
        Ok(())
    } else {
        Err(Error::NonFinite {
            stage: stage.to_string(),
        })
    }
}
