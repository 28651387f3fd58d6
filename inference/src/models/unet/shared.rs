//! What the UNet and the ControlNet share: the time (and SDXL's added) embedding, and the
//! pass through the down blocks and the middle block.

use burn::tensor::Tensor;
use kernels::silu;

use super::{AddedConditioning, DownBlock, MidBlock};
use crate::models::layers::{TimestepMlp, timestep_embedding};

/// The time embedding (plus SDXL's pooled text and time ids), SiLU applied once for every
/// resnet. Shared by the UNet and the ControlNet.
pub(crate) fn embed(
    (time_embedding, add_embedding): (&TimestepMlp, Option<&TimestepMlp>),
    addition_dim: usize,
    (flip_sin_to_cos, freq_shift): (bool, f32),
    channels: usize,
    (timesteps, added): (&[f32], Option<&AddedConditioning>),
    record: &mut dyn FnMut(String, &Tensor<4>),
) -> Tensor<2> {
    let weight = time_embedding.linear_1.weight.val();
    let (dtype, device) = (weight.dtype(), weight.device());
    let t_proj =
        timestep_embedding(timesteps, channels, flip_sin_to_cos, freq_shift, &device).cast(dtype);
    record("time_proj".into(), &t_proj.clone().unsqueeze_dims(&[2, 3]));
    let mut emb = time_embedding.forward(t_proj);
    record(
        "time_embedding".into(),
        &emb.clone().unsqueeze_dims(&[2, 3]),
    );
    match (add_embedding, added) {
        (Some(add_embedding), Some(added)) => {
            let batch = timesteps.len();
            let ids = timestep_embedding(
                &added.time_ids,
                addition_dim,
                flip_sin_to_cos,
                freq_shift,
                &device,
            )
            .cast(emb.dtype());
            record("add_time_proj".into(), &ids.clone().unsqueeze_dims(&[2, 3]));
            let per_row = added.time_ids.len() / batch;
            let input = Tensor::cat(
                vec![
                    added.text_embeds.clone().cast(emb.dtype()),
                    ids.reshape([batch, per_row * addition_dim]),
                ],
                1,
            );
            let aug = add_embedding.forward(input);
            record("add_embedding".into(), &aug.clone().unsqueeze_dims(&[2, 3]));
            emb = emb + aug;
        }
        (None, None) => {}
        (Some(_), None) => panic!("an SDXL UNet needs pooled text and time ids"),
        (None, Some(_)) => panic!("this UNet takes no pooled text or time ids"),
    }
    silu(emb)
}

/// The down blocks and the middle block on `x` (the `conv_in` output): the middle block's
/// output and every skip connection (`x` first), or `None` once `interrupted` says so
/// (asked first before the first block, then after every resnet and the middle block).
pub(crate) fn encoder_pass(
    down_blocks: &[DownBlock],
    mid: &MidBlock,
    (x, emb, context): (Tensor<4>, &Tensor<2>, &Tensor<3>),
    record: &mut dyn FnMut(String, &Tensor<4>),
    interrupted: &dyn Fn() -> bool,
) -> Option<(Tensor<4>, Vec<Tensor<4>>)> {
    // A cancel that came while the caller ran `conv_in` skips the whole pass.
    if interrupted() {
        return None;
    }
    let mut x = x;
    let mut skips = vec![x.clone()];
    for (i, block) in down_blocks.iter().enumerate() {
        for (j, resnet) in block.resnets.iter().enumerate() {
            x = resnet.forward(x, Some(emb));
            if let Some(attn) = block.attentions.get(j) {
                x = attn.forward(x, context);
            }
            skips.push(x.clone());
            if interrupted() {
                return None;
            }
        }
        for down in &block.downsamplers {
            x = down.forward(x);
            skips.push(x.clone());
        }
        record(format!("down_blocks.{i}"), &x);
    }
    x = mid.resnets[0].forward(x, Some(emb));
    x = mid.attentions[0].forward(x, context);
    x = mid.resnets[1].forward(x, Some(emb));
    if interrupted() {
        return None;
    }
    record("mid_block".into(), &x);
    Some((x, skips))
}
