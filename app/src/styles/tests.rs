//! Styles against what A1111's own `modules/styles.py` made of the same files and prompts
//! (`tests/extra/styles_cases.json`, from `tests/extra/make_styles_cases.py`), and the
//! cases where Ember deliberately differs.

use std::collections::BTreeMap;

use serde_json::Value;

use super::*;

fn cases() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/extra/styles_cases.json"
    );
    let text = std::fs::read_to_string(path).expect("tests/extra/styles_cases.json");
    serde_json::from_str(&text).unwrap()
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap()
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|n| text(n).to_string())
        .collect()
}

/// Each file of the cases, as Ember reads it.
fn books(cases: &Value) -> BTreeMap<String, StyleBook> {
    let files = cases["files"].as_object().unwrap();
    assert!(!files.is_empty());
    files
        .iter()
        .map(|(name, file)| {
            let book = StyleBook::parse(text(&file["csv"]).as_bytes())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            (name.clone(), book)
        })
        .collect()
}

#[test]
fn files_read_as_a1111_reads_them_and_are_written_byte_for_byte_as_it_writes_them() {
    let cases = cases();
    let books = books(&cases);
    for (name, file) in cases["files"].as_object().unwrap() {
        let expected: Vec<Style> = file["styles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| Style {
                name: text(&s[0]).into(),
                prompt: text(&s[1]).into(),
                negative_prompt: text(&s[2]).into(),
            })
            .collect();
        assert_eq!(books[name].styles(), expected, "{name}");
        let written = String::from_utf8(books[name].to_csv()).unwrap();
        assert_eq!(written, text(&file["written"]), "{name}");
        assert_eq!(StyleBook::parse(written.as_bytes()).unwrap(), books[name]);
    }
}

#[test]
fn styles_make_the_prompts_a1111_makes() {
    let cases = cases();
    let books = books(&cases);
    let apply = cases["apply"].as_array().unwrap();
    assert!(!apply.is_empty());
    for case in apply {
        let made = books[text(&case["file"])]
            .apply(
                &names(&case["styles"]),
                text(&case["prompt"]),
                text(&case["negative_prompt"]),
            )
            .unwrap();
        let expected = (
            text(&case["made_prompt"]).to_string(),
            text(&case["made_negative_prompt"]).to_string(),
        );
        assert_eq!(made, expected, "{case}");
    }
}

/// Where what A1111 restores would make the image's prompts again, Ember restores the same;
/// where it would not (`a fox masterpiece, best quality` taken for `a fox ` and the style
/// `masterpiece, best quality`, which make `a fox, masterpiece, best quality`), Ember takes
/// no style off, so generating again makes the image's own prompts.
#[test]
fn restored_prompts_lose_their_styles_as_in_a1111_unless_that_changes_them() {
    let cases = cases();
    let books = books(&cases);
    let extract = cases["extract"].as_array().unwrap();
    let mut differing = 0;
    for case in extract {
        let book = &books[text(&case["file"])];
        let (prompt, negative) = (text(&case["prompt"]), text(&case["negative_prompt"]));
        let found = book.extract(prompt, negative);
        if case["a1111_makes_it_again"].as_bool().unwrap() {
            let expected = Extracted {
                names: names(&case["a1111_styles"]),
                prompt: text(&case["a1111_prompt"]).into(),
                negative_prompt: text(&case["a1111_negative_prompt"]).into(),
            };
            assert_eq!(found, expected, "{case}");
        } else {
            differing += 1;
            assert_eq!(found.names, Vec::<String>::new(), "{case}");
        }
        let again = book
            .apply(&found.names, &found.prompt, &found.negative_prompt)
            .unwrap();
        assert_eq!(
            again,
            (prompt.trim().to_string(), negative.trim().to_string()),
            "{case}"
        );
    }
    assert!(differing > 0, "the cases include one where Ember differs");
}

#[test]
fn a_style_that_changes_nothing_is_never_found() {
    let book = StyleBook::parse(b"name,prompt,negative_prompt\nSame,{prompt},\nEmpty,,\n").unwrap();
    let found = book.extract("a fox", "ugly");
    assert_eq!(found.names, Vec::<String>::new());
    assert_eq!(
        (found.prompt.as_str(), found.negative_prompt.as_str()),
        ("a fox", "ugly")
    );
}

#[test]
fn bad_files_say_what_is_wrong() {
    let no_name = StyleBook::parse(b"title,prompt\na,b\n").unwrap_err();
    assert!(no_name.contains("`name`"), "{no_name}");
    let no_prompt = StyleBook::parse(b"name,negative_prompt\na,b\n").unwrap_err();
    assert!(no_prompt.contains("`prompt`"), "{no_prompt}");
    let not_utf8 = StyleBook::parse(b"name,prompt\n\xff\xfe,b\n").unwrap_err();
    assert!(not_utf8.contains("line 2"), "{not_utf8}");
    let unknown = StyleBook::default()
        .apply(&["Gone".into()], "a", "b")
        .unwrap_err();
    assert!(unknown.contains("\"Gone\""), "{unknown}");
}

#[test]
fn writing_keeps_the_file_it_replaces_and_a_missing_file_is_no_styles() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config").join(FILE_NAME);
    assert_eq!(StyleBook::read(&path).unwrap(), StyleBook::default());
    let mut book = StyleBook::default();
    book.put(Style {
        name: "One".into(),
        prompt: "a, {prompt}".into(),
        negative_prompt: String::new(),
    });
    book.write(&path).unwrap();
    let first = std::fs::read(&path).unwrap();
    assert_eq!(StyleBook::read(&path).unwrap(), book);
    book.put(Style {
        name: "Two".into(),
        prompt: "b".into(),
        negative_prompt: "c".into(),
    });
    book.write(&path).unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("config/styles.csv.bak")).unwrap(),
        first
    );
    assert_eq!(StyleBook::read(&path).unwrap().styles().len(), 2);
}

#[test]
fn merging_a_file_counts_new_and_replaced_styles() {
    let mut mine = StyleBook::parse(b"name,prompt\nA,a\nB,b\n").unwrap();
    let theirs = StyleBook::parse(b"name,prompt\nB,bee\nC,c\n").unwrap();
    assert_eq!(mine.merge(theirs), (1, 1));
    let prompts: Vec<&str> = mine.styles().iter().map(|s| s.prompt.as_str()).collect();
    assert_eq!(prompts, ["a", "bee", "c"]);
    assert_eq!(mine.remove("A").map(|s| s.prompt), Some("a".into()));
    assert!(mine.get("A").is_none());
}
