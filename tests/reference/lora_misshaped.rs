//! LoRA, LoCon, LoHa, LoKr and DoRA files whose factors do not multiply out, and LyCORIS
//! parts Ember does not merge: each is refused with the tensor named, never a panic (which
//! would cost the worker its loaded model), and the model keeps its weights.

use burn::tensor::Device;
use ember_tests::{Fixture, Fixtures, reference, write_edited};
use inference::device::Precision;
use inference::lora::{LoraSpec, Network, read_weight, set};
use inference::weights::{LoadOptions, load};

/// The first tensor of `source` whose name ends with `suffix` (and that has `dims` axes).
fn first(source: &str, suffix: &str, dims: usize) -> (String, Fixture) {
    Fixtures::load(source)
        .tensors
        .into_iter()
        .filter(|(name, t)| name.ends_with(suffix) && t.shape.len() == dims)
        .min_by(|a, b| a.0.cmp(&b.0))
        .unwrap_or_else(|| panic!("{source} has no {dims}-axis `{suffix}`"))
}

/// A tensor of ones (a factor's values do not matter to a shape check).
fn ones(shape: Vec<usize>) -> Fixture {
    let n = shape.iter().product();
    Fixture::from_f32(shape, &vec![1.0; n])
}

struct Case {
    what: &'static str,
    source: &'static str,
    /// The tensor replaced (or added) and its new value.
    tensor: (String, Fixture),
    /// Words the error must hold besides the tensor's name.
    says: &'static str,
}

#[test]
fn misshaped_factors_and_unmerged_parts_are_refused_by_name() {
    let (locon, loha, lokr, dora) = (
        "sd15/lycoris/locon.safetensors",
        "sd15/lycoris/loha.safetensors",
        "sd15/lycoris/lokr.safetensors",
        "sd15/lycoris/dora.safetensors",
    );
    let (mid, _) = first(locon, ".lora_mid.weight", 4);
    let (up, up_t) = first(locon, ".lora_up.weight", 4);
    let (w2b, w2b_t) = first(loha, ".hada_w2_b", 2);
    let (w1b, w1b_t) = first(lokr, ".lokr_w1_b", 2);
    let (magnitude, magnitude_t) = first(dora, ".dora_scale", 2);
    // kohya's module names have no dots: the module is what comes before the first.
    let stem = |key: &str| key.split_once('.').map_or(key, |(m, _)| m).to_string();
    // A LoKr of a 3×3 convolution whose second factor holds no whole kernels: the sizes
    // multiply out to the weight's, the kernel positions do not.
    let conv = "down_blocks.0.resnets.0.conv1.weight";
    let unet = Fixtures::load("sd15/pipeline/unet/diffusion_pytorch_model.safetensors");
    let [out, inputs, kh, kw] = unet.tensors[conv].shape[..] else {
        panic!("{conv} is not a 4-axis convolution weight");
    };
    let lokr_conv = "lora_unet_down_blocks_0_resnets_0_conv1";
    let cases = [
        Case {
            what: "a LoCon core with no axes",
            source: locon,
            tensor: (mid.clone(), ones(vec![])),
            says: "not a matrix",
        },
        Case {
            what: "a 1×1 LoCon up factor stored as 3×3",
            source: locon,
            tensor: (up.clone(), ones(vec![up_t.shape[0], up_t.shape[1], 3, 3])),
            says: "do not multiply",
        },
        Case {
            what: "LoHa products of different sizes",
            source: loha,
            tensor: (w2b.clone(), ones(vec![w2b_t.shape[0], w2b_t.shape[1] + 1])),
            says: "different sizes",
        },
        Case {
            what: "LoKr factors of different ranks",
            source: lokr,
            tensor: (w1b.clone(), ones(vec![w1b_t.shape[0] + 1, w1b_t.shape[1]])),
            says: "do not multiply",
        },
        Case {
            what: "a DoRA magnitude of the wrong length",
            source: dora,
            tensor: (magnitude.clone(), ones(vec![1, magnitude_t.shape[1] + 1])),
            says: "DoRA's magnitude",
        },
        Case {
            what: "a LoKr whose second factor holds no whole kernels",
            source: lokr,
            tensor: (format!("{lokr_conv}.lokr_w2"), ones(vec![out, 1])),
            says: "whole kernels",
        },
        Case {
            what: "a trained norm",
            source: locon,
            tensor: (format!("{}.w_norm", stem(&up)), ones(vec![up_t.shape[0]])),
            says: "does not merge",
        },
    ];
    let mut model = load(
        &reference("sd15/pipeline"),
        &LoadOptions::new(Device::flex(), Precision::F32),
    )
    .unwrap();
    let watched = "down_blocks.0.attentions.1.proj_in.weight";
    let before = read_weight(&model, Network::Unet, watched).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (i, case) in cases.into_iter().enumerate() {
        let file = dir.path().join(format!("case{i}.safetensors"));
        let (name, value) = case.tensor;
        // A tensor the file has is replaced; one it lacks is added (with the LoKr's first
        // factor, for the convolution).
        let mut replacement = None;
        let mut extra = Vec::new();
        if Fixtures::load(case.source).tensors.contains_key(&name) {
            replacement = Some(value);
        } else {
            if name.starts_with(lokr_conv) {
                let w1 = ones(vec![1, inputs * kh * kw]);
                extra.push((format!("{lokr_conv}.lokr_w1"), w1));
            }
            extra.push((name.clone(), value));
        }
        let edit = |n: &str, t: &mut Fixture| {
            if n == name
                && let Some(v) = replacement.take()
            {
                *t = v;
            }
            true
        };
        write_edited(case.source, &file, edit, extra);
        let spec = LoraSpec {
            path: file,
            text_encoder: 1.0,
            unet: 1.0,
        };
        let err = set(&mut model, &[spec]).unwrap_err().to_string();
        let named = err.contains(&name) || err.contains(&stem(&name));
        assert!(named && err.contains(case.says), "{}: {err}", case.what);
        assert_eq!(
            read_weight(&model, Network::Unet, watched).unwrap(),
            before,
            "{}: the model keeps its weights",
            case.what
        );
    }
}
