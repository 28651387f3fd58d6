//! Vets a PyTorch pickle before anything reads it: every class or function the pickle
//! imports (`GLOBAL`, `INST`, `STACK_GLOBAL`) must be one that plain weight files use.
//!
//! burn-store's PyTorch reader never executes code, but a pickle that imports `os.system`
//! or `builtins.exec` was written to attack whoever loads it; Ember refuses such a file
//! outright and says so (the same allowlist idea as A1111's `modules/safe.py`).

use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};

/// Globals that appear in ordinary checkpoints (A1111, diffusers, Lightning).
const ALLOWED: &[&str] = &[
    "collections.OrderedDict",
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state",
    "torch._utils._rebuild_device_tensor_from_numpy",
    "torch._tensor._rebuild_from_type_v2",
    "torch.nn.parameter.Parameter",
    "torch.nn.modules.container.ParameterDict",
    "torch.Size",
    "torch.device",
    "numpy.core.multiarray.scalar",
    "numpy.core.multiarray._reconstruct",
    "numpy._core.multiarray.scalar",
    "numpy._core.multiarray._reconstruct",
    "numpy.dtype",
    "numpy.ndarray",
    "_codecs.encode",
    "builtins.set",
    "builtins.frozenset",
    "__builtin__.set",
    "pytorch_lightning.callbacks.model_checkpoint.ModelCheckpoint",
];

fn allowed(global: &str) -> bool {
    if ALLOWED.contains(&global) {
        return true;
    }
    // Storage classes (`torch.HalfStorage`) and dtypes (`torch.float16`).
    match global.strip_prefix("torch.") {
        Some(name) if !name.contains('.') => {
            name.ends_with("Storage")
                || matches!(
                    name,
                    "float16"
                        | "float32"
                        | "float64"
                        | "bfloat16"
                        | "int8"
                        | "int16"
                        | "int32"
                        | "int64"
                        | "uint8"
                        | "bool"
                )
        }
        _ => false,
    }
}

/// Most pickle bytes Ember will read from one file, all its pickles together: state-dict
/// pickles of real checkpoints are a few MiB.
const MAX_PICKLE_BYTES: u64 = 100 << 20;

/// Checks every pickle in a PyTorch file (zip archive or legacy format), reading only the
/// pickles, never the tensor data. Each is checked as it is read, and at most
/// [`MAX_PICKLE_BYTES`] are read in all (an archive of many large pickles would otherwise be
/// held in memory whole).
pub fn check_pickle_file(path: &Path) -> Result<()> {
    let refuse = |message: String| Error::invalid_model(path, message);
    let check = |pickle: &[u8]| -> Result<()> {
        for global in imported_globals(pickle, 5).map_err(refuse)? {
            if !allowed(&global) {
                return Err(refuse(format!(
                    "refusing to load: the pickle imports `{global}`, which weight files never need and which \
                     could run code on your computer (nothing was executed). Use a .safetensors version of this model"
                )));
            }
        }
        Ok(())
    };
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut head = Vec::new();
    (&mut file)
        .take(TAR_MAGIC_END as u64)
        .read_to_end(&mut head)
        .map_err(|e| Error::io(path, e))?;
    if head.get(TAR_MAGIC_END - 5..) == Some(b"ustar".as_slice()) {
        return Err(refuse(
            "a PyTorch file in the old TAR layout, which Ember does not read; use a .safetensors \
             version of this model"
                .into(),
        ));
    }
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    if !head.starts_with(b"PK\x03\x04") {
        // Legacy format: five pickles (magic, protocol, system info, the object, storage
        // keys) come first, the raw storages after them.
        let mut data = Vec::new();
        file.take(MAX_PICKLE_BYTES)
            .read_to_end(&mut data)
            .map_err(|e| Error::io(path, e))?;
        return check(&data);
    }
    let mut archive = zip::ZipArchive::new(file)
        .map_err(|e| refuse(format!("not a readable PyTorch archive ({e})")))?;
    let too_large =
        || refuse("its pickles are larger than 100 MiB, which no weight file needs".into());
    let (mut read, mut pickles) = (0u64, 0);
    for i in 0..archive.len() {
        let entry = archive
            .by_index(i)
            .map_err(|e| refuse(format!("corrupt PyTorch archive ({e})")))?;
        if !entry.name().is_ok_and(|n| n.ends_with(".pkl")) {
            continue;
        }
        let left = MAX_PICKLE_BYTES - read;
        if entry.size() > left {
            return Err(too_large());
        }
        let mut data = Vec::new();
        // The entry's stated size may be a lie: read no more than what is left.
        entry
            .take(left + 1)
            .read_to_end(&mut data)
            .map_err(|e| refuse(format!("corrupt PyTorch archive ({e})")))?;
        if data.len() as u64 > left {
            return Err(too_large());
        }
        read += data.len() as u64;
        check(&data)?;
        pickles += 1;
    }
    if pickles == 0 {
        return Err(refuse(
            "a zip archive without a pickle: not a PyTorch checkpoint".into(),
        ));
    }
    Ok(())
}

/// Where a TAR header's `ustar` magic ends (it starts at byte 257).
const TAR_MAGIC_END: usize = 262;

/// The `module.name` of every global the first `max_pickles` pickles in `data` import.
/// Walks the opcode stream without building any object.
pub fn imported_globals(
    data: &[u8],
    max_pickles: usize,
) -> std::result::Result<Vec<String>, String> {
    let mut r = OpReader { data, pos: 0 };
    let mut globals = Vec::new();
    // The last values pushed, enough to resolve STACK_GLOBAL's two string operands.
    let mut recent: Vec<Option<String>> = Vec::new();
    let mut memo: std::collections::HashMap<u64, Option<String>> = std::collections::HashMap::new();
    let mut stops = 0;
    while stops < max_pickles && r.pos < data.len() {
        let op = r.byte()?;
        let mut pushed: Option<Option<String>> = Some(None);
        match op {
            b'c' | b'i' => {
                let module = r.line()?;
                let name = r.line()?;
                globals.push(format!("{module}.{name}"));
            }
            0x93 => {
                // STACK_GLOBAL: module and name are the two values below the top.
                let name = recent.pop().flatten();
                let module = recent.pop().flatten();
                match (module, name) {
                    (Some(m), Some(n)) => globals.push(format!("{m}.{n}")),
                    _ => globals.push("<unresolved STACK_GLOBAL>".into()),
                }
            }
            0x8c => pushed = Some(Some(r.text_with_len(1)?)),
            b'X' => pushed = Some(Some(r.text_with_len(4)?)),
            0x8d => pushed = Some(Some(r.text_with_len(8)?)),
            b'V' => pushed = Some(Some(r.line()?)),
            0x94 => {
                memo.insert(memo.len() as u64, recent.last().cloned().flatten());
                pushed = None;
            }
            b'q' | b'h' | b'r' | b'j' => {
                let key = r.uint(if matches!(op, b'q' | b'h') { 1 } else { 4 })?;
                if matches!(op, b'q' | b'r') {
                    memo.insert(key, recent.last().cloned().flatten());
                    pushed = None;
                } else {
                    pushed = Some(memo.get(&key).cloned().flatten());
                }
            }
            b'p' | b'g' => {
                let key: u64 = r
                    .line()?
                    .trim()
                    .parse()
                    .map_err(|_| "corrupt pickle: bad memo key".to_string())?;
                if op == b'p' {
                    memo.insert(key, recent.last().cloned().flatten());
                    pushed = None;
                } else {
                    pushed = Some(memo.get(&key).cloned().flatten());
                }
            }
            b'.' => {
                stops += 1;
                recent.clear();
                memo.clear();
                pushed = None;
            }
            _ => r.skip_argument(op)?,
        }
        if let Some(value) = pushed {
            recent.push(value);
            if recent.len() > 16 {
                recent.remove(0);
            }
        }
    }
    Ok(globals)
}

struct OpReader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl OpReader<'_> {
    fn take(&mut self, n: usize) -> std::result::Result<&[u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or("truncated pickle")?;
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn byte(&mut self) -> std::result::Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn uint(&mut self, n: usize) -> std::result::Result<u64, String> {
        Ok(self
            .take(n)?
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn line(&mut self) -> std::result::Result<String, String> {
        let rest = &self.data[self.pos..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or("truncated pickle")?;
        self.pos += end + 1;
        Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
    }

    fn text_with_len(&mut self, len_bytes: usize) -> std::result::Result<String, String> {
        let n = usize::try_from(self.uint(len_bytes)?).map_err(|_| "corrupt pickle")?;
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }

    /// Skips the argument of an opcode that neither imports nor pushes a string.
    fn skip_argument(&mut self, op: u8) -> std::result::Result<(), String> {
        let skip = |r: &mut Self, n: usize| r.take(n).map(|_| ());
        match op {
            b'K' | 0x80 | 0x82 => skip(self, 1),
            b'M' | 0x83 => skip(self, 2),
            b'J' | 0x84 => skip(self, 4),
            b'G' | 0x95 => skip(self, 8),
            b'U' | b'C' | 0x8a => {
                let n = self.uint(1)? as usize;
                skip(self, n)
            }
            b'T' | b'B' | 0x8b => {
                let n = self.uint(4)? as usize;
                skip(self, n)
            }
            0x8e | 0x96 => {
                let n = usize::try_from(self.uint(8)?).map_err(|_| "corrupt pickle")?;
                skip(self, n)
            }
            b'I' | b'L' | b'F' | b'S' | b'P' => self.line().map(|_| ()),
            b'(' | b'0' | b'1' | b'2' | b'N' | 0x88 | 0x89 | b'Q' | b'R' | b'b' | b'd' | b'}'
            | b'e' | b'l' | b']' | b'o' | b's' | b'u' | b't' | b')' | 0x85 | 0x86 | 0x87 | b'a'
            | 0x81 | 0x92 | 0x8f | 0x90 | 0x91 | 0x97 | 0x98 => Ok(()),
            other => Err(format!("corrupt pickle: unknown opcode 0x{other:02x}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// A pickle stream of five empty pickles (five STOPs), then `padding` bytes the check
    /// never reaches: harmless, and as large as wanted.
    fn harmless(out: &mut impl Write, padding: usize) {
        out.write_all(b".....").unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..padding / zeros.len() {
            out.write_all(&zeros).unwrap();
        }
    }

    fn archive(path: &Path, pickles: usize, each: usize) {
        let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for i in 0..pickles {
            zip.start_file(format!("archive/{i}/data.pkl"), options)
                .unwrap();
            harmless(&mut zip, each);
        }
        zip.finish().unwrap();
    }

    #[test]
    fn pickles_are_read_up_to_a_total_not_each() {
        let dir = tempfile::tempdir().unwrap();
        let fits = dir.path().join("fits.ckpt");
        archive(&fits, 2, 30 << 20);
        check_pickle_file(&fits).unwrap();
        // Each under the limit, together over it (compressed, the file is a few hundred KB).
        let many = dir.path().join("many.ckpt");
        archive(&many, 4, 30 << 20);
        let e = check_pickle_file(&many).unwrap_err().to_string();
        assert!(e.contains("larger than 100 MiB"), "{e}");
    }

    #[test]
    fn a_tar_layout_is_refused_whatever_its_first_name_says() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.ckpt");
        // A TAR header whose file name reads as harmless pickles.
        let mut header = vec![0u8; 512];
        header[..5].copy_from_slice(b".....");
        header[257..262].copy_from_slice(b"ustar");
        std::fs::write(&path, &header).unwrap();
        let e = check_pickle_file(&path).unwrap_err().to_string();
        assert!(e.contains("TAR layout"), "{e}");
    }
}
