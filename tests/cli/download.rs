//! `ember download` against a local HTTP server serving the reference checkpoint: success,
//! a connection dropped mid-way and resumed (in the same run and in the next), a wrong hash,
//! 404, a web page instead of a model, a lying length, a Civitai-style redirect, a full disk,
//! and a slow download cancelled. Never a half file under the final name.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ember_app::download::{self, Failure, Options};
use ember_tests::http_server::{Behaviour, serve};
use ember_tests::reference;

use crate::{arg, ember};

fn model_bytes() -> Vec<u8> {
    std::fs::read(reference("sd15/checkpoint.safetensors")).unwrap()
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn failed(output: &std::process::Output, expected: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "succeeded; expected {expected:?}");
    assert!(
        stderr.starts_with("error:") && stderr.contains(expected),
        "expected {expected:?} in: {stderr}"
    );
}

#[test]
fn a_download_is_checked_named_and_resumed_after_a_drop() {
    let bytes = model_bytes();
    let sha = download::sha256_file(&reference("sd15/checkpoint.safetensors")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("models");

    // Dropped twice after 1 MB: the same run resumes with Range requests.
    let server = serve(
        bytes.clone(),
        Behaviour::DropAfter {
            bytes: 1 << 20,
            times: 2,
        },
    );
    let url = server.url("/model.safetensors");
    let out = ember(
        dir.path(),
        &["download", &url, "--to", &arg(&to), "--sha256", &sha],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let saved = to.join("model.safetensors");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), arg(&saved));
    assert_eq!(std::fs::read(&saved).unwrap(), bytes);
    assert_eq!(files_in(&to), ["model.safetensors"], "no .part left");
    let requests = server.requests();
    assert_eq!(
        requests,
        [
            "GET /model.safetensors",
            "GET /model.safetensors bytes=1048576-",
            "GET /model.safetensors bytes=2097152-",
        ]
    );

    // A second download of the same file never replaces it.
    let again = ember(dir.path(), &["download", &url, "--to", &arg(&to)]);
    failed(&again, "already exists");
    assert_eq!(std::fs::read(&saved).unwrap(), bytes);
}

#[test]
fn a_download_that_keeps_dropping_resumes_in_the_next_run() {
    let bytes = model_bytes();
    let dir = tempfile::tempdir().unwrap();
    // 1 MB, then nothing more: five fruitless tries in a row end the run.
    let server = serve(
        bytes.clone(),
        Behaviour::DropAfterThenStall { bytes: 1 << 20 },
    );
    let url = server.url("/model.safetensors");
    let out = ember(dir.path(), &["download", &url, "--to", "."]);
    failed(&out, "run the same download again to resume");
    assert!(!dir.path().join("model.safetensors").exists());
    let part = std::fs::metadata(dir.path().join("model.safetensors.part")).unwrap();
    assert_eq!(part.len(), 1 << 20);
    assert_eq!(server.requests().len(), 6, "{:?}", server.requests());

    // The same URL working again: the next run asks only for the rest.
    server.set_behaviour(Behaviour::Serve);
    let out = ember(dir.path(), &["download", &url, "--to", "."]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(server.requests(), ["GET /model.safetensors bytes=1048576-"]);
    assert_eq!(
        std::fs::read(dir.path().join("model.safetensors")).unwrap(),
        bytes
    );
    assert!(!dir.path().join("model.safetensors.part.source").exists());
}

#[test]
fn bad_downloads_fail_with_one_line_and_leave_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let server = serve(model_bytes(), Behaviour::Serve);
    let wrong = "0".repeat(64);
    let cases: [(Vec<String>, &str); 5] = [
        (
            vec![server.url("/model.safetensors"), "--sha256".into(), wrong],
            "SHA-256",
        ),
        (
            vec![server.url("/nothing.safetensors")],
            "does not exist (404)",
        ),
        (vec![server.url("/page")], "web page"),
        (
            vec!["ftp://127.0.0.1/model.safetensors".into()],
            "not an HTTP(S) address",
        ),
        (vec!["sd99".into()], "neither a URL nor a known model"),
    ];
    for (args, expected) in cases {
        let mut argv = vec!["download".to_string()];
        argv.extend(args);
        argv.extend(["--to".into(), "out".into()]);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        failed(&ember(d, &argv), expected);
        assert!(
            files_in(&d.join("out")).is_empty(),
            "{expected}: {:?}",
            files_in(&d.join("out"))
        );
    }

    // A server that announces (and sends) less than the file: not a usable model, removed.
    let short = serve(model_bytes(), Behaviour::ShortLength { by: 1000 });
    failed(
        &ember(
            d,
            &["download", &short.url("/model.safetensors"), "--to", "out"],
        ),
        "not a usable model file",
    );
    assert!(files_in(&d.join("out")).is_empty());

    // Not enough disk (simulated): refused before anything is written.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(["download", &server.url("/model.safetensors"), "--to", "out"])
        .current_dir(d)
        .env("EMBER_FREE_DISK", "1M")
        .output()
        .unwrap();
    failed(&out, "not enough disk space");
    assert!(files_in(&d.join("out")).is_empty());
}

#[test]
fn a_civitai_style_redirect_names_the_file_from_its_disposition() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(model_bytes(), Behaviour::Serve);
    let out = ember(
        dir.path(),
        &["download", &server.url("/api/download/1"), "--to", "m"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        files_in(&dir.path().join("m")),
        ["civitai-model.safetensors"]
    );
    assert_eq!(
        server.requests(),
        ["GET /api/download/1", "GET /files/abc?sig=1"]
    );
}

#[test]
fn a_slow_download_is_cancelled_promptly_and_keeps_its_part() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        model_bytes(),
        Behaviour::Slow {
            chunk: 64 << 10,
            pause: Duration::from_millis(50),
        },
    );
    let target = download::resolve(&server.url("/model.safetensors"), None).unwrap();
    let cancel = Arc::new(AtomicBool::new(false));
    let options = Options {
        cancel: cancel.clone(),
        ..Options::new(dir.path().to_path_buf())
    };
    let started = Instant::now();
    let mut cancelled_at = None;
    let result = download::download(&target, &options, &mut |p| {
        assert!(p.total == Some(13_607_608));
        if p.done > 256 << 10 && cancelled_at.is_none() {
            cancel.store(true, Ordering::Relaxed);
            cancelled_at = Some(Instant::now());
        }
    });
    assert_eq!(result, Err(Failure::Cancelled));
    let stop = cancelled_at.unwrap().elapsed();
    assert!(
        stop < Duration::from_secs(2),
        "stopped {stop:?} after the cancel"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(
        files_in(dir.path()),
        ["model.safetensors.part", "model.safetensors.part.source"]
    );
}

#[test]
fn a_git_blob_check_keeps_the_right_file_and_removes_a_wrong_one() {
    // The catalogue's TAESD decoders are checked by git blob id; `git hash-object` gives
    // ce01362… for "hello\n", as this does.
    let hello = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(hello.path(), b"hello\n").unwrap();
    assert_eq!(
        download::git_blob_id(hello.path()).unwrap(),
        "ce013625030ba8dba906f756967f9e9ca394464a"
    );
    let catalogued = download::resolve("taesdxl", None).unwrap();
    assert!(catalogued.git_blob.is_some() && catalogued.sha256.is_none());
    let file = ember_tests::extra("taesd/taesd_decoder.pth");
    let bytes = std::fs::read(&file).unwrap();
    for (id, kept) in [
        (download::git_blob_id(&file).unwrap(), true),
        ("0".repeat(40), false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let server = serve(bytes.clone(), Behaviour::Serve);
        let target = download::Target {
            url: server.url("/model.safetensors"),
            file_name: Some("taesd_decoder.pth".into()),
            sha256: None,
            git_blob: Some(id),
            size: None,
        };
        let result = download::download(&target, &Options::new(dir.path().into()), &mut |_| {});
        if kept {
            assert_eq!(result, Ok(dir.path().join("taesd_decoder.pth")));
            assert_eq!(files_in(dir.path()), ["taesd_decoder.pth"]);
        } else {
            assert!(
                matches!(&result, Err(Failure::Failed(m)) if m.contains("git blob id")),
                "{result:?}"
            );
            assert_eq!(files_in(dir.path()), Vec::<String>::new());
        }
    }
}
