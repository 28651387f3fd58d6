//! Text conditioning: every text encoder of the model's family on its prompts (A1111's
//! chunks, emphasis and embeddings: [`super::encode`]), CLIP skip, SDXL's pooled embedding
//! and time ids, laid out as the guidance batch.

use burn::tensor::Tensor;

use super::encode::{EncoderRun, run_encoder};
use crate::api::{DEFAULT_AESTHETIC_SCORE, DEFAULT_NEGATIVE_AESTHETIC_SCORE, GenerateRequest};
use crate::error::{Error, Result};
use crate::family::{PromptSlot, TimeIds};
use crate::model::Model;
use crate::models::unet::AddedConditioning;
use crate::text::embeddings::{EmbeddingSet, unknown_embedding_words};
use crate::text::tokenizer::CONTEXT_LENGTH;

pub use super::encode::{MAX_CHUNKS, MAX_WEIGHT, weigh};

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

/// One prompt's texts encoded together (A1111's `get_learned_conditioning` for one prompt:
/// the texts of its schedule share the chunk count and the emphasis mean).
pub struct Encoded {
    /// Each text's context `[1, tokens, context_dim]` (every encoder, concatenated).
    pub contexts: Vec<Tensor<3>>,
    /// Each text's pooled embedding `[1, projection]` (SDXL).
    pub pooled: Vec<Option<Tensor<2>>>,
    /// The empty prompt's context `[1, 77, context_dim]`, which pads a shorter side.
    pub empty: Tensor<3>,
    pub warnings: Vec<String>,
    /// The embeddings the texts used: name and A1111 short hash.
    pub embeddings: Vec<(String, String)>,
}

/// Encodes one prompt's `texts` with every encoder of the model.
pub fn encode_texts(
    model: &Model,
    request: &GenerateRequest,
    texts: &[RowTexts],
    embeddings: &EmbeddingSet,
) -> Result<Encoded> {
    let mut runs: Vec<EncoderRun> = Vec::with_capacity(model.encoders.len());
    let mut warnings = Vec::new();
    for encoder in &model.encoders {
        let slot: Vec<&str> = texts
            .iter()
            .map(|t| match encoder.spec.prompt {
                PromptSlot::First => t.first.as_str(),
                PromptSlot::Second => t.second.as_str(),
            })
            .collect();
        let options = (request.clip_skip as usize, request.emphasis);
        let run = run_encoder(model, encoder, &slot, options, embeddings)?;
        for row in &run.rows {
            check_finite(row, "text encoder")?;
        }
        for word in slot
            .iter()
            .flat_map(|t| unknown_embedding_words(t, embeddings))
        {
            let warning = format!(
                "{word:?} looks like an embedding, but no embedding file has that name: it was \
                 read as plain text"
            );
            if !warnings.contains(&warning) {
                warnings.push(warning);
            }
        }
        runs.push(run);
    }
    // Encoders whose texts gave fewer chunks (SDXL's second prompt) are padded with their
    // empty prompt's chunk, so all contexts have the same length.
    let longest = runs
        .iter()
        .flat_map(|r| r.rows.iter().map(|t| t.dims()[1]))
        .max()
        .unwrap_or(CONTEXT_LENGTH);
    let contexts = (0..texts.len())
        .map(|i| {
            let parts = runs
                .iter()
                .map(|run| {
                    let row = run.rows[i].clone();
                    let missing = (longest - row.dims()[1]) / CONTEXT_LENGTH;
                    if missing == 0 {
                        row
                    } else {
                        Tensor::cat(vec![row, run.empty.clone().repeat_dim(1, missing)], 1)
                    }
                })
                .collect();
            Tensor::cat(parts, 2)
        })
        .collect();
    let pooled = (0..texts.len())
        .map(|i| runs.iter().rev().find_map(|run| run.pooled[i].clone()))
        .collect();
    let empty = Tensor::cat(runs.iter().map(|r| r.empty.clone()).collect(), 2);
    let mut used: Vec<usize> = Vec::new();
    for index in runs.iter().flat_map(|r| r.used.iter().copied()) {
        if !used.contains(&index) {
            used.push(index);
        }
    }
    let mut names = Vec::with_capacity(used.len());
    for index in used {
        let e = embeddings.get(index)?;
        names.push((e.name.clone(), e.short_hash.clone()));
    }
    Ok(Encoded {
        contexts,
        pooled,
        empty,
        warnings,
        embeddings: names,
    })
}

/// One row of a conditioning: a context and, for SDXL, its pooled embedding.
pub type Row = (Tensor<3>, Option<Tensor<2>>);

/// Lays encoded rows out as the guidance batch: the `negative` row (with guidance) and the
/// positive rows with their `AND` weights. Positive rows of different lengths are padded by
/// repeating their last token (A1111's `stack_conds`); the negative and the positive side,
/// by the `empty` prompt's chunks (A1111's "Pad prompt/negative prompt").
pub fn assemble(
    model: &Model,
    request: &GenerateRequest,
    negative: Option<Row>,
    positives: Vec<(Row, f32)>,
    empty: &Tensor<3>,
) -> Result<Conditioning> {
    let spec = model.spec();
    let longest = positives
        .iter()
        .map(|((c, _), _)| c.dims()[1])
        .max()
        .unwrap_or(CONTEXT_LENGTH);
    let weights: Vec<f32> = positives.iter().map(|(_, w)| *w).collect();
    let mut rows: Vec<Row> = positives
        .into_iter()
        .map(|((context, pooled), _)| {
            let tokens = context.dims()[1];
            let context = if tokens < longest {
                let last = context.clone().narrow(1, tokens - 1, 1);
                Tensor::cat(vec![context, last.repeat_dim(1, longest - tokens)], 1)
            } else {
                context
            };
            (context, pooled)
        })
        .collect();
    let pad = |context: Tensor<3>, to: usize| {
        let missing = (to - context.dims()[1]) / CONTEXT_LENGTH;
        Tensor::cat(vec![context, empty.clone().repeat_dim(1, missing)], 1)
    };
    let mut padded = false;
    if let Some((mut context, pooled)) = negative {
        let tokens = context.dims()[1];
        if tokens < longest {
            context = pad(context, longest);
            padded = true;
        } else if tokens > longest {
            for row in &mut rows {
                row.0 = pad(row.0.clone(), tokens);
            }
            padded = true;
        }
        // diffusers' force_zeros_for_empty_prompt: no negative prompt is zero conditioning.
        let zero = model.zero_empty_negative
            && request.negative_prompt.is_empty()
            && request
                .negative_prompt_2
                .as_deref()
                .unwrap_or("")
                .is_empty();
        let (context, pooled) = if zero {
            (context.zeros_like(), pooled.map(|p| p.zeros_like()))
        } else {
            (context, pooled)
        };
        rows.insert(0, (context, pooled));
    }
    let guided = rows.len() > weights.len();
    let count = rows.len();
    let batch = request.batch as usize;
    let context = Tensor::cat(rows.iter().map(|(c, _)| c.clone()).collect(), 0);
    let [_, tokens, dim] = context.dims();
    let context =
        context
            .unsqueeze_dim::<4>(1)
            .repeat_dim(1, batch)
            .reshape([count * batch, tokens, dim]);
    let pooled: Option<Vec<Tensor<2>>> = rows.into_iter().map(|(_, p)| p).collect();
    let added = match (spec.time_ids, pooled) {
        (Some(kind), Some(pooled)) => {
            let pooled = Tensor::cat(pooled, 0);
            let width = pooled.dims()[1];
            let text_embeds = pooled
                .unsqueeze_dim::<3>(1)
                .repeat_dim(1, batch)
                .reshape([count * batch, width]);
            let mut ids = Vec::with_capacity(count * batch * kind.count());
            for row in 0..count {
                let one = time_ids(kind, request, guided && row == 0);
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
    Ok(Conditioning {
        context,
        added,
        warnings: Vec::new(),
        embeddings: Vec::new(),
        weights,
        padded,
    })
}

/// Encodes the prompt (and with guidance the negative prompt) of `request` as they are
/// written, no schedule or `AND` (see [`super::scheduled`] for those).
pub fn encode(model: &Model, request: &GenerateRequest, guided: bool) -> Result<Conditioning> {
    let embeddings = EmbeddingSet::new(&request.embedding_dirs);
    let texts = |first: &str, second: Option<&str>| RowTexts {
        first: first.to_string(),
        second: second.unwrap_or(first).to_string(),
    };
    let positive = encode_texts(
        model,
        request,
        &[texts(&request.prompt, request.prompt_2.as_deref())],
        &embeddings,
    )?;
    let negative = if guided {
        let row = texts(
            &request.negative_prompt,
            request.negative_prompt_2.as_deref(),
        );
        Some(encode_texts(model, request, &[row], &embeddings)?)
    } else {
        None
    };
    let mut warnings = positive.warnings.clone();
    let mut names = positive.embeddings.clone();
    if let Some(n) = &negative {
        warnings.extend(
            n.warnings
                .iter()
                .filter(|w| !positive.warnings.contains(w))
                .cloned(),
        );
        names.extend(
            n.embeddings
                .iter()
                .filter(|e| !positive.embeddings.contains(e))
                .cloned(),
        );
    }
    let row = |e: &Encoded| (e.contexts[0].clone(), e.pooled[0].clone());
    let mut c = assemble(
        model,
        request,
        negative.as_ref().map(row),
        vec![(row(&positive), 1.0)],
        &positive.empty,
    )?;
    c.warnings = warnings;
    c.embeddings = names;
    Ok(c)
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

/// An error naming `stage` when `t` holds NaN or infinity, or the device's error when the
/// work that made `t` failed.
pub fn check_finite<const D: usize>(t: &Tensor<D>, stage: &str) -> Result<()> {
    if crate::device::all_finite(t)? {
        Ok(())
    } else {
        Err(Error::NonFinite {
            stage: stage.to_string(),
        })
    }
}
