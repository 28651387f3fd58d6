//! The dynamic-prompt syntax: what each form chooses, that a seed fixes the choice, and
//! what is left as typed.

use std::collections::BTreeSet;

use super::*;

fn text(template: &str, seed: u64) -> String {
    resolve(template, seed, 0, &[]).unwrap().text
}

/// Every result the seeds 0..300 give.
fn outcomes(template: &str, dirs: &[PathBuf]) -> BTreeSet<String> {
    (0..300)
        .map(|seed| resolve(template, seed, 0, dirs).unwrap().text)
        .collect()
}

#[test]
fn a_group_chooses_one_option_by_the_seed() {
    let seen = outcomes("a {red|green|blue} fox", &[]);
    let expected: BTreeSet<String> = ["a red fox", "a green fox", "a blue fox"]
        .map(String::from)
        .into();
    assert_eq!(seen, expected);
    assert_eq!(
        text("a {red|green|blue} fox", 7),
        text("a {red|green|blue} fox", 7)
    );
    // The negative prompt's stream chooses on its own.
    let streams: BTreeSet<String> = (0..40)
        .map(|s| resolve("{a|b|c|d}", 3, s, &[]).unwrap().text)
        .collect();
    assert!(streams.len() > 1);
    assert!(outcomes("{a|{b|c}}", &[]).len() == 3);
}

#[test]
fn counts_separators_and_weights() {
    for result in outcomes("{2$$a|b|c}", &[]) {
        let parts: Vec<&str> = result.split(", ").collect();
        assert_eq!(parts.len(), 2, "{result}");
        assert_ne!(parts[0], parts[1], "two different ones: {result}");
    }
    for result in outcomes("{2$$ and $$a|b|c}", &[]) {
        assert_eq!(result.split(" and ").count(), 2, "{result}");
    }
    let sizes: BTreeSet<usize> = outcomes("{1-3$$a|b|c}", &[])
        .iter()
        .map(|r| r.split(", ").count())
        .collect();
    assert_eq!(sizes, [1, 2, 3].into());
    assert_eq!(outcomes("{0::a|b}", &[]), ["b".to_string()].into());
    // More than there are: all of them.
    for result in outcomes("{5$$a|b}", &[]) {
        assert!(result == "a, b" || result == "b, a", "{result}");
    }
    let sizes = |template: &str| -> BTreeSet<usize> {
        outcomes(template, &[])
            .iter()
            .map(|r| r.split(", ").count())
            .collect()
    };
    assert_eq!(sizes("{-2$$a|b|c}"), [1, 2].into());
    assert_eq!(sizes("{2-$$a|b|c}"), [2, 3].into());
    // Weight 3 to 1: about three quarters of the seeds choose `a`.
    let a = (0..400).filter(|&s| text("{3::a|b}", s) == "a").count();
    assert!((250..350).contains(&a), "{a} of 400");
    // A weight of 0 is never chosen, even to make up a count.
    assert_eq!(outcomes("{2$$1::a|0::b}", &[]), ["a".to_string()].into());
    assert!(resolve("{x$$a|b}", 1, 0, &[]).unwrap_err().contains("`x`"));
}

#[test]
fn plain_braces_escapes_and_a1111_syntax_stay_as_typed() {
    for typed in [
        "{masterpiece}, {{best quality}}",
        "[cat|dog] in a (field:1.2) <lora:x:0.5>",
        "an open { brace",
        "snake_case__words",
    ] {
        assert_eq!(text(typed, 1), typed);
        assert!(!is_dynamic(typed).unwrap(), "{typed}");
    }
    assert_eq!(text(r"\{a|b\}", 1), "{a|b}");
    // A group inside plain braces is still a group; the braces stay.
    assert_eq!(
        outcomes("{{a|b}}", &[]),
        ["{a}".to_string(), "{b}".to_string()].into()
    );
    assert!(is_dynamic("{a|b}").unwrap());
    assert!(is_dynamic("__colors__").unwrap());
    // An escape alone is resolved too: the braces reach the prompt without backslashes.
    assert!(is_dynamic(r"\{a\}").unwrap());
    // A1111's alternation inside a group is one option.
    assert_eq!(
        outcomes("{red|[cat|dog]}", &[]),
        ["[cat|dog]".to_string(), "red".to_string()].into()
    );
    // Tags and weights inside options are kept whole.
    let seen = outcomes("{<lora:a:1>|(b:1.2)}", &[]);
    assert_eq!(
        seen,
        ["(b:1.2)".to_string(), "<lora:a:1>".to_string()].into()
    );
}

#[test]
fn wildcards_come_from_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    std::fs::write(
        d.join("colors.txt"),
        "\u{feff}red\n# a comment\n\n  blue  \n",
    )
    .unwrap();
    std::fs::create_dir(d.join("animals")).unwrap();
    std::fs::write(
        d.join("animals/pets.txt"),
        "__colors__ cat\n{old|young} dog\n",
    )
    .unwrap();
    std::fs::write(d.join("loop.txt"), "again __loop__\n").unwrap();
    let dirs = [PathBuf::from("/nowhere"), d];
    let colors = outcomes("a __colors__ fox", &dirs);
    assert_eq!(
        colors,
        ["a blue fox".to_string(), "a red fox".to_string()].into()
    );
    let pets = outcomes("__animals/pets__", &dirs);
    let expected: BTreeSet<String> = ["red cat", "blue cat", "old dog", "young dog"]
        .map(String::from)
        .into();
    assert_eq!(pets, expected);
    let missing = resolve("a __nothing__ here", 1, 0, &dirs).unwrap();
    assert_eq!(missing.text, "a __nothing__ here");
    assert!(missing.warnings[0].contains("nothing.txt"), "{missing:?}");
    assert!(
        resolve("__../colors__", 1, 0, &dirs)
            .unwrap()
            .warnings
            .len()
            == 1
    );
    assert!(
        resolve("__loop__", 1, 0, &dirs)
            .unwrap_err()
            .contains("nests")
    );
}

#[test]
fn a_request_resolves_per_image_and_says_what_is_wrong() {
    use inference::api::Variation;
    let request = |seed: u64, variation: Option<u64>| {
        let mut r = GenerateRequest {
            prompt: "a {red|green|blue|gold|pink} fox".into(),
            negative_prompt: "plain".into(),
            prompt_2: Some("a {red|green|blue|gold|pink} fox".into()),
            seed,
            ..GenerateRequest::default()
        };
        r.noise.variation = variation.map(|seed| Variation {
            seed,
            strength: 0.5,
        });
        apply(&mut r, &[]).unwrap();
        r
    };
    let r = request(3, None);
    // Both encoders get the same choice; an untouched prompt records no template.
    assert_eq!(r.prompt_2.as_deref(), Some(r.prompt.as_str()));
    assert_eq!(
        r.metadata_fields,
        [(
            "Template".to_string(),
            "a {red|green|blue|gold|pink} fox".to_string()
        )]
    );
    // A batch with a variation shares its seed; the variation seeds choose.
    let prompts: BTreeSet<String> = (0..20).map(|v| request(3, Some(v)).prompt).collect();
    assert!(prompts.len() > 1);
    let mut bad = GenerateRequest {
        prompt: "{red|blue} {x$$a|b}".into(),
        ..GenerateRequest::default()
    };
    assert!(apply(&mut bad, &[]).unwrap_err().contains("`x`"));
    let deep = format!("{}x{}", "{a|".repeat(100), "}".repeat(100));
    assert!(is_dynamic(&deep).unwrap_err().contains("nest"));
}

#[test]
fn a_literal_prompt_resolves_to_itself() {
    for prompt in [
        "a {red|blue} sign",
        r"a \{red|blue\} sign, \\ and \(escaped\) A1111 brackets",
        r"{2$$a|b|c} and \\{x|y}",
        "{unclosed | brace",
        "no syntax at all (word:1.2)",
    ] {
        let kept = literal(prompt);
        assert_eq!(text(&kept, 7), prompt, "{kept}");
        assert!(!is_dynamic(&kept).unwrap() || kept.contains('\\'), "{kept}");
    }
    // Text without groups is left as typed: plain braces, A1111's escapes.
    for prompt in ["{a}", r"\(x\)", "a | b"] {
        assert_eq!(literal(prompt), prompt);
    }
}
