//! Taking merged LoRAs out of a model: weights read from their `.safetensors` file again
//! (into their own buffers for f32 weights on the CPU), or the kept loaded tensors swapped
//! back; and walking a network's weights by path with each handed over unshared.

use std::collections::{BTreeSet, HashMap};

use burn::tensor::Tensor;

use super::file::Network;
use crate::error::{Error, Result};
use crate::model::Model;

/// Replaces `network`'s weights by path ([`super::swap::map_weights`]), each handed to `f`
/// as the only reference to its buffer (so a merge may write into it): `Module::map` takes
/// the network by value, and an uninitialised network of the same kind (no weights
/// allocated) holds its place meanwhile.
pub(super) fn map_network(
    model: &mut Model,
    network: Network,
    wanted: &dyn Fn(&str) -> bool,
    f: &mut super::swap::WeightFn<'_>,
) {
    use super::swap::map_weights;
    let device = model.device.clone();
    match network {
        Network::Unet => {
            let placeholder = model.unet_config.init(&device);
            let unet = std::mem::replace(&mut model.unet, placeholder);
            model.unet = map_weights(unet, wanted, f);
        }
        Network::TextEncoder(i) => {
            let encoder = &mut model.encoders[i];
            let placeholder = (encoder.spec.preset)().init(&device);
            let network = encoder.network_mut(&device);
            let loaded = std::mem::replace(network, placeholder);
            *network = map_weights(loaded, wanted, f);
        }
    }
}

/// Puts every weight a LoRA touched back as loaded. On an error (a checkpoint changed on
/// disk since it was loaded) the model refuses LoRA changes until a restore succeeds.
pub fn restore(model: &mut Model) -> Result<()> {
    take_out(model, &BTreeSet::new()).map(drop)
}

/// [`restore`], returning the merged tensors of weights without a file that it took out
/// of the model (by network and path), which nothing else holds any more. The weights in
/// `later` are left merged and still recorded as touched: the caller reads each of them
/// from its file again itself, merging the next LoRAs in the same pass
/// ([`crate::weights::WeightSources::reread_into`]); until then they are neither.
pub(super) fn take_out(
    model: &mut Model,
    later: &BTreeSet<(Network, String)>,
) -> Result<HashMap<(Network, String), Tensor<1>>> {
    // An f32 copy of the UNet made from the weights about to change would be stale.
    model.unet_f32.take();
    model.lora.applied.clear();
    let taken = put_back_originals(model)?;
    let (left, touched): (BTreeSet<_>, BTreeSet<_>) = std::mem::take(&mut model.lora.touched)
        .into_iter()
        .partition(|key| later.contains(key));
    model.lora.touched = left;
    let mut networks: Vec<Network> = touched.iter().map(|(n, _)| *n).collect();
    networks.dedup();
    for network in networks {
        let paths: Vec<&str> = touched
            .iter()
            .filter(|(n, _)| *n == network)
            .map(|(_, path)| path.as_str())
            .collect();
        if let Err(e) = reread(model, network, &paths) {
            model.lora.touched.extend(touched);
            model.lora.unrestored = true;
            return Err(Error::settings(format!(
                "taking the LoRAs out of {} failed: {e}",
                model.info.name
            )));
        }
    }
    model.lora.unrestored = !model.lora.touched.is_empty();
    Ok(taken)
}

/// Reads `network`'s weights at `paths` from the model's files again: into their own
/// buffers for f32 weights on the CPU, through burn-store's loading otherwise.
fn reread(model: &mut Model, network: Network, paths: &[&str]) -> Result<()> {
    if !model.sources.rereads_in_place(&model.device) {
        let sources = &model.sources;
        return match network {
            Network::Unet => sources.reload(&mut model.unet, network, paths),
            Network::TextEncoder(i) => {
                let device = model.device.clone();
                sources.reload(model.encoders[i].network_mut(&device), network, paths)
            }
        };
    }
    let sources = std::mem::take(&mut model.sources);
    let wanted: BTreeSet<&str> = paths.iter().copied().collect();
    let mut failed = None;
    let mut visited = 0;
    map_network(model, network, &|p| wanted.contains(p), &mut |weight, w| {
        visited += 1;
        if failed.is_some() {
            return w;
        }
        let (w, read) = sources.reread_into(network, weight, w, None);
        failed = read.err();
        w
    });
    model.sources = sources;
    match failed {
        Some(e) => Err(e),
        None if visited != paths.len() => Err(Error::settings(format!(
            "{} of the weights to read again are not in the network",
            paths.len() - visited
        ))),
        None => Ok(()),
    }
}

/// Swaps the kept originals (weights without a file source) back into the model, dropping
/// them from `touched`; returns the merged tensors they replace.
fn put_back_originals(model: &mut Model) -> Result<HashMap<(Network, String), Tensor<1>>> {
    let mut originals = std::mem::take(&mut model.lora.originals);
    let mut taken = HashMap::new();
    let mut networks: Vec<Network> = originals.keys().map(|(n, _)| *n).collect();
    networks.sort();
    networks.dedup();
    for network in networks {
        let paths: BTreeSet<String> = originals
            .keys()
            .filter(|(n, _)| *n == network)
            .map(|(_, path)| path.clone())
            .collect();
        let wanted = |path: &str| paths.contains(path);
        map_network(
            model,
            network,
            &wanted,
            &mut |weight, merged| match originals.remove(&(network, weight.path.to_string())) {
                Some(original) => {
                    taken.insert((network, weight.path.to_string()), merged);
                    original
                }
                None => merged,
            },
        );
        for path in paths {
            let key = (network, path);
            if originals.contains_key(&key) {
                // Not found in the network: kept, so a later restore can try again.
                model.lora.originals = originals;
                model.lora.unrestored = true;
                return Err(Error::settings(format!(
                    "restoring `{}` after a LoRA failed",
                    key.1
                )));
            }
            model.lora.touched.remove(&key);
        }
    }
    Ok(taken)
}
