//! Opening weight files: `.safetensors` (memory-mapped, via burn-store) and PyTorch pickles
//! (`.ckpt`, `.pt`, `.pth`, `.bin`, via burn-store's reader, which executes nothing, after
//! [`super::pickle_guard`] has vetted them). Tensors come back lazy: nothing is read until
//! a module takes them.

use std::io::Read;
use std::path::{Path, PathBuf};

use burn::store::bridge;
use burn::store::burn_pack::Tensor as PackTensor;
use burn::store::pytorch_reader::{PickleValue, PytorchReader};

use super::pickle_guard;
use crate::error::{Error, Result};

/// The container format of a weight file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    Safetensors,
    PyTorchPickle,
}

impl FileFormat {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            FileFormat::Safetensors => "safetensors",
            FileFormat::PyTorchPickle => "PyTorch pickle",
        }
    }
}

/// The lazily-read tensors of one weight file, under the file's own key names.
pub struct TensorFile {
    pub path: PathBuf,
    pub format: FileFormat,
    pub tensors: Vec<PackTensor>,
}

/// The container of a weight file from its first bytes: a safetensors file is an 8-byte
/// header length and then its JSON header (`{`); a `.ckpt` is a zip (`PK`) or a bare pickle
/// (protocol 2+: `0x80`). The JSON is checked first: a header length of 128 mod 256 also
/// starts with `0x80`.
fn sniff(head: &[u8]) -> FileFormat {
    if head.get(8) == Some(&b'{') {
        FileFormat::Safetensors
    } else if head.starts_with(b"PK\x03\x04") || head.first() == Some(&0x80) {
        FileFormat::PyTorchPickle
    } else {
        FileFormat::Safetensors
    }
}

impl TensorFile {
    /// Opens a weight file, checking its container before anything else.
    pub fn open(path: &Path) -> Result<Self> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if !meta.is_file() {
            return Err(Error::invalid_model(path, "not a file"));
        }
        if meta.len() == 0 {
            return Err(Error::invalid_model(path, "the file is empty"));
        }
        let mut head = [0u8; 9];
        let head_len = std::fs::File::open(path)
            .and_then(|mut f| f.read(&mut head))
            .map_err(|e| Error::io(path, e))?;
        let format = sniff(&head[..head_len]);
        let tensors = match format {
            FileFormat::Safetensors => super::safetensors_file::open(path, meta.len())?,
            FileFormat::PyTorchPickle => open_pickle(path)?,
        };
        if tensors.is_empty() {
            return Err(Error::invalid_model(path, "the file holds no tensors"));
        }
        Ok(Self {
            path: path.to_path_buf(),
            format,
            tensors,
        })
    }
}

/// Where a pickle keeps its weights when they are not at the top level: a Lightning / SD
/// checkpoint's `state_dict`, or basicsr's (Real-ESRGAN's) `params_ema`, then `params`.
const NESTED_WEIGHTS: [&str; 3] = ["state_dict", "params_ema", "params"];

/// Reads a PyTorch checkpoint's tensors (from the first [`NESTED_WEIGHTS`] entry present).
fn open_pickle(path: &Path) -> Result<Vec<PackTensor>> {
    pickle_guard::check_pickle_file(path)?;
    let bad = |e: &dyn std::fmt::Display| {
        Error::invalid_model(path, format!("not a readable PyTorch checkpoint ({e})"))
    };
    let root = PytorchReader::read_pickle_data(path, None).map_err(|e| bad(&e))?;
    let nested = NESTED_WEIGHTS.into_iter().find(|key| {
        matches!(&root, PickleValue::Dict(d) if matches!(d.get(*key), Some(PickleValue::Dict(_))))
    });
    let reader = match nested {
        Some(key) => PytorchReader::with_top_level_key(path, key),
        None => PytorchReader::new(path),
    }
    .map_err(|e| bad(&e))?;
    let mut tensors: Vec<PackTensor> = reader
        .into_tensors()
        .into_values()
        .map(bridge::from_pytorch)
        .collect();
    // The reader's map has no order; by name, every load of a file is the same (which of
    // two keys naming one weight loads, for one).
    tensors.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(tensors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_safetensors_header_of_128_mod_256_bytes_is_not_a_pickle() {
        let mut head = 384u64.to_le_bytes().to_vec();
        head.push(b'{');
        assert_eq!(head[0], 0x80);
        assert_eq!(sniff(&head), FileFormat::Safetensors);
        assert_eq!(sniff(&[0x80, 0x02, b'}']), FileFormat::PyTorchPickle);
        assert_eq!(sniff(b"PK\x03\x04rest"), FileFormat::PyTorchPickle);
    }
}
