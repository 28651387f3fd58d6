//! How paths are kept in JSON files (the queue kept across a start-again): a path that is
//! text as its text, one that is not (a Linux file name in another encoding) as its bytes,
//! so that no job fails to be kept for its path. Use with `#[serde(with = "path_json")]`,
//! or `path_json::many` for a list.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The JSON form of one path.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Stored {
    Text(String),
    /// A Unix path's bytes.
    Bytes {
        bytes: Vec<u8>,
    },
    /// A Windows path's UTF-16 units (unpaired surrogates kept).
    Wide {
        wide: Vec<u16>,
    },
}

impl Stored {
    fn of(path: &Path) -> Self {
        if let Some(text) = path.to_str() {
            return Stored::Text(text.to_owned());
        }
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            Stored::Bytes {
                bytes: path.as_os_str().as_bytes().to_vec(),
            }
        }
        #[cfg(windows)]
        {
            use std::os::windows::ffi::OsStrExt;
            Stored::Wide {
                wide: path.as_os_str().encode_wide().collect(),
            }
        }
        #[cfg(not(any(unix, windows)))]
        Stored::Text(path.to_string_lossy().into_owned())
    }

    fn path(self) -> Result<PathBuf, &'static str> {
        match self {
            Stored::Text(text) => Ok(text.into()),
            #[cfg(unix)]
            Stored::Bytes { bytes } => {
                use std::os::unix::ffi::OsStringExt;
                Ok(OsString::from_vec(bytes).into())
            }
            #[cfg(windows)]
            Stored::Wide { wide } => {
                use std::os::windows::ffi::OsStringExt;
                Ok(OsString::from_wide(&wide).into())
            }
            _ => Err("a path kept on another operating system"),
        }
    }
}

pub fn serialize<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    Stored::of(path).serialize(s)
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    Stored::deserialize(d)?
        .path()
        .map_err(serde::de::Error::custom)
}

/// A list of paths.
pub mod many {
    use super::*;

    pub fn serialize<S: Serializer>(paths: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(paths.iter().map(|p| Stored::of(p)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
        Vec::<Stored>::deserialize(d)?
            .into_iter()
            .map(|s| s.path().map_err(serde::de::Error::custom))
            .collect()
    }
}

/// A path that may be absent.
pub mod optional {
    use super::*;

    pub fn serialize<S: Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        path.as_deref().map(Stored::of).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        Option::<Stored>::deserialize(d)?
            .map(|s| s.path().map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Kept {
        #[serde(with = "super")]
        one: PathBuf,
        #[serde(with = "super::many")]
        many: Vec<PathBuf>,
    }

    #[test]
    fn text_paths_stay_text() {
        let kept = Kept {
            one: "/models/sd 1.5/a.safetensors".into(),
            many: vec!["loras".into(), "é/ü".into()],
        };
        let json = serde_json::to_string(&kept).unwrap();
        assert_eq!(
            json,
            r#"{"one":"/models/sd 1.5/a.safetensors","many":["loras","é/ü"]}"#
        );
        assert_eq!(serde_json::from_str::<Kept>(&json).unwrap(), kept);
    }

    #[cfg(unix)]
    #[test]
    fn paths_that_are_not_text_come_back_byte_for_byte() {
        use std::os::unix::ffi::OsStringExt;
        // Latin-1 "café" as a file name: not UTF-8.
        let latin1 = PathBuf::from(OsString::from_vec(b"/loras/caf\xe9".to_vec()));
        let kept = Kept {
            one: latin1.clone(),
            many: vec!["text".into(), latin1],
        };
        let json = serde_json::to_string(&kept).unwrap();
        assert!(json.contains(r#"{"bytes":["#), "{json}");
        assert_eq!(serde_json::from_str::<Kept>(&json).unwrap(), kept);
        let foreign = r#"{"one": {"wide": [97]}, "many": []}"#;
        let error = serde_json::from_str::<Kept>(foreign).unwrap_err();
        assert!(
            error.to_string().contains("another operating system"),
            "{error}"
        );
    }
}
