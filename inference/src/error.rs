//! The engine's error type: every message says what is wrong and, where it helps, what to do.

use std::path::{Path, PathBuf};

/// Result alias for the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while loading a model or generating an image.
///
/// Messages are one line, start with what is wrong and end with the path they concern, so
/// the CLI can print them as they are and the GUI can show them as notices.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed.
    #[error("{source}: {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file or folder is not a usable model (corrupt, truncated, not a diffusion model).
    #[error("{message}: {}", path.display())]
    InvalidModel { path: PathBuf, message: String },
    /// A recognised model family or format that Ember does not run (yet).
    #[error("{message}: {}", path.display())]
    UnsupportedModel { path: PathBuf, message: String },
    /// A single file whose architecture is not its family's released one, with no config
    /// folder given or found that describes it.
    #[error("{message}: {}", path.display())]
    NeedsConfig { path: PathBuf, message: String },
    /// The weights do not fit the architecture (missing tensors, wrong shapes, NaN).
    #[error("{message}: {}", path.display())]
    Weights { path: PathBuf, message: String },
    /// An input image or mask could not be used.
    #[error("{message}: {}", path.display())]
    InvalidImage { path: PathBuf, message: String },
    /// A setting is out of range or unknown.
    #[error("{0}")]
    InvalidSettings(String),
    /// The tokenizer files could not be read.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// NaN or infinity appeared; says which stage produced it.
    #[error(
        "generation stopped: the {stage} produced non-finite values (NaN or infinity); nothing was saved. Try another precision (--precision f32) or check the model file"
    )]
    NonFinite { stage: String },
    /// The compute device could not be set up, or failed (out of memory).
    #[error("device: {0}")]
    Device(String),
    /// The GPU stopped working for good (a fault, a driver reset, a GPU removed): nothing
    /// more runs on it in this process. `what` says what it was doing and what was lost; the
    /// message adds what to do (the worker goes on on the CPU instead and says so).
    #[error(
        "device: {what}, and this run of Ember cannot use it again. Restart Ember (if it happens again, check the GPU's driver and cooling), or use --device cpu"
    )]
    DeviceLost { what: String },
    /// The generation was cancelled.
    #[error("cancelled")]
    Cancelled,
}

impl Error {
    /// An I/O error about `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// `path` is not a usable model, for the given reason.
    pub fn invalid_model(path: &Path, message: impl Into<String>) -> Self {
        Error::InvalidModel {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }

    /// `path` is a model Ember recognises but does not run.
    pub fn unsupported_model(path: &Path, message: impl Into<String>) -> Self {
        Error::UnsupportedModel {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }

    /// The weights in `path` do not fit the architecture.
    pub fn weights(path: &Path, message: impl Into<String>) -> Self {
        Error::Weights {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }

    /// The image at `path` cannot be used.
    pub fn invalid_image(path: &Path, message: impl Into<String>) -> Self {
        Error::InvalidImage {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }

    /// A bad setting.
    pub fn settings(message: impl Into<String>) -> Self {
        Error::InvalidSettings(message.into())
    }
}
