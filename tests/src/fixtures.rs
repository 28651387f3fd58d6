//! The reference tree's safetensors fixture files, read into plain tensors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::reference;

/// One tensor of a fixture file, converted to f64 (floats) or i64 (integers).
#[derive(Clone, Debug)]
pub struct Fixture {
    pub shape: Vec<usize>,
    pub dtype: safetensors::Dtype,
    pub bytes: Vec<u8>,
}

impl Fixture {
    /// A float32 tensor.
    pub fn from_f32(shape: Vec<usize>, values: &[f32]) -> Self {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Self {
            shape,
            dtype: safetensors::Dtype::F32,
            bytes,
        }
    }

    /// The values as f32 (float32 tensors only).
    pub fn f32(&self) -> Vec<f32> {
        assert_eq!(
            self.dtype,
            safetensors::Dtype::F32,
            "tensor is {:?}, not F32",
            self.dtype
        );
        self.bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect()
    }

    /// The values as f64, from any float dtype.
    pub fn f64(&self) -> Vec<f64> {
        match self.dtype {
            safetensors::Dtype::F32 => self.f32().into_iter().map(f64::from).collect(),
            safetensors::Dtype::F64 => self
                .bytes
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
                .collect(),
            other => panic!("tensor is {other:?}, not a float"),
        }
    }

    /// The values as i64, from any integer dtype.
    pub fn i64(&self) -> Vec<i64> {
        match self.dtype {
            safetensors::Dtype::I64 => self
                .bytes
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                .collect(),
            safetensors::Dtype::U8 => self.bytes.iter().map(|&b| i64::from(b)).collect(),
            safetensors::Dtype::I16 => self
                .bytes
                .chunks_exact(2)
                .map(|b| i64::from(i16::from_le_bytes([b[0], b[1]])))
                .collect(),
            other => panic!("tensor is {other:?}, not an integer"),
        }
    }
}

/// All tensors of a safetensors file in the reference tree, by name.
pub struct Fixtures {
    pub path: PathBuf,
    pub tensors: BTreeMap<String, Fixture>,
}

impl Fixtures {
    /// Loads `rel` (relative to the reference root).
    pub fn load(rel: &str) -> Self {
        Self::load_path(&reference(rel))
    }

    /// Loads a safetensors file by absolute path.
    pub fn load_path(path: &Path) -> Self {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let st = safetensors::SafeTensors::deserialize(&bytes)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let tensors = st
            .tensors()
            .into_iter()
            .map(|(name, view)| {
                let fixture = Fixture {
                    shape: view.shape().to_vec(),
                    dtype: view.dtype(),
                    bytes: view.data().to_vec(),
                };
                (name, fixture)
            })
            .collect();
        Self {
            path: path.to_path_buf(),
            tensors,
        }
    }

    /// A tensor by name; panics naming the file if it is absent.
    pub fn get(&self, name: &str) -> &Fixture {
        self.tensors
            .get(name)
            .unwrap_or_else(|| panic!("{}: no tensor {name}", self.path.display()))
    }

    /// Whether the file holds a tensor of that name.
    pub fn has(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }
}
