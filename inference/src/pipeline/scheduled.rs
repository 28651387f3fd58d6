//! Conditioning that changes during sampling: A1111's prompt editing (`[a:b:when]`),
//! alternation (`[a|b]`) and `AND` subprompts. Each prompt's texts are encoded together, as
//! A1111's `get_learned_conditioning` does (they share its chunk count and emphasis mean),
//! and each stretch's conditioning is looked up by the denoiser's call count, as A1111's
//! `CFGDenoiser` does.

use super::prompt::{Conditioning, Encoded, Row, RowTexts, assemble, encode_texts};
use crate::api::GenerateRequest;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::text::and::split_and;
use crate::text::embeddings::EmbeddingSet;
use crate::text::schedule::{entry_at, prompt_schedule};

/// Most `AND` subprompts a prompt may have (each is another UNet row per image).
pub const MAX_SUBPROMPTS: usize = 8;

/// The conditioning of every stretch of a generation.
pub struct ScheduledConditioning {
    /// The last schedule step of each stretch, ascending.
    ends: Vec<usize>,
    /// Which of `conditionings` each stretch uses.
    uses: Vec<usize>,
    conditionings: Vec<Conditioning>,
}

impl ScheduledConditioning {
    /// One conditioning for the whole generation.
    pub fn fixed(conditioning: Conditioning) -> Self {
        Self {
            ends: vec![usize::MAX],
            uses: vec![0],
            conditionings: vec![conditioning],
        }
    }

    /// The conditioning of denoiser call `call` (counted from 0 over the whole generation):
    /// A1111 counts every model call as a step of a schedule built over
    /// [`schedule_steps`] steps, and takes the first stretch whose end is `>= call`.
    pub fn at(&self, call: usize) -> &Conditioning {
        &self.conditionings[self.uses[entry_at(&self.ends, call)]]
    }

    /// Every distinct conditioning, first use first.
    pub fn all(&self) -> &[Conditioning] {
        &self.conditionings
    }

    /// How many positive row groups (`AND` subprompts) every conditioning has.
    pub fn subprompts(&self) -> usize {
        self.conditionings[0].weights.len()
    }

    /// The last schedule step of each stretch.
    pub fn ends(&self) -> &[usize] {
        &self.ends
    }
}

/// The steps A1111 builds prompt schedules over: the step count, doubled for the samplers
/// it marks second order (they call the model twice a step, and each call counts).
pub fn schedule_steps(request: &GenerateRequest, calls_per_step: usize) -> usize {
    request.steps as usize * calls_per_step.max(1)
}

/// Encodes every distinct conditioning the prompts' schedules need over `steps` schedule
/// steps: the negative prompt (edited, not split), and each `AND` subprompt of the prompt
/// with its weight. SDXL's second prompts follow the same schedule when given.
pub fn encode_scheduled(
    model: &Model,
    request: &GenerateRequest,
    guided: bool,
    steps: usize,
) -> Result<ScheduledConditioning> {
    // A1111 removes `<lora:…>` and other extra-network tags before anything else.
    let (prompt, _) = crate::lora::tags::extract(&request.prompt)?;
    let parts = split_and(&prompt);
    if parts.len() > MAX_SUBPROMPTS {
        return Err(Error::settings(format!(
            "the prompt has {} AND subprompts; Ember takes at most {MAX_SUBPROMPTS}",
            parts.len()
        )));
    }
    if let Some((_, w)) = parts
        .iter()
        .find(|(_, w)| !w.is_finite() || w.abs() > 100.0)
    {
        return Err(Error::settings(format!(
            "an AND weight of {w} is out of range (-100 to 100)"
        )));
    }
    let schedule = |text: &str| prompt_schedule(text, steps.max(1), None);
    let negative = schedule(&request.negative_prompt);
    let negative_2 = request.negative_prompt_2.as_deref().map(schedule);
    let prompt_2 = request.prompt_2.as_deref().map(schedule);
    let part_schedules: Vec<_> = parts.iter().map(|(text, _)| schedule(text)).collect();

    let mut ends: Vec<usize> = negative
        .iter()
        .chain(negative_2.iter().flatten())
        .chain(prompt_2.iter().flatten())
        .chain(part_schedules.iter().flatten())
        .map(|(end, _)| *end)
        .collect();
    ends.sort_unstable();
    ends.dedup();

    let text_at = |s: &[(usize, String)], end: usize| -> String {
        let index = s.iter().position(|(e, _)| end <= *e).unwrap_or(s.len() - 1);
        s[index].1.clone()
    };
    // Each stretch's texts: the negative row and one row per subprompt.
    let stretches: Vec<(Option<RowTexts>, Vec<RowTexts>)> = ends
        .iter()
        .map(|&end| {
            let first = text_at(&negative, end);
            let negative_row = guided.then(|| RowTexts {
                second: negative_2
                    .as_deref()
                    .map_or_else(|| first.clone(), |s| text_at(s, end)),
                first,
            });
            let positives = part_schedules
                .iter()
                .map(|s| {
                    let first = text_at(s, end);
                    RowTexts {
                        second: prompt_2
                            .as_deref()
                            .map_or_else(|| first.clone(), |p| text_at(p, end)),
                        first,
                    }
                })
                .collect();
            (negative_row, positives)
        })
        .collect();
    // A1111 encodes each prompt's texts (its schedule's stretches) together: the negative,
    // then each subprompt.
    let embeddings = EmbeddingSet::new(&request.embedding_dirs);
    let distinct = |rows: Vec<&RowTexts>| {
        let mut texts: Vec<RowTexts> = Vec::new();
        for row in rows {
            if !texts.contains(row) {
                texts.push(row.clone());
            }
        }
        texts
    };
    let negative_texts = distinct(stretches.iter().filter_map(|(n, _)| n.as_ref()).collect());
    let negative_group = if guided {
        Some(encode_texts(model, request, &negative_texts, &embeddings)?)
    } else {
        None
    };
    let mut groups = Vec::with_capacity(parts.len());
    for i in 0..parts.len() {
        let texts = distinct(stretches.iter().map(|(_, p)| &p[i]).collect());
        let encoded = encode_texts(model, request, &texts, &embeddings)?;
        groups.push((texts, encoded));
    }
    let mut warnings: Vec<String> = Vec::new();
    let mut names: Vec<(String, String)> = Vec::new();
    for encoded in negative_group.iter().chain(groups.iter().map(|(_, e)| e)) {
        for w in &encoded.warnings {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
        for e in &encoded.embeddings {
            if !names.contains(e) {
                names.push(e.clone());
            }
        }
    }
    let row = |encoded: &Encoded, texts: &[RowTexts], wanted: &RowTexts| -> Row {
        let i = texts.iter().position(|t| t == wanted).unwrap_or(0);
        (encoded.contexts[i].clone(), encoded.pooled[i].clone())
    };
    let mut seen: Vec<&(Option<RowTexts>, Vec<RowTexts>)> = Vec::new();
    let mut conditionings: Vec<Conditioning> = Vec::new();
    let mut uses = Vec::with_capacity(ends.len());
    for stretch in &stretches {
        if let Some(i) = seen.iter().position(|k| *k == stretch) {
            uses.push(i);
            continue;
        }
        let (negative_row, positive_rows) = stretch;
        let negative = negative_row
            .as_ref()
            .zip(negative_group.as_ref())
            .map(|(wanted, group)| row(group, &negative_texts, wanted));
        let positives = positive_rows
            .iter()
            .zip(&groups)
            .zip(&parts)
            .map(|((wanted, (texts, group)), (_, w))| (row(group, texts, wanted), *w as f32))
            .collect();
        let empty = &groups[0].1.empty;
        let mut conditioning = assemble(model, request, negative, positives, empty)?;
        conditioning.warnings = warnings.clone();
        conditioning.embeddings = names.clone();
        conditionings.push(conditioning);
        seen.push(stretch);
        uses.push(conditionings.len() - 1);
    }
    Ok(ScheduledConditioning {
        ends,
        uses,
        conditionings,
    })
}
