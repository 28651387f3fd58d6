//! A1111's prompt syntax (`../shared/reference/prompt/`, checked against A1111's own code):
//! emphasis parsing, long-prompt chunking with weights, and the conditioning with each
//! emphasis mode on the sd15 text encoder.

use ember_tests::{json, reference};
use inference::text::ClipTokenizer;
use inference::text::chunks::chunk;
use inference::text::emphasis::parse;

/// A `[[text, weight], ...]` list from the JSON.
fn segments(value: &serde_json::Value) -> Vec<(String, f64)> {
    value
        .as_array()
        .expect("a list of segments")
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().expect("text").to_string(),
                pair[1].as_f64().expect("weight"),
            )
        })
        .collect()
}

#[test]
fn every_attention_case_parses_as_a1111_parses_it() {
    let cases = json("prompt/attention_cases.json");
    let list = cases["cases"].as_array().unwrap();
    assert!(!list.is_empty());
    for case in list {
        let prompt = case["prompt"].as_str().unwrap();
        let parsed = parse(prompt).unwrap_or_else(|e| panic!("{}: {e}", case["name"]));
        let expected = segments(&case["parsed"]);
        assert_eq!(parsed.len(), expected.len(), "{}: {parsed:?}", case["name"]);
        for ((text, weight), (e_text, e_weight)) in parsed.iter().zip(&expected) {
            assert_eq!(text, e_text, "{}", case["name"]);
            assert_eq!(
                weight.to_bits(),
                e_weight.to_bits(),
                "{}: {text:?} weighs {weight}, A1111 {e_weight}",
                case["name"]
            );
        }
    }
    for case in cases["raises"].as_array().unwrap() {
        let prompt = case["prompt"].as_str().unwrap();
        let error = parse(prompt).expect_err(prompt).to_string();
        assert!(error.contains("not a number"), "{error}");
    }
}

#[test]
fn long_prompts_chunk_as_a1111_chunks_them() {
    let cases = json("prompt/chunks.json");
    let tokenizer = ClipTokenizer::from_folder(&reference("sd15/pipeline/tokenizer")).unwrap();
    let list = cases["cases"].as_array().unwrap();
    assert!(!list.is_empty());
    for case in list {
        let name = case["name"].as_str().unwrap();
        let prompt = case["prompt"].as_str().unwrap();
        let parsed = parse(prompt).unwrap();
        let expected_parse = segments(&case["parsed"]);
        assert_eq!(parsed, expected_parse, "{name}");
        for ((text, _), ids) in parsed
            .iter()
            .zip(case["fragment_token_ids"].as_array().unwrap())
        {
            let expected: Vec<u32> = ids
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            if text != "BREAK" {
                assert_eq!(
                    tokenizer.tokens(text).unwrap(),
                    expected,
                    "{name}: {text:?}"
                );
            }
        }
        let chunked = chunk(&tokenizer, &parsed).unwrap();
        assert_eq!(
            chunked.token_count as u64,
            case["token_count"].as_u64().unwrap(),
            "{name}"
        );
        let expected = case["chunks"].as_array().unwrap();
        assert_eq!(chunked.chunks.len(), expected.len(), "{name}");
        assert_eq!(
            chunked.chunks.len() as u64,
            case["n_chunks"].as_u64().unwrap(),
            "{name}"
        );
        for (i, (ours, theirs)) in chunked.chunks.iter().zip(expected).enumerate() {
            let ids: Vec<u32> = theirs["tokens"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            assert_eq!(ours.ids, ids, "{name} chunk {i}");
            let weights: Vec<u64> = theirs["multipliers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap().to_bits())
                .collect();
            let ours: Vec<u64> = ours.multipliers.iter().map(|w| w.to_bits()).collect();
            assert_eq!(ours, weights, "{name} chunk {i}");
        }
    }
}

#[test]
fn weighted_and_long_prompts_condition_the_unet_as_a1111s_do() {
    use burn::tensor::Device;
    use ember_tests::{Fixtures, diff};
    use inference::api::GenerateRequest;
    use inference::device::Precision;
    use inference::pipeline::prompt::encode;
    use inference::text::emphasis::Emphasis;
    use inference::weights::{LoadOptions, load};

    let model = load(
        &reference("sd15/pipeline"),
        &LoadOptions::new(Device::flex(), Precision::F32),
    )
    .unwrap();
    let golden = Fixtures::load("prompt/sd15_conditioning.safetensors");
    let cases = json("prompt/chunks.json");
    for case in cases["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        for (emphasis, suffix) in [
            (Emphasis::Original, "original"),
            (Emphasis::NoNorm, "nonorm"),
            (Emphasis::Ignore, "ignore"),
        ] {
            let request = GenerateRequest {
                prompt: case["prompt"].as_str().unwrap().to_string(),
                emphasis,
                ..GenerateRequest::default()
            };
            let ours = encode(&model, &request, false).unwrap().context;
            check_emphasis_on_a1111s_output(&golden, name, emphasis, suffix, &model.device);
            let expected = golden.get(&format!("{name}_{suffix}"));
            assert_eq!(ours.dims().to_vec(), expected.shape, "{name} {suffix}");
            let ours = inference::device::tensor_to_vec(ours);
            let d = diff(&ours, &expected.f64());
            // "Original" divides by the chunk's mean, which on these random weights can be
            // ten thousand times smaller than its values: the encoder's last-bit rounding is
            // amplified as much. The tolerance grows with that ratio beyond 1000 (the
            // emphasis arithmetic itself is checked exactly below, on A1111's own output).
            let tolerance = if emphasis == Emphasis::Original {
                1e-4 * (amplification(golden.get(&format!("{name}_ignore"))) / 1e3).max(1.0)
            } else {
                1e-4
            };
            if std::env::var_os("EMBER_TEST_VERBOSE").is_some() {
                eprintln!("{name} {suffix}: {d:?} (tolerance {tolerance:.1e})");
            }
            assert!(
                d.max_abs <= tolerance,
                "{name} {suffix}: {d:?}, tolerance {tolerance}"
            );
        }
    }
}

/// The largest ratio of a chunk's mean absolute value to its absolute mean.
fn amplification(plain: &ember_tests::Fixture) -> f64 {
    let values = plain.f64();
    let per_chunk = 77 * plain.shape[2];
    values
        .chunks(per_chunk)
        .map(|c| {
            let mean = c.iter().sum::<f64>() / c.len() as f64;
            let mean_abs = c.iter().map(|v| v.abs()).sum::<f64>() / c.len() as f64;
            mean_abs / mean.abs().max(f64::MIN_POSITIVE)
        })
        .fold(1.0, f64::max)
}

/// Ember's emphasis on A1111's unweighted chunk outputs gives A1111's weighted ones.
fn check_emphasis_on_a1111s_output(
    golden: &ember_tests::Fixtures,
    name: &str,
    emphasis: inference::text::emphasis::Emphasis,
    suffix: &str,
    device: &burn::tensor::Device,
) {
    use burn::tensor::{Tensor, TensorData};
    use inference::pipeline::prompt::weigh;
    let plain = golden.get(&format!("{name}_ignore"));
    let weights = golden.get(&format!("{name}_multipliers")).f64();
    let expected = golden.get(&format!("{name}_{suffix}")).f64();
    let width = plain.shape[2];
    let values = plain.f32();
    let chunks = values.len() / (77 * width);
    for c in 0..chunks {
        let z = Tensor::<3>::from_data(
            TensorData::new(
                values[c * 77 * width..(c + 1) * 77 * width].to_vec(),
                [1, 77, width],
            ),
            device,
        );
        let ours =
            inference::device::tensor_to_vec(weigh(z, &weights[c * 77..(c + 1) * 77], emphasis));
        let d = ember_tests::diff(&ours, &expected[c * 77 * width..(c + 1) * 77 * width]);
        assert!(
            d.max_abs <= 1e-6,
            "{name} {suffix} chunk {c} from A1111's output: {d:?}"
        );
    }
}

/// The context `encode` gives for a prompt (and negative, with guidance).
fn context(
    model: &inference::model::Model,
    prompt: &str,
    negative: Option<&str>,
) -> burn::tensor::Tensor<3> {
    let request = inference::api::GenerateRequest {
        prompt: prompt.into(),
        negative_prompt: negative.unwrap_or("").into(),
        ..inference::api::GenerateRequest::default()
    };
    inference::pipeline::prompt::encode(model, &request, negative.is_some())
        .unwrap()
        .context
}

#[test]
fn break_chunks_encode_alone_and_a_short_negative_is_padded_with_the_empty_prompt() {
    use burn::tensor::Device;
    use inference::device::{Precision, tensor_to_vec};
    use inference::weights::{LoadOptions, load};

    for family in ["sd15", "sd2v", "sdxl"] {
        let model = load(
            &reference(&format!("{family}/pipeline")),
            &LoadOptions::new(Device::flex(), Precision::F32),
        )
        .unwrap();
        let both = context(&model, "a red fox BREAK a snowy forest", None);
        let [_, tokens, width] = both.dims();
        assert_eq!(tokens, 154, "{family}: two chunks");
        let first = context(&model, "a red fox", None);
        let second = context(&model, "a snowy forest", None);
        let halves = [
            tensor_to_vec(both.clone().narrow(1, 0, 77)),
            tensor_to_vec(both.narrow(1, 77, 77)),
        ];
        assert_eq!(halves[0], tensor_to_vec(first), "{family}: chunk 1");
        assert_eq!(halves[1], tensor_to_vec(second), "{family}: chunk 2");

        // A negative of one chunk beside a prompt of two: its second chunk is the empty
        // prompt's (A1111 pads the shorter side so).
        let guided = context(&model, "a red fox BREAK a snowy forest", Some("blurry"));
        assert_eq!(guided.dims(), [2, 154, width], "{family}");
        let empty = context(&model, "", None);
        let negative_tail = tensor_to_vec(guided.clone().narrow(0, 0, 1).narrow(1, 77, 77));
        assert_eq!(negative_tail, tensor_to_vec(empty), "{family}: padding");
        let negative_head = tensor_to_vec(guided.narrow(0, 0, 1).narrow(1, 0, 77));
        assert_eq!(
            negative_head,
            tensor_to_vec(context(&model, "blurry", None)),
            "{family}"
        );
    }
}

#[test]
fn long_and_weighted_prompts_run_through_every_family() {
    use burn::tensor::Device;
    use inference::device::Precision;
    use inference::pipeline::generate;
    use inference::weights::{LoadOptions, load};
    use std::ops::ControlFlow;

    let long = "(a lighthouse:1.3) on a cliff, [fog], ".repeat(12);
    for family in ["sd15", "sd2v", "sdxl"] {
        let model = load(
            &reference(&format!("{family}/pipeline")),
            &LoadOptions::new(Device::flex(), Precision::F32),
        )
        .unwrap();
        let mut request = model.request(&long, 5);
        request.steps = 2;
        request.negative_prompt = "blurry".into();
        let out = generate(&model, &request, &mut |_| ControlFlow::Continue(()))
            .unwrap_or_else(|e| panic!("{family}: {e}"));
        assert_eq!(out.images.len(), 1, "{family}");

        request.prompt = "x ".repeat(75 * 21);
        let error = generate(&model, &request, &mut |_| ControlFlow::Continue(()))
            .err()
            .unwrap_or_else(|| panic!("{family}: 21 chunks must be refused"));
        assert!(error.to_string().contains("21 chunks"), "{error}");
        request.prompt = format!("(x:{})", "9".repeat(400));
        let error = generate(&model, &request, &mut |_| ControlFlow::Continue(()))
            .err()
            .unwrap_or_else(|| panic!("{family}: an infinite weight must be refused"));
        assert!(error.to_string().contains("out of range"), "{error}");
    }
}

#[test]
fn prompt_editing_and_alternation_schedule_as_a1111_does() {
    use inference::text::schedule::prompt_schedule;
    let cases = json("prompt/attention_cases.json");
    let doctests = cases["schedule_doctests"].as_array().unwrap();
    assert!(!doctests.is_empty());
    for case in doctests {
        let prompt = case["prompt"].as_str().unwrap();
        let steps = case["base_steps"].as_u64().unwrap() as usize;
        let hires = case["hires_steps"].as_u64().map(|h| h as usize);
        let ours = prompt_schedule(prompt, steps, hires);
        let expected: Vec<(usize, String)> = case["a1111_returns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e[0].as_u64().unwrap() as usize,
                    e[1].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(ours, expected, "{prompt:?}");
        // Each step's text then parses for emphasis as A1111 parsed it.
        for ((_, text), parsed) in ours.iter().zip(case["parsed_per_step"].as_array().unwrap()) {
            assert_eq!(
                parse(text).unwrap(),
                segments(&parsed[1]),
                "{prompt:?} -> {text:?}"
            );
        }
    }
}
