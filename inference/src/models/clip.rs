//! The CLIP text transformer (transformers `CLIPTextModel`, and `CLIPTextModelWithProjection`
//! for SDXL's pooled embedding), as SD 1.x, 2.x and XL use it.
//!
//! Field names follow the transformers state-dict keys (`text_model.encoder.layers.N...`,
//! `text_projection`).

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::activation::sigmoid;
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Device, Int, Tensor};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::models::config_json;
use crate::text::tokenizer::EOS;

/// The MLP activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClipActivation {
    /// `x * sigmoid(1.702 x)` (OpenAI CLIP, SD 1.x).
    QuickGelu,
    /// Exact erf GELU (OpenCLIP, SD 2.x).
    Gelu,
}

/// Text encoder hyper-parameters (a subset of transformers' `CLIPTextConfig`).
#[derive(Clone, Debug, PartialEq)]
pub struct ClipConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub max_position_embeddings: usize,
    pub layer_norm_eps: f64,
    pub activation: ClipActivation,
    /// `CLIPTextModelWithProjection`'s `projection_dim` (the pooled embedding's width).
    pub projection_dim: Option<usize>,
}

impl ClipConfig {
    /// OpenAI CLIP ViT-L/14's text tower (SD 1.x).
    pub fn vit_l14() -> Self {
        Self {
            vocab_size: 49408,
            hidden_size: 768,
            intermediate_size: 3072,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            max_position_embeddings: 77,
            layer_norm_eps: 1e-5,
            activation: ClipActivation::QuickGelu,
            projection_dim: None,
        }
    }

    /// OpenCLIP ViT-bigG/14's text tower (SDXL's second encoder, the refiner's only one).
    pub fn open_clip_big_g() -> Self {
        Self {
            hidden_size: 1280,
            intermediate_size: 5120,
            num_hidden_layers: 32,
            num_attention_heads: 20,
            activation: ClipActivation::Gelu,
            projection_dim: Some(1280),
            ..Self::vit_l14()
        }
    }

    /// OpenCLIP ViT-H/14's text tower as SD 2.x ships it (23 of its 24 layers).
    pub fn open_clip_vit_h14_sd2() -> Self {
        Self {
            hidden_size: 1024,
            intermediate_size: 4096,
            num_hidden_layers: 23,
            num_attention_heads: 16,
            activation: ClipActivation::Gelu,
            ..Self::vit_l14()
        }
    }

    /// Parses a transformers `config.json`.
    pub fn from_json(text: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| Error::settings(format!("text encoder config is not valid JSON: {e}")))?;
        let size = |key: &str| config_json::size(&v, key, "text encoder");
        let activation = match config_json::text_or(&v, "hidden_act", "text encoder", "quick_gelu")?
        {
            "quick_gelu" => ClipActivation::QuickGelu,
            "gelu" => ClipActivation::Gelu,
            other => {
                return Err(Error::settings(format!(
                    "text encoder activation {other:?} is not supported"
                )));
            }
        };
        let config = Self {
            vocab_size: size("vocab_size")?,
            hidden_size: size("hidden_size")?,
            intermediate_size: size("intermediate_size")?,
            num_hidden_layers: size("num_hidden_layers")?,
            num_attention_heads: size("num_attention_heads")?,
            max_position_embeddings: size("max_position_embeddings")?,
            layer_norm_eps: config_json::number_or(&v, "layer_norm_eps", "text encoder", 1e-5)?,
            activation,
            projection_dim: if with_projection(&v) {
                Some(size("projection_dim")?)
            } else {
                None
            },
        };
        if !config
            .hidden_size
            .is_multiple_of(config.num_attention_heads)
        {
            return Err(Error::settings(
                "text encoder: hidden_size is not a multiple of num_attention_heads",
            ));
        }
        Ok(config)
    }

    /// A text encoder with uninitialised (lazy) parameters, ready for loading.
    pub fn init(&self, device: &Device) -> ClipTextModel {
        let h = self.hidden_size;
        let linear = |i, o| LinearConfig::new(i, o).init(device);
        let layer_norm = || {
            LayerNormConfig::new(h)
                .with_epsilon(self.layer_norm_eps)
                .init(device)
        };
        let layers = (0..self.num_hidden_layers)
            .map(|_| ClipEncoderLayer {
                self_attn: ClipAttention {
                    q_proj: linear(h, h),
                    k_proj: linear(h, h),
                    v_proj: linear(h, h),
                    out_proj: linear(h, h),
                    heads: self.num_attention_heads,
                },
                layer_norm1: layer_norm(),
                mlp: ClipMlp {
                    fc1: linear(h, self.intermediate_size),
                    fc2: linear(self.intermediate_size, h),
                    quick_gelu: self.activation == ClipActivation::QuickGelu,
                },
                layer_norm2: layer_norm(),
            })
            .collect();
        ClipTextModel {
            text_model: ClipTextTransformer {
                embeddings: ClipEmbeddings {
                    token_embedding: EmbeddingConfig::new(self.vocab_size, h).init(device),
                    position_embedding: EmbeddingConfig::new(self.max_position_embeddings, h)
                        .init(device),
                },
                encoder: ClipEncoder { layers },
                final_layer_norm: layer_norm(),
            },
            text_projection: self
                .projection_dim
                .map(|p| LinearConfig::new(h, p).with_bias(false).init(device)),
        }
    }
}

/// Whether a transformers config describes `CLIPTextModelWithProjection`.
fn with_projection(v: &Value) -> bool {
    v["architectures"]
        .as_array()
        .is_some_and(|a| a.iter().any(|n| n == "CLIPTextModelWithProjection"))
}

/// `CLIPTextModel`: the text transformer; with a `text_projection`,
/// `CLIPTextModelWithProjection`.
#[derive(Module, Debug)]
pub struct ClipTextModel {
    pub text_model: ClipTextTransformer,
    pub text_projection: Option<Linear>,
}

#[derive(Module, Debug)]
pub struct ClipTextTransformer {
    pub embeddings: ClipEmbeddings,
    pub encoder: ClipEncoder,
    pub final_layer_norm: LayerNorm,
}

#[derive(Module, Debug)]
pub struct ClipEmbeddings {
    pub token_embedding: Embedding,
    pub position_embedding: Embedding,
}

#[derive(Module, Debug)]
pub struct ClipEncoder {
    pub layers: Vec<ClipEncoderLayer>,
}

#[derive(Module, Debug)]
pub struct ClipEncoderLayer {
    pub self_attn: ClipAttention,
    pub layer_norm1: LayerNorm,
    pub mlp: ClipMlp,
    pub layer_norm2: LayerNorm,
}

#[derive(Module, Debug)]
pub struct ClipAttention {
    pub q_proj: Linear,
    pub k_proj: Linear,
    pub v_proj: Linear,
    pub out_proj: Linear,
    pub heads: usize,
}

#[derive(Module, Debug)]
pub struct ClipMlp {
    pub fc1: Linear,
    pub fc2: Linear,
    pub quick_gelu: bool,
}

/// Every hidden state of one text-encoder call.
pub struct ClipOutput {
    /// `hidden_states[0]` is the embedding output, `hidden_states[k]` the output of layer
    /// `k` (before the final LayerNorm). Each `[batch, tokens, hidden]`.
    pub hidden_states: Vec<Tensor<3>>,
    /// The final LayerNorm applied to the last hidden state.
    pub last_hidden_state: Tensor<3>,
}

impl ClipTextModel {
    /// Runs the encoder on token ids.
    ///
    /// # Shapes
    /// - `ids`: `[batch, tokens]` (tokens <= max_position_embeddings)
    /// - every output: `[batch, tokens, hidden]`
    pub fn forward(&self, ids: Tensor<2, Int>) -> ClipOutput {
        self.forward_embedded(self.token_embeddings(ids))
    }

    /// The token-embedding lookup (textual-inversion vectors replace rows of it).
    ///
    /// # Shapes
    /// - `ids`: `[batch, tokens]`; returns `[batch, tokens, hidden]`
    pub fn token_embeddings(&self, ids: Tensor<2, Int>) -> Tensor<3> {
        self.text_model.embeddings.token_embedding.forward(ids)
    }

    /// Width of the token embeddings.
    pub fn hidden_size(&self) -> usize {
        self.text_model.embeddings.token_embedding.weight.dims()[1]
    }

    /// [`Self::forward`] from token embeddings: adds the position embeddings, runs the layers.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, tokens, hidden]` (tokens <= max_position_embeddings)
    /// - every output: `[batch, tokens, hidden]`
    pub fn forward_embedded(&self, token_embeddings: Tensor<3>) -> ClipOutput {
        let m = &self.text_model;
        let [_, tokens, _] = token_embeddings.dims();
        let device = token_embeddings.device();
        let positions = Tensor::<1, Int>::arange(0..tokens as i64, &device).unsqueeze::<2>();
        let mut x = token_embeddings + m.embeddings.position_embedding.forward(positions);
        let mut hidden_states = vec![x.clone()];
        for layer in &m.encoder.layers {
            x = layer.forward(x);
            hidden_states.push(x.clone());
        }
        let last_hidden_state = m.final_layer_norm.forward(x);
        ClipOutput {
            hidden_states,
            last_hidden_state,
        }
    }

    /// The final LayerNorm (A1111's "CLIP skip" applies it to an earlier hidden state).
    pub fn final_layer_norm(&self, x: Tensor<3>) -> Tensor<3> {
        self.text_model.final_layer_norm.forward(x)
    }

    /// Number of transformer layers.
    pub fn num_layers(&self) -> usize {
        self.text_model.encoder.layers.len()
    }

    /// The pooled embedding (`CLIPTextModelWithProjection.text_embeds`): the last hidden
    /// state at each row's first end-of-text token, projected. `None` without a projection.
    ///
    /// transformers pools at the first `eos_token_id` (49407 in these configs); with the
    /// legacy id 2 it takes `argmax(ids)`, the same position unless added tokens are used.
    ///
    /// # Shapes
    /// - `last_hidden_state`: `[batch, tokens, hidden]`, `ids`: `batch` rows of `tokens`
    /// - returns `[batch, projection_dim]`
    pub fn pooled(&self, last_hidden_state: &Tensor<3>, ids: &[u32]) -> Option<Tensor<2>> {
        let projection = self.text_projection.as_ref()?;
        let [batch, tokens, hidden] = last_hidden_state.dims();
        let rows = (0..batch)
            .map(|b| {
                let row = &ids[b * tokens..(b + 1) * tokens];
                let eos = row.iter().position(|&t| t == EOS).unwrap_or_else(|| {
                    let max = row.iter().max().copied().unwrap_or(0);
                    row.iter().position(|&t| t == max).unwrap_or(0)
                });
                last_hidden_state
                    .clone()
                    .narrow(0, b, 1)
                    .narrow(1, eos, 1)
                    .reshape([1, hidden])
            })
            .collect();
        Some(kernels::linear(Tensor::cat(rows, 0), projection))
    }
}

impl ClipEncoderLayer {
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let x = x.clone() + self.self_attn.forward(self.layer_norm1.forward(x));
        x.clone() + self.mlp.forward(self.layer_norm2.forward(x))
    }
}

impl ClipAttention {
    /// Causal multi-head self-attention.
    ///
    /// # Shapes
    /// - `x`: `[batch, tokens, hidden]` -> `[batch, tokens, hidden]`
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let [b, n, c] = x.dims();
        let split = |t: Tensor<3>| {
            t.reshape([b, n, self.heads, c / self.heads])
                .swap_dims(1, 2)
        };
        let q = split(kernels::linear(x.clone(), &self.q_proj));
        let k = split(kernels::linear(x.clone(), &self.k_proj));
        let v = split(kernels::linear(x, &self.v_proj));
        let options = AttentionModuleOptions {
            is_causal: true,
            ..Default::default()
        };
        let out = attention(q, k, v, None, None, options); // [b, heads, n, head_dim]
        kernels::linear(out.swap_dims(1, 2).reshape([b, n, c]), &self.out_proj)
    }
}

impl ClipMlp {
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let h = kernels::linear(x, &self.fc1);
        let h = if self.quick_gelu {
            h.clone() * sigmoid(h.mul_scalar(1.702))
        } else {
            kernels::gelu(h)
        };
        kernels::linear(h, &self.fc2)
    }
}
