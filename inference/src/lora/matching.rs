//! Which weight of a model each adapter of a set of LoRA files changes, checked against that
//! weight's shape: the updates a merge makes, and the report of what it left out. A LoRA
//! made for another family is an error here, before any weight changes.

use std::collections::HashMap;

use super::file::{LoraFile, Network};
use super::merge::{LoraSpec, Updates, with_network};
use super::targets::target;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::weights::keymap::{UNetLayout, module_to_diffusers};

/// The adapters of a set of LoRAs, matched to the model's weights.
pub(super) struct Matched<'a> {
    /// The model's networks, the UNet first.
    pub networks: Vec<Network>,
    pub updates: Updates<'a>,
    /// Report lines: tensors of no LoRA format, adapters matching nothing in the model.
    pub report: Vec<String>,
}

/// A network's float parameters: shape by module path (PyTorch layout), and module path by
/// flattened diffusers name (`down_blocks_0_…_to_q`, as LoRA keys name them).
struct NetworkPaths {
    shapes: HashMap<String, Vec<usize>>,
    by_flat_name: HashMap<String, String>,
}

fn network_paths(model: &mut Model, network: Network) -> NetworkPaths {
    let list = with_network(model, network, &mut |m| m.shapes());
    let by_flat_name = list
        .iter()
        .filter_map(|(path, _)| {
            let module = path.strip_suffix(".weight")?;
            let diffusers = module_to_diffusers(&format!("{module}.weight"));
            let diffusers = diffusers.strip_suffix(".weight")?.replace('.', "_");
            Some((diffusers, path.clone()))
        })
        .collect();
    NetworkPaths {
        shapes: list.into_iter().collect(),
        by_flat_name,
    }
}

/// Matches every adapter of `files` (with their `specs`' strengths) to `model`'s weights.
pub(super) fn match_adapters<'a>(
    model: &mut Model,
    specs: &[LoraSpec],
    files: &[&'a LoraFile],
) -> Result<Matched<'a>> {
    let mut networks = vec![Network::Unet];
    networks.extend((0..model.encoders.len()).map(Network::TextEncoder));
    let paths: HashMap<Network, NetworkPaths> = networks
        .iter()
        .map(|&network| (network, network_paths(model, network)))
        .collect();
    let layout = UNetLayout {
        layers_per_block: model.unet_config.layers_per_block,
        up_attention: model.unet_config.up_attention.clone(),
    };
    let mut updates = Updates::new();
    let mut report = Vec::new();
    for (spec, file) in specs.iter().zip(files) {
        let name = file.path.display();
        let second_encoder = file.adapters.iter().find(|adapter| {
            matches!(adapter.network, Network::TextEncoder(i) if i >= model.encoders.len())
        });
        if let Some(adapter) = second_encoder {
            return Err(Error::invalid_model(
                &file.path,
                format!(
                    "LoRA `{}` is for a second text encoder: it was made for SDXL, and this \
                     model ({}) has one",
                    adapter.key,
                    model.spec().label
                ),
            ));
        }
        let mut unmatched = Vec::new();
        for adapter in &file.adapters {
            let network = &paths[&adapter.network];
            let found = target(adapter, &network.by_flat_name, Some(&layout))
                .and_then(|path| Some((network.shapes.get(&path)?, path)));
            let Some((shape, path)) = found else {
                unmatched.push(adapter.key.clone());
                continue;
            };
            let (out, cols) = super::delta::target_size(adapter);
            let fits =
                shape.len() >= 2 && shape[0] == out && shape[1..].iter().product::<usize>() == cols;
            if !fits {
                return Err(Error::invalid_model(
                    &file.path,
                    format!(
                        "LoRA `{}` changes a {out}×{cols} weight, but this model's `{path}` is \
                         {shape:?}: the LoRA was made for another model family",
                        adapter.key,
                    ),
                ));
            }
            let weight = (out, shape[1], shape[2..].iter().product());
            super::shapes::check_against(&adapter.factors, adapter.dora_scale.as_ref(), weight)
                .map_err(|e| {
                    Error::invalid_model(
                        &file.path,
                        format!("LoRA `{}`: {e}: the file is damaged", adapter.key),
                    )
                })?;
            let strength = match adapter.network {
                Network::Unet => spec.unet,
                Network::TextEncoder(_) => spec.text_encoder,
            };
            updates
                .entry((adapter.network, path))
                .or_default()
                .push((strength, adapter));
        }
        let matched = file.adapters.len() - unmatched.len();
        if matched == 0 {
            return Err(Error::invalid_model(
                &file.path,
                format!(
                    "the LoRA matches nothing in this model (e.g. `{}`): it was made for another \
                     model family",
                    unmatched.first().map_or("", String::as_str)
                ),
            ));
        }
        if !file.unread.is_empty() {
            let first: Vec<&str> = file.unread.iter().take(3).map(String::as_str).collect();
            report.push(format!(
                "LoRA {name}: {} tensors of no LoRA format Ember reads were left out: {}",
                file.unread.len(),
                first.join(", ")
            ));
        }
        if !unmatched.is_empty() {
            let first: Vec<&str> = unmatched.iter().take(3).map(String::as_str).collect();
            report.push(format!(
                "LoRA {name}: {matched} of {} modules matched; not in this model: {}",
                file.adapters.len(),
                first.join(", ")
            ));
        }
    }
    Ok(Matched {
        networks,
        updates,
        report,
    })
}
