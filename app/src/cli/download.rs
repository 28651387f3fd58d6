//! `ember download URL|NAME [--to DIR]`: a model from Hugging Face, Civitai, any HTTP(S) URL,
//! or the catalogue of well-known checkpoints, resumed, checked and named only when whole.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::Args;

use crate::download::{self, Options, Progress, catalogue};

/// `ember download` options.
#[derive(Args, Debug)]
pub struct DownloadArgs {
    /// An HTTP(S) URL (Hugging Face, Civitai, …) or a catalogue name: sd15, sdxl-base,
    /// sdxl-refiner, sdxl-vae-fp16-fix (`--list` shows them).
    #[arg(required_unless_present = "list")]
    pub what: Option<String>,
    /// The folder to save in (default: the current folder).
    #[arg(long)]
    pub to: Option<PathBuf>,
    /// The file's SHA-256 (catalogue models have theirs); a mismatch removes the file.
    #[arg(long)]
    pub sha256: Option<String>,
    /// List the catalogue.
    #[arg(long)]
    pub list: bool,
}

pub fn run(args: &DownloadArgs) -> Result<(), String> {
    if args.list {
        for e in &catalogue::CATALOGUE {
            println!(
                "{:<18} {:>14}  {}  ({})",
                e.name,
                e.size_text(),
                e.title,
                e.license
            );
        }
        return Ok(());
    }
    let what = args.what.as_deref().unwrap_or_default();
    let target = download::resolve(what, args.sha256.as_deref())?;
    let dir = args.to.clone().unwrap_or_else(|| PathBuf::from("."));
    let options = Options {
        cancel: Arc::new(AtomicBool::new(false)),
        ..Options::new(dir)
    };
    let terminal = std::io::stderr().is_terminal();
    let mut last = std::time::Instant::now();
    let mut on_progress = |p: &Progress| {
        if terminal && last.elapsed().as_millis() >= 200 {
            last = std::time::Instant::now();
            eprint!("\r\x1b[2K{}", progress_line(p));
            let _ = std::io::stderr().flush();
        }
    };
    let result = download::download(&target, &options, &mut on_progress);
    if terminal {
        eprintln!();
    }
    let path = result.map_err(|e| e.to_string())?;
    println!("{}", path.display());
    Ok(())
}

/// `1.2 GiB of 6.5 GiB · 45.0 MiB/s · 2 min 01 s left`.
pub fn progress_line(p: &Progress) -> String {
    let human = inference::memory::human_bytes;
    let mut line = match p.total {
        Some(total) => format!("{} of {}", human(p.done), human(total)),
        None => human(p.done),
    };
    if p.speed > 0.0 {
        line.push_str(&format!(" · {}/s", human(p.speed as u64)));
    }
    if let Some(eta) = p.eta() {
        let secs = eta.as_secs();
        line.push_str(&format!(" · {} min {:02} s left", secs / 60, secs % 60));
    }
    line
}
