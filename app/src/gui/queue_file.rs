//! The queue kept across a start-again (the Device menu's, or after the window's GPU was
//! lost): `queue.json` in the config folder, written before the old process stops and taken in
//! by the new one, which removes it. The image being made starts over; no queued one is lost,
//! and neither is a finished image no folder took (it waits unsaved in the new window).
//!
//! **Invariant:** the file is written atomically; one that cannot be read is kept as
//! `queue.json.bad` and reported, never run half or dropped silently.

use std::path::{Path, PathBuf};

use inference::canvas::CanvasJob;
use inference::imaging::{ImageRgb8, write_atomic};
use inference::worker::JobId;
use serde::{Deserialize, Serialize};

use super::gallery::store::ToSave;
use super::session::Work;

/// One job as kept: what it does, and for a canvas job how its images go back onto the
/// canvas.
#[derive(Clone, Serialize, Deserialize)]
pub struct KeptJob {
    pub work: Work,
    pub canvas: Option<CanvasJob>,
}

/// A finished image no folder took, as kept (its job's number means nothing to the next
/// process).
#[derive(Clone, Serialize, Deserialize)]
pub struct KeptImage {
    index: usize,
    image: ImageRgb8,
    parameters: String,
    extras: Option<String>,
    seed: u64,
    /// An X/Y/Z plot's grid (absent in files of builds before the plot).
    #[serde(default)]
    grid: bool,
}

/// The job number images kept from the last start are saved under: none of this process's
/// jobs has it, so no result shown is taken for theirs.
const LAST_START: JobId = JobId(u64::MAX);

impl From<&ToSave> for KeptImage {
    fn from(item: &ToSave) -> Self {
        KeptImage {
            index: item.index,
            image: item.image.clone(),
            parameters: item.parameters.clone(),
            extras: item.extras.clone(),
            seed: item.seed,
            grid: item.grid,
        }
    }
}

impl From<KeptImage> for ToSave {
    fn from(kept: KeptImage) -> Self {
        ToSave {
            job: LAST_START,
            index: kept.index,
            image: kept.image,
            parameters: kept.parameters,
            extras: kept.extras,
            seed: kept.seed,
            grid: kept.grid,
        }
    }
}

/// The file's layout; raised when a change makes older Ember builds misread the file (an
/// unreadable file is kept aside and reported, never run half or half-read). Layout 2 added
/// `unsaved` and PNG images; layout 1 (images as lists of numbers) is still read.
const FORMAT: u32 = 2;
const READABLE: [u32; 2] = [1, FORMAT];

/// What the file holds: its layout's number, the jobs in the order they run, and the
/// finished images waiting to be saved.
#[derive(Serialize, Deserialize)]
pub struct Kept {
    format: u32,
    pub jobs: Vec<KeptJob>,
    #[serde(default)]
    pub unsaved: Vec<KeptImage>,
}

impl Kept {
    pub fn new(jobs: Vec<KeptJob>, unsaved: Vec<KeptImage>) -> Self {
        Kept {
            format: FORMAT,
            jobs,
            unsaved,
        }
    }

    pub fn nothing() -> Self {
        Kept::new(Vec::new(), Vec::new())
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty() && self.unsaved.is_empty()
    }
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

    /// Writes `kept` for the next start (removes the file when it holds nothing).
    pub fn keep(&self, kept: Kept) -> Result<(), String> {
        if kept.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(format!("could not remove {}: {e}", self.path.display()))
                }
                _ => Ok(()),
            };
        }
        let json = serde_json::to_vec(&kept).map_err(|e| e.to_string())?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
        }
        // Its error names the file.
        write_atomic(&self.path, &json).map_err(|e| e.to_string())
    }

    /// What the last process kept, removing the file; nothing when there is no file. A file
    /// that cannot be read (damaged, or of another layout) is kept as `queue.json.bad` and
    /// the error says so.
    pub fn take(&self) -> Result<Kept, String> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Kept::nothing()),
            Err(e) => return Err(format!("could not read {}: {e}", self.path.display())),
        };
        let file = serde_json::from_slice::<Kept>(&bytes)
            .map_err(|e| e.to_string())
            .and_then(|file| match READABLE.contains(&file.format) {
                true => Ok(file),
                false => Err(format!(
                    "its layout is number {}, not one this Ember reads ({READABLE:?})",
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
                Ok(file)
            }
            Err(why) => {
                let bad = crate::gui::paths::set_aside_name(&self.path);
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
        queue.keep(Kept::new(jobs.to_vec(), Vec::new())).unwrap();
        let back = queue.take().unwrap().jobs;
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
        queue.keep(Kept::nothing()).unwrap();
        assert!(!dir.path().join("config/queue.json").exists());
    }

    /// Finished images no folder took, and paths that are not UTF-8, are kept too.
    #[test]
    fn unsaved_images_and_any_path_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let queue = KeptQueue::in_dir(dir.path());
        // Latin-1 "café": not UTF-8.
        #[cfg(unix)]
        let lora_dirs = {
            use std::os::unix::ffi::OsStringExt;
            vec![std::ffi::OsString::from_vec(b"/loras/caf\xe9".to_vec()).into()]
        };
        #[cfg(not(unix))]
        let lora_dirs = vec![PathBuf::from("loras")];
        let request = GenerateRequest {
            seed: 3,
            lora_dirs,
            ..Default::default()
        };
        let finished = ToSave {
            job: JobId(4),
            index: 1,
            image: ImageRgb8 {
                width: 1,
                height: 2,
                pixels: vec![10, 20, 30, 40, 50, 60],
            },
            parameters: "a fox\nSteps: 20, Seed: 9".into(),
            extras: Some("Postprocess upscale by: 4".into()),
            seed: 9,
            grid: true,
        };
        let job = KeptJob {
            work: Work::Generate(Box::new(request.clone())),
            canvas: None,
        };
        queue
            .keep(Kept::new(vec![job], vec![KeptImage::from(&finished)]))
            .unwrap();
        let back = queue.take().unwrap();
        let Work::Generate(kept) = &back.jobs[0].work else {
            panic!("a generation")
        };
        assert_eq!(kept.lora_dirs, request.lora_dirs);
        let [image] = &back.unsaved[..] else {
            panic!("one image")
        };
        let image = ToSave::from(image.clone());
        assert_eq!(
            (
                image.index,
                &image.image,
                &image.parameters,
                &image.extras,
                image.seed
            ),
            (
                1,
                &finished.image,
                &finished.parameters,
                &finished.extras,
                9
            )
        );
        assert_ne!(image.job, JobId(4), "not taken for this process's job 4");
    }

    /// A file an earlier version wrote (images as lists of numbers, no unsaved images) is
    /// read.
    #[test]
    fn an_earlier_versions_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let queue = KeptQueue::in_dir(dir.path());
        let mut json = serde_json::to_value(Kept::new(
            vec![KeptJob {
                work: generate(7),
                canvas: None,
            }],
            Vec::new(),
        ))
        .unwrap();
        json.as_object_mut().unwrap().remove("unsaved");
        json["format"] = 1.into();
        json["jobs"][0]["work"]["Generate"]["init_image"] =
            serde_json::json!({"width": 2, "height": 1, "pixels": [0, 1, 2, 253, 254, 255]});
        std::fs::write(dir.path().join("queue.json"), json.to_string()).unwrap();
        let back = queue.take().unwrap();
        let Work::Generate(first) = &back.jobs[0].work else {
            panic!("a generation")
        };
        assert_eq!(
            first.init_image.as_ref().unwrap().pixels,
            [0, 1, 2, 253, 254, 255]
        );
        assert!(back.unsaved.is_empty());
    }

    #[test]
    fn a_damaged_or_foreign_file_is_kept_aside_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let queue = KeptQueue::in_dir(dir.path());
        // The second one kept aside does not write over the first.
        for (text, kept) in [
            (&b"{\"format\": 1, \"jobs\": [tru"[..], "queue.json.bad"),
            (b"{\"format\": 99, \"jobs\": []}", "queue.json.bad.2"),
        ] {
            std::fs::write(dir.path().join("queue.json"), text).unwrap();
            let Err(error) = queue.take() else {
                panic!("an unreadable file is reported")
            };
            assert!(error.contains("could not be read"), "{error}");
            assert!(error.contains(kept), "{error}");
            assert_eq!(std::fs::read(dir.path().join(kept)).unwrap(), text);
            assert!(!dir.path().join("queue.json").exists());
        }
        assert_eq!(
            std::fs::read(dir.path().join("queue.json.bad")).unwrap(),
            b"{\"format\": 1, \"jobs\": [tru"
        );
    }
}
