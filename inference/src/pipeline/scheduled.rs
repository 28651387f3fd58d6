//! Conditioning that changes during sampling: A1111's prompt editing (`[a:b:when]`),
//! alternation (`[a|b]`) and `AND` subprompts, encoded once per distinct set of texts and
//! looked up by the denoiser's call count, as A1111's `CFGDenoiser` does.

use super::prompt::{Conditioning, RowTexts, encode_rows};
use crate::api::GenerateRequest;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::text::schedule::{entry_at, prompt_schedule, split_and};

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
    let mut rows_seen: Vec<(Option<RowTexts>, Vec<RowTexts>)> = Vec::new();
    let mut conditionings: Vec<Conditioning> = Vec::new();
    let mut uses = Vec::with_capacity(ends.len());
    for &end in &ends {
        let first = text_at(&negative, end);
        let negative_row = guided.then(|| RowTexts {
            second: negative_2
                .as_deref()
                .map_or_else(|| first.clone(), |s| text_at(s, end)),
            first,
        });
        let positives: Vec<RowTexts> = part_schedules
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
        let key = (negative_row.clone(), positives.clone());
        if let Some(i) = rows_seen.iter().position(|k| *k == key) {
            uses.push(i);
            continue;
        }
        let weighted: Vec<(RowTexts, f32)> = positives
            .into_iter()
            .zip(&parts)
            .map(|(row, (_, w))| (row, *w as f32))
            .collect();
        conditionings.push(encode_rows(
            model,
            request,
            negative_row.as_ref(),
            &weighted,
        )?);
        rows_seen.push(key);
        uses.push(conditionings.len() - 1);
    }
    Ok(ScheduledConditioning {
        ends,
        uses,
        conditionings,
    })
}
