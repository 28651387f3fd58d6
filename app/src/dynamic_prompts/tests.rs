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
    assert_eq!(outcomes("{5$$a}", &[]).len(), 1);
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
        assert!(!is_dynamic(typed), "{typed}");
    }
    assert_eq!(text(r"\{a|b\}", 1), "{a|b}");
    // A group inside plain braces is still a group; the braces stay.
    assert_eq!(
        outcomes("{{a|b}}", &[]),
        ["{a}".to_string(), "{b}".to_string()].into()
    );
    assert!(is_dynamic("{a|b}"));
    assert!(is_dynamic("__colors__"));
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
