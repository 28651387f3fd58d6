//! A1111's prompt syntax (`../shared/reference/prompt/`, checked against A1111's own code):
//! emphasis parsing, long-prompt chunking with weights, and the conditioning with each
//! emphasis mode on the sd15 text encoder.

use ember_tests::{json, reference};
use inference::text::chunks::chunk;
use inference::text::emphasis::parse;
use inference::text::ClipTokenizer;

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
        for ((text, _), ids) in parsed.iter().zip(case["fragment_token_ids"].as_array().unwrap()) {
            let expected: Vec<u32> = ids
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            if text != "BREAK" {
                assert_eq!(tokenizer.tokens(text).unwrap(), expected, "{name}: {text:?}");
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
