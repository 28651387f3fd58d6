//! Reading how an image was made from its PNG text chunks: A1111's (and Forge's and Ember's)
//! `parameters` text, ComfyUI's API-format `prompt` graph, Fooocus' JSON `parameters`.

use std::collections::BTreeMap;

use super::Parameters;

/// What an image's metadata says about how it was made.
#[derive(Clone, Debug, PartialEq)]
pub enum ImageMetadata {
    /// A1111 / Forge / Ember `parameters` text.
    A1111(Parameters),
    /// ComfyUI's API-format `prompt` graph: the sampler nodes' settings and the texts.
    /// A sampler's links are followed: `positive` / `negative` hold the prompt texts and
    /// `width` / `height` the empty latent's size, when the graph has them.
    ComfyUi {
        samplers: Vec<BTreeMap<String, String>>,
        texts: Vec<String>,
    },
    /// Fooocus' JSON `parameters`.
    Fooocus(BTreeMap<String, String>),
}

/// Interprets an image's text chunks; `None` when none of them is generation metadata.
pub fn from_text_chunks(chunks: &[(String, String)]) -> Option<ImageMetadata> {
    let find = |key: &str| {
        chunks
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    if let Some(text) = find("parameters") {
        if let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(text)
        {
            return Some(ImageMetadata::Fooocus(flatten(&map)));
        }
        return Some(ImageMetadata::A1111(Parameters::parse(text)));
    }
    let graph: serde_json::Value = serde_json::from_str(find("prompt")?).ok()?;
    let nodes = graph.as_object()?;
    let mut samplers = Vec::new();
    let mut texts = Vec::new();
    for node in nodes.values() {
        let class = node["class_type"].as_str().unwrap_or("");
        let inputs = node["inputs"].as_object();
        if class.starts_with("KSampler") {
            if let Some(inputs) = inputs {
                let mut settings = flatten(inputs);
                settings.extend(follow_sampler_links(nodes, inputs));
                samplers.push(settings);
            }
        } else if class.starts_with("CLIPTextEncode") {
            for key in ["text", "text_l"] {
                if let Some(text) = node["inputs"][key].as_str() {
                    texts.push(text.to_string());
                }
            }
        }
    }
    Some(ImageMetadata::ComfyUi { samplers, texts })
}

/// The texts and latent size a ComfyUI sampler node links to.
fn follow_sampler_links(
    nodes: &serde_json::Map<String, serde_json::Value>,
    inputs: &serde_json::Map<String, serde_json::Value>,
) -> Vec<(String, String)> {
    let linked = |key: &str| {
        let id = inputs.get(key)?.as_array()?.first()?;
        let id = id
            .as_str()
            .map(str::to_string)
            .or_else(|| id.as_u64().map(|n| n.to_string()))?;
        nodes.get(&id)?.get("inputs")?.as_object()
    };
    let mut out = Vec::new();
    for key in ["positive", "negative"] {
        let Some(encode) = linked(key) else { continue };
        if let Some(text) = encode.get("text").and_then(|t| t.as_str()) {
            out.push((key.to_string(), text.to_string()));
        }
        // CLIPTextEncodeSDXL: text_l for CLIP-L, text_g for bigG.
        for part in ["text_l", "text_g"] {
            if let Some(text) = encode.get(part).and_then(|t| t.as_str()) {
                out.push((format!("{key}_{part}"), text.to_string()));
            }
        }
    }
    // The checkpoint a sampler runs (a second sampler on another one is a refiner).
    if let Some(name) = linked("model").and_then(|m| m.get("ckpt_name")?.as_str()) {
        out.push(("ckpt_name".to_string(), name.to_string()));
    }
    if let Some(latent) = linked("latent_image") {
        for key in ["width", "height"] {
            if let Some(v) = latent.get(key).and_then(serde_json::Value::as_u64) {
                out.push((key.to_string(), v.to_string()));
            }
        }
    }
    out
}

/// Scalar entries of a JSON object as strings (links to other nodes are skipped).
fn flatten(map: &serde_json::Map<String, serde_json::Value>) -> BTreeMap<String, String> {
    map.iter()
        .filter_map(|(k, v)| {
            let s = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            Some((k.clone(), s))
        })
        .collect()
}
