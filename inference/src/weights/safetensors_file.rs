//! A `.safetensors` file read as lazily loaded tensors: the header is checked and parsed
//! once, and each tensor's bytes are read from the file at its offset when it is asked for.
//!
//! The file stays open while its tensors live (a loaded model keeps them to put weights
//! back after a LoRA), and every read first checks that the file still has the size and
//! modification time it had when opened: a checkpoint overwritten in place is an error,
//! never other weights read silently.
//!
//! burn-store's own reader parses the whole JSON header again for every tensor it reads,
//! which is quadratic in the tensor count: an SDXL checkpoint (2,500 tensors, a 300 kB
//! header) would parse 750 MB of JSON, a LoRA (700 small tensors) spends most of its
//! opening time there.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use burn::store::bridge;
use burn::store::burn_pack::{Error as PackError, Tensor as PackTensor};
use burn::tensor::{BoolStore, DType, TensorData};

use crate::error::{Error, Result};

/// Largest safetensors header Ember reads (the format's own limit is 100 MB).
const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Opens a `.safetensors` file: its container is validated (header size, JSON, every
/// tensor's dtype, shape and byte range inside the file), with messages that say which of
/// these is wrong, and its tensors are returned unread.
pub fn open(path: &Path, file_len: u64) -> Result<Vec<PackTensor>> {
    let bad = |message: String| Error::invalid_model(path, message);
    if file_len < 8 {
        return Err(bad(format!(
            "truncated: {file_len} bytes is too short for a .safetensors file"
        )));
    }
    let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut len_bytes = [0u8; 8];
    file.read_exact(&mut len_bytes)
        .map_err(|e| Error::io(path, e))?;
    let header_len = u64::from_le_bytes(len_bytes);
    if header_len > MAX_HEADER_BYTES {
        return Err(bad(format!(
            "not a .safetensors file (its header would be {header_len} bytes, over the 100 MB limit)"
        )));
    }
    if header_len + 8 > file_len {
        return Err(bad(format!(
            "truncated or not a .safetensors file: the header needs {header_len} bytes but the file has {}",
            file_len - 8
        )));
    }
    let mut header = vec![0u8; header_len as usize];
    file.read_exact(&mut header)
        .map_err(|e| Error::io(path, e))?;
    let header: serde_json::Value = serde_json::from_slice(&header).map_err(|e| {
        bad(format!(
            "not a .safetensors file (its header is not valid JSON: {e})"
        ))
    })?;
    let entries = header
        .as_object()
        .ok_or_else(|| bad("not a .safetensors file (its header is not a JSON object)".into()))?;
    let data_start = 8 + header_len;
    let data_len = file_len - data_start;
    let stamp = Stamp::of(&file).map_err(|e| Error::io(path, e))?;
    // Read by position from any thread: no lock, no shared cursor.
    let file = Arc::new(file);
    let mut tensors = Vec::with_capacity(entries.len());
    for (name, info) in entries {
        if name == "__metadata__" {
            continue;
        }
        let corrupt = |what: &str| bad(format!("corrupt header entry for {name:?} ({what})"));
        let offsets = info["data_offsets"].as_array().map(|o| {
            let at = |i: usize| o.get(i).and_then(serde_json::Value::as_u64);
            (at(0), at(1))
        });
        let (Some((Some(begin), Some(end))), Some(dims)) = (offsets, info["shape"].as_array())
        else {
            return Err(corrupt("no shape or data offsets"));
        };
        let shape = dims
            .iter()
            .map(|d| d.as_u64().map(|d| d as usize))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| corrupt("a dimension is not a number"))?;
        let dtype_name = info["dtype"].as_str().unwrap_or("?");
        let dtype = burn_dtype(dtype_name).ok_or_else(|| {
            bad(format!(
                "tensor {name:?} is stored as {dtype_name}, which Ember does not read"
            ))
        })?;
        if end > data_len {
            return Err(bad(format!(
                "truncated: tensor {name:?} ends at byte {end} of the data but the file holds {data_len} bytes of data"
            )));
        }
        let elements = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .ok_or_else(|| corrupt("its shape is too large"))?;
        let bytes = elements.checked_mul(dtype.size());
        if begin > end || bytes != Some((end - begin) as usize) {
            return Err(corrupt(&format!(
                "{shape:?} {dtype_name} does not fill bytes {begin}..{end}"
            )));
        }
        let file = Arc::clone(&file);
        let shape_for_read = shape.clone();
        tensors.push(bridge::deferred(
            name.clone(),
            dtype,
            shape.into(),
            None,
            move || read_tensor(&file, stamp, data_start + begin, &shape_for_read, dtype),
        ));
    }
    Ok(tensors)
}

/// The Burn dtype of a safetensors dtype name (the ones burn-store reads).
fn burn_dtype(name: &str) -> Option<DType> {
    Some(match name {
        "F64" => DType::F64,
        "F32" => DType::F32,
        "F16" => DType::F16,
        "BF16" => DType::BF16,
        "I64" => DType::I64,
        "I32" => DType::I32,
        "I16" => DType::I16,
        "I8" => DType::I8,
        "U64" => DType::U64,
        "U32" => DType::U32,
        "U8" => DType::U8,
        "BOOL" => DType::Bool(BoolStore::Native),
        _ => return None,
    })
}

/// A file's size and modification time when it was opened.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Stamp(u64, Option<std::time::SystemTime>);

impl Stamp {
    fn of(file: &File) -> std::io::Result<Self> {
        let meta = file.metadata()?;
        Ok(Self(meta.len(), meta.modified().ok()))
    }
}

/// What a read says when the file is no longer what was opened.
pub const CHANGED_ON_DISK: &str = "the file changed on disk since it was opened";

/// One tensor's values, read into a vector of its element type (so Burn keeps the buffer
/// as it is instead of copying it to align it), if the file is still as it was opened.
fn read_tensor(
    file: &File,
    stamp: Stamp,
    offset: u64,
    shape: &[usize],
    dtype: DType,
) -> std::result::Result<TensorData, PackError> {
    if Stamp::of(file).map_err(|e| PackError::IoError(e.to_string()))? != stamp {
        return Err(PackError::IoError(CHANGED_ON_DISK.into()));
    }
    fn read<E: bytemuck::Pod + burn::tensor::Element>(
        file: &File,
        offset: u64,
        shape: &[usize],
    ) -> std::result::Result<TensorData, PackError> {
        let n: usize = shape.iter().product();
        let mut values = vec![E::zeroed(); n];
        read_at(file, offset, bytemuck::cast_slice_mut(&mut values))
            .map_err(|e| PackError::IoError(e.to_string()))?;
        Ok(TensorData::new(values, shape.to_vec()))
    }
    match dtype {
        DType::F64 => read::<f64>(file, offset, shape),
        DType::F32 => read::<f32>(file, offset, shape),
        DType::F16 => read::<half::f16>(file, offset, shape),
        DType::BF16 => read::<half::bf16>(file, offset, shape),
        DType::I64 => read::<i64>(file, offset, shape),
        DType::I32 => read::<i32>(file, offset, shape),
        DType::I16 => read::<i16>(file, offset, shape),
        DType::I8 => read::<i8>(file, offset, shape),
        DType::U64 => read::<u64>(file, offset, shape),
        DType::U32 => read::<u32>(file, offset, shape),
        DType::U8 => read::<u8>(file, offset, shape),
        DType::Bool(_) => read::<u8>(file, offset, shape).map(|data| {
            let values: Vec<bool> = data.iter::<u8>().map(|v| v != 0).collect();
            TensorData::new(values, shape.to_vec())
        }),
        other => Err(PackError::ValidationError(format!(
            "unsupported dtype {other:?}"
        ))),
    }
}

/// Reads `buf.len()` bytes of `file` at `offset`; a large read in pieces on the rayon pool
/// (copying from the page cache is what reading a weight again after a LoRA waits on).
fn read_at(file: &File, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    use rayon::prelude::*;
    const PIECE: usize = 4 << 20;
    buf.par_chunks_mut(PIECE)
        .enumerate()
        .try_for_each(|(i, piece)| read_exact_at(file, piece, offset + (i * PIECE) as u64))
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::{Dtype, tensor::TensorView};

    fn write(path: &Path, tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) {
        let views = tensors
            .iter()
            .map(|(name, dtype, shape, bytes)| {
                (
                    name.to_string(),
                    TensorView::new(*dtype, shape.clone(), bytes).unwrap(),
                )
            })
            .collect::<Vec<_>>();
        safetensors::serialize_to_file(views, None, path).unwrap();
    }

    fn open_file(path: &Path) -> Result<Vec<PackTensor>> {
        open(path, std::fs::metadata(path).unwrap().len())
    }

    #[test]
    fn every_dtype_reads_back_its_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.safetensors");
        let f32s: Vec<u8> = [1.5f32, -2.0, 3.25, 0.0, 7.0, 8.5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let f16s: Vec<u8> = [0.5f32, -1.0]
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
            .collect();
        let i64s: Vec<u8> = [7i64, -9].iter().flat_map(|v| v.to_le_bytes()).collect();
        write(
            &path,
            &[
                ("a", Dtype::F32, vec![2, 3], f32s),
                ("b", Dtype::F16, vec![2], f16s),
                ("c", Dtype::I64, vec![2], i64s),
                ("d", Dtype::BOOL, vec![3], vec![1, 0, 1]),
            ],
        );
        let tensors = open_file(&path).unwrap();
        let get = |name: &str| {
            let t = tensors.iter().find(|t| t.name == name).unwrap();
            bridge::to_data(t).unwrap()
        };
        let a = get("a");
        assert_eq!(a.shape().as_slice(), [2, 3]);
        assert_eq!(
            a.try_to_vec::<f32>().unwrap(),
            vec![1.5, -2.0, 3.25, 0.0, 7.0, 8.5]
        );
        let b = get("b").convert::<f32>();
        assert_eq!(b.try_to_vec::<f32>().unwrap(), vec![0.5, -1.0]);
        assert_eq!(get("c").try_to_vec::<i64>().unwrap(), vec![7, -9]);
        assert_eq!(
            get("d").try_to_vec::<bool>().unwrap(),
            vec![true, false, true]
        );
    }

    #[test]
    fn a_shape_that_does_not_fill_its_bytes_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.safetensors");
        let header = br#"{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        bytes.extend_from_slice(&[0u8; 8]);
        std::fs::write(&path, bytes).unwrap();
        let message = open_file(&path).unwrap_err().to_string();
        assert!(
            message.contains("\"w\"") && message.contains("0..8"),
            "{message}"
        );
    }

    #[test]
    fn a_file_overwritten_after_opening_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.safetensors");
        let bytes = |v: f32| v.to_le_bytes().to_vec();
        write(&path, &[("w", Dtype::F32, vec![1], bytes(1.0))]);
        let tensors = open_file(&path).unwrap();
        assert_eq!(
            bridge::to_data(&tensors[0])
                .unwrap()
                .try_to_vec::<f32>()
                .unwrap(),
            [1.0]
        );
        // Overwritten in place, the same size: only the modification time tells.
        let mut content = std::fs::read(&path).unwrap();
        let at = content.len() - 4;
        content[at..].copy_from_slice(&bytes(2.0));
        std::fs::write(&path, content).unwrap();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(later).unwrap();
        let message = bridge::to_data(&tensors[0]).unwrap_err().to_string();
        assert!(message.contains(CHANGED_ON_DISK), "{message}");
    }
}
