//! The floating-point work of one call of each network, counted from its config: what a
//! timing is divided by to give the TFLOP/s `ember bench` prints beside PyTorch's.

use crate::models::clip::{ClipConfig, ClipTextModel};
use crate::models::unet::UNetConfig;
use crate::models::vae::VaeConfig;

/// Multiply-add work of a 2-D convolution.
fn conv(c_in: usize, c_out: usize, k: usize, h: usize, w: usize) -> f64 {
    2.0 * (c_in * c_out * k * k * h * w) as f64
}

/// A resnet block: two 3x3 convolutions and a 1x1 shortcut when the width changes.
fn resnet(c_in: usize, c_out: usize, h: usize, w: usize) -> f64 {
    let shortcut = if c_in != c_out {
        conv(c_in, c_out, 1, h, w)
    } else {
        0.0
    };
    conv(c_in, c_out, 3, h, w) + conv(c_out, c_out, 3, h, w) + shortcut
}

/// One UNet call: convolutions, linear layers and attention (norms and activations are
/// a fraction of a percent).
pub fn unet_flops(cfg: &UNetConfig, batch: usize, h: usize, w: usize, tokens: usize) -> f64 {
    let ch = &cfg.block_out_channels;
    // proj_in/proj_out, then `depth` blocks of self-attention, cross-attention and GEGLU.
    let transformer = |c: usize, h: usize, w: usize, depth: usize| {
        let n = (h * w) as f64;
        let c = c as f64;
        let ctx = cfg.cross_attention_dim as f64;
        let t = tokens as f64;
        let self_attn = 2.0 * 4.0 * c * c * n + 4.0 * n * n * c;
        let cross_attn = 2.0 * 2.0 * c * c * n + 2.0 * 2.0 * c * ctx * t + 4.0 * n * t * c;
        let ff = 2.0 * (8.0 * c * c + 4.0 * c * c) * n;
        2.0 * 2.0 * c * c * n + depth as f64 * (self_attn + cross_attn + ff)
    };
    let depth = &cfg.transformer_depth;
    let levels = cfg.levels();
    let mut total = conv(cfg.in_channels, ch[0], 3, h, w);
    let (mut h_l, mut w_l) = (h, w);
    let mut sizes = Vec::new();
    for i in 0..levels {
        let c_in = if i == 0 { ch[0] } else { ch[i - 1] };
        for j in 0..cfg.layers_per_block {
            total += resnet(if j == 0 { c_in } else { ch[i] }, ch[i], h_l, w_l);
            if cfg.down_attention[i] {
                total += transformer(ch[i], h_l, w_l, depth[i]);
            }
        }
        sizes.push((h_l, w_l));
        if i + 1 < levels {
            total += conv(ch[i], ch[i], 3, h_l.div_ceil(2), w_l.div_ceil(2));
            (h_l, w_l) = (h_l.div_ceil(2), w_l.div_ceil(2));
        }
    }
    let c_mid = ch[levels - 1];
    total += 2.0 * resnet(c_mid, c_mid, h_l, w_l) + transformer(c_mid, h_l, w_l, depth[levels - 1]);
    for i in 0..levels {
        let level = levels - 1 - i;
        let (hh, ww) = sizes[level];
        let c_prev = if i == 0 { c_mid } else { ch[level + 1] };
        for j in 0..=cfg.layers_per_block {
            let c_skip = if j == cfg.layers_per_block {
                ch[level.saturating_sub(1)]
            } else {
                ch[level]
            };
            total += resnet(
                if j == 0 { c_prev } else { ch[level] } + c_skip,
                ch[level],
                hh,
                ww,
            );
            if cfg.up_attention[i] {
                total += transformer(ch[level], hh, ww, depth[level]);
            }
        }
        if level > 0 {
            let (h2, w2) = sizes[level - 1];
            total += conv(ch[level], ch[level], 3, h2, w2);
        }
    }
    total += conv(ch[0], cfg.out_channels, 3, h, w);
    total * batch as f64
}

/// One VAE decode of `[batch, 4, h, w]` latents.
pub fn vae_decode_flops(cfg: &VaeConfig, batch: usize, h: usize, w: usize) -> f64 {
    let ch = &cfg.block_out_channels;
    let n = ch.len();
    let top = ch[n - 1];
    let attention = {
        let tokens = (h * w) as f64;
        let c = top as f64;
        2.0 * 4.0 * c * c * tokens + 4.0 * tokens * tokens * c
    };
    let mut total = conv(cfg.latent_channels, cfg.latent_channels, 1, h, w)
        + conv(cfg.latent_channels, top, 3, h, w);
    total += 2.0 * resnet(top, top, h, w) + attention;
    let (mut hh, mut ww) = (h, w);
    for i in 0..n {
        let level = n - 1 - i;
        let c_in = if i == 0 { top } else { ch[level + 1] };
        for j in 0..=cfg.layers_per_block {
            total += resnet(if j == 0 { c_in } else { ch[level] }, ch[level], hh, ww);
        }
        if i + 1 < n {
            (hh, ww) = (2 * hh, 2 * ww);
            total += conv(ch[level], ch[level], 3, hh, ww);
        }
    }
    total += conv(ch[0], cfg.out_channels, 3, hh, ww);
    total * batch as f64
}

/// One text-encoder call on `[batch, 77]` ids.
pub fn clip_flops(cfg: &ClipConfig, batch: usize) -> f64 {
    let (n, c, i) = (
        cfg.max_position_embeddings,
        cfg.hidden_size,
        cfg.intermediate_size,
    );
    clip_layer_flops(n, c, i) * cfg.num_hidden_layers as f64 * batch as f64
}

/// [`clip_flops`] of a network, read from its weights' shapes.
pub(super) fn clip_flops_of(clip: &ClipTextModel, batch: usize) -> f64 {
    let text = &clip.text_model;
    let n = text.embeddings.position_embedding.weight.dims()[0];
    let layers = &text.encoder.layers;
    // Burn's linear weights are [in, out].
    let i = layers.first().map_or(0, |l| l.mlp.fc1.weight.dims()[1]);
    clip_layer_flops(n, clip.hidden_size(), i) * layers.len() as f64 * batch as f64
}

/// One transformer layer on `n` tokens of width `c` with an MLP of width `i`.
fn clip_layer_flops(n: usize, c: usize, i: usize) -> f64 {
    let (n, c, i) = (n as f64, c as f64, i as f64);
    2.0 * 4.0 * c * c * n + 4.0 * n * n * c + 2.0 * 2.0 * c * i * n
}
