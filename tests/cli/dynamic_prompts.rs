//! `ember generate` with dynamic prompts: `{a|b}` and `__wildcard__` resolved from the seed,
//! the image recording the prompt it got (and its template), the same as typing that prompt;
//! `--no-dynamic-prompts` keeps them as text. (The syntax: `app/src/dynamic_prompts/tests.rs`.)

use std::path::Path;

use ember_tests::reference;
use inference::imaging;
use inference::metadata::Parameters;

use crate::{arg, ember, parameters};

fn run(d: &Path, prompt: &str, out: &str, extra: &[&str]) -> Parameters {
    let model = arg(&reference("sd15/pipeline"));
    let mut args = vec![
        "generate", "--model", &model, "--prompt", prompt, "--steps", "1", "--seed", "5",
        "--width", "32", "--height", "32", "--out", out,
    ];
    args.extend_from_slice(extra);
    let output = ember(d, &args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    parameters(&d.join(out))
}

#[test]
fn variants_and_wildcards_resolve_from_the_seed_as_if_typed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wildcards = d.join("my wildcards");
    std::fs::create_dir(&wildcards).unwrap();
    std::fs::write(wildcards.join("animal.txt"), "fox\nowl\n").unwrap();
    let template = "a {red|blue} __animal__";
    let dirs = arg(&wildcards);
    let made = run(d, template, "made.png", &["--wildcards", &dirs]);
    let options = ["a red fox", "a red owl", "a blue fox", "a blue owl"];
    assert!(options.contains(&made.prompt.as_str()), "{}", made.prompt);
    assert_eq!(made.get("Template"), Some(template));
    // The same seed, the same choice; and the image is the typed prompt's.
    let again = run(d, template, "again.png", &["--wildcards", &dirs]);
    assert_eq!(again.prompt, made.prompt);
    let typed = run(d, &made.prompt.clone(), "typed.png", &[]);
    assert_eq!(typed.get("Template"), None);
    let load = |name: &str| imaging::load_rgb(&d.join(name), None).unwrap();
    assert_eq!(load("made.png"), load("typed.png"));

    let literal = run(d, template, "literal.png", &["--no-dynamic-prompts"]);
    assert_eq!(literal.prompt, template);
    assert_eq!(literal.get("Template"), None);
}
