//! Text conditioning: tokenize, encode, apply CLIP skip, and lay out the guidance batch.

use burn::tensor::{Int, Tensor, TensorData};

use crate::api::GenerateRequest;
use crate::error::{Error, Result};
use crate::model::Model;

/// Encoded prompts, laid out for the UNet.
pub struct Conditioning {
    /// `[2 * batch, 77, dim]` as `[negative x batch, prompt x batch]` with guidance,
    /// `[batch, 77, dim]` without.
    pub context: Tensor<3>,
    pub warnings: Vec<String>,
}

/// Encodes the prompt and (with guidance) the negative prompt in one text-encoder call.
pub fn encode(model: &Model, request: &GenerateRequest, guided: bool) -> Result<Conditioning> {
    let mut warnings = Vec::new();
    let mut ids: Vec<i64> = Vec::new();
    let mut texts = Vec::new();
    if guided {
        texts.push(("negative prompt", request.negative_prompt.as_str()));
    }
    texts.push(("prompt", request.prompt.as_str()));
    for (what, text) in &texts {
        let encoded = model.tokenizer.encode(text)?;
        if encoded.truncated_tokens > 0 {
            warnings.push(format!(
                "the {what} is {} tokens too long; only its first 75 tokens are used",
                encoded.truncated_tokens
            ));
        }
        ids.extend(encoded.ids.iter().map(|&i| i64::from(i)));
    }
    let rows = texts.len();
    let ids = Tensor::<2, Int>::from_data(TensorData::new(ids, [rows, 77]), &model.device);
    let out = model.text_encoder.forward(ids);
    // A1111's CLIP skip s uses the output of layer (layers + 1 - s), then the final norm.
    let skip = request.clip_skip as usize;
    let embeddings = if skip <= 1 {
        out.last_hidden_state
    } else {
        let index = out.hidden_states.len() - skip;
        model
            .text_encoder
            .final_layer_norm(out.hidden_states[index].clone())
    };
    check_finite(&embeddings, "text encoder")?;
    let [_, tokens, dim] = embeddings.dims();
    let batch = request.batch as usize;
    let context = embeddings
        .unsqueeze_dim::<4>(1)
        .repeat_dim(1, batch)
        .reshape([rows * batch, tokens, dim]);
    Ok(Conditioning { context, warnings })
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
