//! The queue kept across a start-again (the Device menu's, or after the window's GPU was
//! lost): `queue.json` in the config folder, written before the old process stops and taken in
//! by the new one, which removes it. The image being made starts over; no queued one is lost.
//!
//! **Invariant:** the file is written atomically; one that cannot be read is kept as
//! `queue.json.bad` and reported, never run half or dropped silently.

use std::path::{Path, PathBuf};

use inference::canvas::CanvasJob;
use inference::imaging::write_atomic;
use serde::{Deserialize, Serialize};

use super::session::Work;

/// One job as kept: what it does, and for a canvas job how its images go back onto the
/// canvas.
#[derive(Clone, Serialize, Deserialize)]
pub struct KeptJob {
    pub work: Work,
    pub canvas: Option<CanvasJob>,
}

/// The file's layout; raised when a change to the requests makes older files unreadable (an
/// unreadable file is kept aside and reported, never run half).
const FORMAT: u32 = 1;

/// What the file holds: its layout's number, then the jobs in the order they run.
#[derive(Serialize, Deserialize)]
struct QueueFile {
    format: u32,
    jobs: Vec<KeptJob>,
}

/// `queue.json` in one folder.
#[derive(Clone, Debug)]
pub struct KeptQueue {
    path: PathBuf,
}

impl KeptQueue {
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            path: dir.join("queue.json"),
        }
    }

    /// Writes `jobs` for the next start (removes the file when there are none).
    pub fn keep(&self, jobs: Vec<KeptJob>) -> Result<(), String> {
        if jobs.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(format!("could not remove {}: {e}", self.path.display()))
                }
                _ => Ok(()),
            };
        }
        let file = QueueFile {
            format: FORMAT,
            jobs,
        };
        let json = serde_json::to_vec(&file).map_err(|e| e.to_string())?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
        }
        // Its error names the file.
        write_atomic(&self.path, &json).map_err(|e| e.to_string())
    }

    /// The jobs kept by the last process, removing the file; none when there is no file. A
    /// file that cannot be read (damaged, or of another layout) is kept as `queue.json.bad`
    /// and the error says so.
    pub fn take(&self) -> Result<Vec<KeptJob>, String> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("could not read {}: {e}", self.path.display())),
        };
        let file = serde_json::from_slice::<QueueFile>(&bytes)
            .map_err(|e| e.to_string())
            .and_then(|file| match file.format == FORMAT {
                true => Ok(file),
                false => Err(format!(
                    "its layout is number {}, not {FORMAT}",
                    file.format
                )),
            });
        match file {
            Ok(file) => {
                // Taken once: a file left behind would queue the jobs again at every start.
                std::fs::remove_file(&self.path).map_err(|e| {
                    format!(
                        "the queue kept in {} could not be removed ({e}); its jobs were not \
                         queued again, to be safe",
                        self.path.display()
                    )
                })?;
                Ok(file.jobs)
            }
            Err(why) => {
                let bad = self.path.with_extension("json.bad");
                let kept = match std::fs::rename(&self.path, &bad) {
                    Ok(()) => format!("it is kept as {}", bad.display()),
                    Err(e) => format!("it could not be moved aside ({e})"),
                };
                Err(format!(
                    "the queue kept from the last start could not be read ({why}); {kept}"
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inference::api::GenerateRequest;
    use inference::imaging::ImageRgb8;

    fn generate(seed: u64) -> Work {
        Work::Generate(Box::new(GenerateRequest {
            seed,
            prompt: "a fox, (red:1.2)".into(),
            init_image: Some(ImageRgb8 {
                width: 2,
                height: 1,
                pixels: vec![0, 1, 2, 253, 254, 255],
            }),
            ..Default::default()
        }))
    }

    #[test]
    fn jobs_come_back_once_in_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let queue = KeptQueue::in_dir(&dir.path().join("config"));
        assert!(queue.take().unwrap().is_empty(), "no file: nothing kept");
        let jobs = [generate(7), generate(8)].map(|work| KeptJob { work, canvas: None });
        queue.keep(jobs.to_vec()).unwrap();
        let back = queue.take().unwrap();
        let seeds: Vec<u64> = back
            .iter()
            .map(|job| match &job.work {
                Work::Generate(r) => r.seed,
                Work::Upscale(_) => 0,
            })
            .collect();
        assert_eq!(seeds, [7, 8]);
        let Work::Generate(first) = &back[0].work else {
            panic!("a generation")
        };
        assert_eq!(first.prompt, "a fox, (red:1.2)");
        assert_eq!(
            first.init_image.as_ref().unwrap().pixels,
            [0, 1, 2, 253, 254, 255]
        );
        assert!(queue.take().unwrap().is_empty(), "taken once");
        // No jobs: no file.
        queue.keep(Vec::new()).unwrap();
        assert!(!dir.path().join("config/queue.json").exists());
    }

    #[test]
    fn a_damaged_or_foreign_file_is_kept_aside_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let queue = KeptQueue::in_dir(dir.path());
        for text in [
            &b"{\"format\": 1, \"jobs\": [tru"[..],
            b"{\"format\": 99, \"jobs\": []}",
        ] {
            std::fs::write(dir.path().join("queue.json"), text).unwrap();
            let Err(error) = queue.take() else {
                panic!("an unreadable file is reported")
            };
            assert!(error.contains("could not be read"), "{error}");
            assert_eq!(
                std::fs::read(dir.path().join("queue.json.bad")).unwrap(),
                text
            );
            assert!(!dir.path().join("queue.json").exists());
        }
    }
}
