//! Which parameter of a loaded network each LoRA module updates: kohya's flat names
//! (diffusers' or, for SDXL, LDM's), dotted diffusers and transformers paths; and the modules
//! a kohya LoRA usually trains, for `ember bench lora`.

use std::collections::HashMap;

use super::file::{Adapter, ModuleName, Network};
use super::merge::with_network;
use crate::model::Model;
use crate::weights::keymap::{
    UNetLayout, diffusers_to_module, ldm_unet_to_diffusers, module_to_diffusers,
};

/// The parameter an adapter updates, among a network's `.weight` parameters: kohya's flat
/// diffusers names, kohya SDXL's flat LDM names (`input_blocks_4_1_proj_in`, read with the
/// UNet's `layout`), or dotted diffusers / transformers paths.
pub(super) fn target(
    adapter: &Adapter,
    flat_names: &HashMap<String, String>,
    layout: Option<&UNetLayout>,
) -> Option<String> {
    match &adapter.module {
        ModuleName::Flat(flat) => flat_names.get(flat).cloned().or_else(|| {
            let ldm = format!("{}.weight", ldm_flat_to_dotted(flat));
            ldm_unet_to_diffusers(&ldm, layout?).map(|d| diffusers_to_module(&d))
        }),
        ModuleName::Dotted(path) => {
            // transformers text encoders are named with or without `text_model.`.
            let path = match adapter.network {
                Network::TextEncoder(_) if !path.starts_with("text_model.") => {
                    format!("text_model.{path}")
                }
                _ => path.clone(),
            };
            Some(diffusers_to_module(&format!("{path}.weight")))
        }
    }
}

/// Identifiers of LDM UNet keys that contain `_`, longest first.
const LDM_WORDS: [&str; 16] = [
    "transformer_blocks",
    "skip_connection",
    "output_blocks",
    "input_blocks",
    "middle_block",
    "emb_layers",
    "out_layers",
    "in_layers",
    "time_embed",
    "label_emb",
    "proj_out",
    "proj_in",
    "to_out",
    "to_q",
    "to_k",
    "to_v",
];

/// kohya's flat LDM name with its dots back (`input_blocks_4_1_transformer_blocks_0_attn1_to_q`
/// -> `input_blocks.4.1.transformer_blocks.0.attn1.to_q`).
fn ldm_flat_to_dotted(flat: &str) -> String {
    let mut s = flat.to_string();
    for word in LDM_WORDS {
        s = s.replace(word, &word.replace('_', "\u{1}"));
    }
    s.replace('_', ".").replace('\u{1}', "_")
}

/// The modules a kohya LoRA usually trains, as its keys name them (`lora_unet_…`,
/// `lora_te_…`, SDXL's `lora_te1_…` / `lora_te2_…`), with their `[out, in]` shapes: every
/// linear layer of the UNet's transformer blocks and of the text encoders' layers. What
/// `ember bench lora` writes its file for.
pub fn kohya_linear_targets(model: &mut Model) -> Vec<(String, [usize; 2])> {
    let encoders = model.encoders.len();
    let mut networks = vec![(Network::Unet, "lora_unet_".to_string())];
    networks.extend((0..encoders).map(|i| {
        let prefix = if encoders == 1 {
            "lora_te_".to_string()
        } else {
            format!("lora_te{}_", i + 1)
        };
        (Network::TextEncoder(i), prefix)
    }));
    let mut targets = Vec::new();
    for (network, prefix) in networks {
        for (path, shape) in with_network(model, network, &mut |m| m.shapes()) {
            let diffusers = module_to_diffusers(&path);
            let Some(module) = diffusers.strip_suffix(".weight") else {
                continue;
            };
            let trained = match network {
                Network::Unet => module.contains(".transformer_blocks."),
                Network::TextEncoder(_) => module.contains(".layers."),
            };
            if let ([out, inp], true) = (shape.as_slice(), trained) {
                targets.push((
                    format!("{prefix}{}", module.replace('.', "_")),
                    [*out, *inp],
                ));
            }
        }
    }
    targets
}
