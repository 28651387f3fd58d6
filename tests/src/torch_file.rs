//! Writes PyTorch checkpoints the way `torch.save` does (a zip with `archive/data.pkl`, a
//! protocol-2 pickle, and one entry per storage), so tests exercise the real `.ckpt` path
//! without Python. Also writes a malicious pickle that imports `os.system`.

use std::io::Write;
use std::path::Path;

/// One float32 tensor to store.
pub struct TorchTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

struct Pickle(Vec<u8>);

impl Pickle {
    fn op(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
    fn text(&mut self, s: &str) {
        self.op(b"X");
        self.op(&(s.len() as u32).to_le_bytes());
        self.op(s.as_bytes());
    }
    fn int(&mut self, v: usize) {
        self.op(b"J");
        self.op(&(v as i32).to_le_bytes());
    }
    fn global(&mut self, module: &str, name: &str) {
        self.op(format!("c{module}\n{name}\n").as_bytes());
    }
    fn int_tuple(&mut self, values: &[usize]) {
        self.op(b"(");
        for &v in values {
            self.int(v);
        }
        self.op(b"t");
    }
}

/// Writes `tensors` as a `.ckpt`, nested under `state_dict` as A1111 checkpoints are.
pub fn write_checkpoint(path: &Path, tensors: &[TorchTensor]) {
    let mut p = Pickle(Vec::new());
    p.op(b"\x80\x02}(");
    p.text("state_dict");
    p.op(b"}(");
    for (i, t) in tensors.iter().enumerate() {
        p.text(&t.name);
        p.global("torch._utils", "_rebuild_tensor_v2");
        p.op(b"((");
        p.text("storage");
        p.global("torch", "FloatStorage");
        p.text(&i.to_string());
        p.text("cpu");
        p.int(t.data.len());
        p.op(b"tQ");
        p.int(0);
        p.int_tuple(&t.shape);
        let strides: Vec<usize> = (0..t.shape.len())
            .map(|d| t.shape[d + 1..].iter().product())
            .collect();
        p.int_tuple(&strides);
        p.op(b"\x89");
        p.global("collections", "OrderedDict");
        p.op(b")RtR");
    }
    p.op(b"uu.");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    zip.start_file("archive/data.pkl", stored).unwrap();
    zip.write_all(&p.0).unwrap();
    zip.start_file("archive/byteorder", stored).unwrap();
    zip.write_all(b"little").unwrap();
    for (i, t) in tensors.iter().enumerate() {
        zip.start_file(format!("archive/data/{i}"), stored).unwrap();
        let bytes: Vec<u8> = t.data.iter().flat_map(|v| v.to_le_bytes()).collect();
        zip.write_all(&bytes).unwrap();
    }
    zip.start_file("archive/version", stored).unwrap();
    zip.write_all(b"3\n").unwrap();
    zip.finish().unwrap();
}

/// A `.ckpt` whose pickle calls `os.system` (as `posix.system`) while being loaded.
pub fn write_malicious_checkpoint(path: &Path) {
    let mut p = Pickle(Vec::new());
    p.op(b"\x80\x02}(");
    p.text("state_dict");
    p.global("posix", "system");
    p.op(b"(");
    p.text("echo pwned > /tmp/ember-pwned");
    p.op(b"tRu.");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    zip.start_file("archive/data.pkl", stored).unwrap();
    zip.write_all(&p.0).unwrap();
    zip.finish().unwrap();
}
