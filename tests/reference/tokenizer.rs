//! CLIP tokenization: every prompt of `tokenizer/golden_tokens.json`, exact ids, with the
//! EOS-padded (SD 1.x) and `!`-padded (SD 2.x) tokenizers.

use ember_tests::{Json, json, reference};
use inference::text::{ClipTokenizer, PadToken};

fn ids(v: &Json) -> Vec<u32> {
    v.as_array()
        .expect("id list")
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn prompts() -> Vec<Json> {
    let golden = json("tokenizer/golden_tokens.json");
    let prompts = golden["prompts"].as_array().expect("prompts").clone();
    assert!(!prompts.is_empty());
    prompts
}

#[test]
fn eos_padded_tokenizer_matches_every_prompt() {
    let tok = ClipTokenizer::bundled(PadToken::EndOfText).unwrap();
    for p in prompts() {
        let text = p["prompt"].as_str().unwrap();
        let what = format!("{} {:?}", p["category"], text);
        let strings = tok.token_strings(text).unwrap();
        let expected: Vec<String> = p["bpe_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        assert_eq!(strings, expected, "bpe tokens of {what}");
        assert_eq!(
            tok.full_ids(text).unwrap(),
            ids(&p["full_ids"]),
            "full ids of {what}"
        );
        let encoded = tok.encode(text).unwrap();
        assert_eq!(
            encoded.ids,
            ids(&p["input_ids_pad_eos"]),
            "77 ids of {what}"
        );
        let n_tokens = p["n_tokens"].as_u64().unwrap() as usize;
        assert_eq!(
            encoded.truncated_tokens,
            n_tokens.saturating_sub(75),
            "truncation of {what}"
        );
        let chunks: Vec<Vec<u32>> = p["chunks_75_pad_eos"]
            .as_array()
            .unwrap()
            .iter()
            .map(ids)
            .collect();
        assert_eq!(tok.chunks(text).unwrap(), chunks, "chunks of {what}");
    }
}

#[test]
fn exclamation_padded_tokenizer_matches_every_prompt() {
    let tok = ClipTokenizer::bundled(PadToken::Exclamation).unwrap();
    for p in prompts() {
        let text = p["prompt"].as_str().unwrap();
        let what = format!("{} {:?}", p["category"], text);
        assert_eq!(
            tok.full_ids(text).unwrap(),
            ids(&p["full_ids_pad_zero_tokenizer"]),
            "full ids of {what}"
        );
        assert_eq!(
            tok.encode(text).unwrap().ids,
            ids(&p["input_ids_pad_zero"]),
            "77 ids of {what}"
        );
    }
}

#[test]
fn pipeline_folders_pick_their_pad_token() {
    let sd15 = ClipTokenizer::from_folder(&reference("sd15/pipeline/tokenizer")).unwrap();
    assert_eq!(sd15.pad_token(), PadToken::EndOfText);
    let sd2 = ClipTokenizer::from_folder(&reference("sd2v/pipeline/tokenizer")).unwrap();
    assert_eq!(sd2.pad_token(), PadToken::Exclamation);
    // The folder's files give the same ids as the bundled vocabulary.
    let bundled = ClipTokenizer::bundled(PadToken::EndOfText).unwrap();
    for p in prompts() {
        let text = p["prompt"].as_str().unwrap();
        assert_eq!(sd15.encode(text).unwrap(), bundled.encode(text).unwrap());
    }
}
