//! Generation settings in EXIF, as JPEG and WebP files carry them: A1111's (and Forge's,
//! SD.Next's, Civitai's, Fooocus') UserComment, and ComfyUI's `prompt:{…}` IFD0 strings.
//!
//! Readers follow A1111's `read_info_from_image`, a little more forgiving: UserComment is
//! read in the EXIF IFD or in IFD0 (where Fooocus' Pillow `Exif` puts it), and UTF-16 under
//! the `UNICODE` prefix in either byte order (A1111 writes big-endian, some tools the file's
//! own order); a comment that is not settings (a camera's "Picture 1") is left out. The
//! writer's UserComment is the bytes A1111's `piexif` makes.

use exif::experimental::Writer;
use exif::{Field, In, Reader, Tag, Value};

/// EXIF's tag for a user's comment, in whichever IFD a writer put it.
const USER_COMMENT: u16 = 0x9286;
/// The character-code prefixes of a UserComment (EXIF 2.3, 4.6.5).
const UNICODE_PREFIX: &[u8; 8] = b"UNICODE\0";
const ASCII_PREFIX: &[u8; 8] = b"ASCII\0\0\0";
const JIS_PREFIX: &[u8; 8] = b"JIS\0\0\0\0\0";
/// What some writers (Pillow's WebP writer before 9.x, raw APP1 copies) leave before the TIFF
/// header.
const APP1_HEADER: &[u8] = b"Exif\0\0";

/// The text entries an image's EXIF holds, in the keys PNG text chunks use: `parameters`
/// for a UserComment, and `prompt` / `workflow` (any `key:{…}` IFD0 string) for ComfyUI's.
/// Unreadable or unrelated EXIF gives none: the image itself is still fine.
pub fn text_entries(raw: &[u8]) -> Vec<(String, String)> {
    let raw = raw.strip_prefix(APP1_HEADER).unwrap_or(raw);
    let mut reader = Reader::new();
    // Needed for every piexif file, not only damaged ones: piexif ends its EXIF IFD without
    // the next-IFD offset, which kamadak-exif then reports as an error after reading the
    // entries. A damaged field elsewhere (a bad GPS offset) must not hide the comment either.
    reader.continue_on_error(true);
    let Ok(exif) = reader
        .read_raw(raw.to_vec())
        .or_else(|e| e.distill_partial_result(|_| {}))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for field in exif.fields() {
        match (&field.value, field.ifd_num) {
            // EXIF says UNDEFINED; Pillow writes Fooocus' text as ASCII (its `str`, non-ASCII
            // as `?`) or BYTE (its forks' UTF-8 bytes).
            (Value::Undefined(bytes, _) | Value::Byte(bytes), _)
                if field.tag.number() == USER_COMMENT =>
            {
                out.extend(settings_entry(decode_user_comment(bytes)));
            }
            (Value::Ascii(strings), _) if field.tag.number() == USER_COMMENT => {
                let text = strings.iter().map(|s| String::from_utf8_lossy(s)).collect();
                out.extend(settings_entry(text));
            }
            (Value::Ascii(strings), In::PRIMARY) => {
                for s in strings {
                    if let Some(entry) = comfy_entry(&String::from_utf8_lossy(s)) {
                        out.push(entry);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// A comment's entries, when it is settings: A1111's text (it always has a `Steps: ` field)
/// or Fooocus' JSON as `parameters`; the JSON of ComfyUI save nodes that keep the graphs in
/// the comment (`{"prompt": {…}, "workflow": {…}}`) as a `prompt` and a `workflow` entry.
/// Cameras and editors write comments of their own: none.
fn settings_entry(text: String) -> Vec<(String, String)> {
    let text = text.trim();
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_str(text)
        && map.get("prompt").is_some_and(serde_json::Value::is_object)
    {
        return ["prompt", "workflow"]
            .into_iter()
            .filter_map(|key| Some((key.to_string(), map.get(key)?.to_string())))
            .collect();
    }
    let is_settings = text.starts_with('{') || text.lines().any(|line| line.contains("Steps: "));
    if is_settings {
        vec![("parameters".to_string(), text.to_string())]
    } else {
        Vec::new()
    }
}

/// ComfyUI's `key:{json}` strings (SaveAnimatedWEBP: `prompt:` in Model, `workflow:` in
/// Make and below).
fn comfy_entry(s: &str) -> Option<(String, String)> {
    let (key, rest) = s.split_once(':')?;
    let is_key = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (is_key && rest.trim_start().starts_with('{')).then(|| (key.to_string(), rest.to_string()))
}

/// A UserComment's text. Its first eight bytes name the character code; without a known
/// one, A1111 reads the whole value as UTF-8 (so do we, less the NULs around it).
fn decode_user_comment(bytes: &[u8]) -> String {
    let text = match bytes.split_at_checked(8) {
        Some((prefix, body)) if prefix == UNICODE_PREFIX => decode_utf16(body),
        // Shift-JIS is not decoded: its ASCII (A1111's field names) reads the same.
        Some((prefix, body)) if prefix == ASCII_PREFIX || prefix == JIS_PREFIX => {
            String::from_utf8_lossy(body).into()
        }
        _ => String::from_utf8_lossy(bytes).into_owned(),
    };
    text.trim_matches('\0').to_string()
}

/// UTF-16 of either byte order: a byte-order mark says which; without one, text that is
/// mostly Latin has its zero bytes first in big-endian and second in little-endian.
fn decode_utf16(body: &[u8]) -> String {
    let (big_endian, body) = match body {
        [0xFE, 0xFF, rest @ ..] => (true, rest),
        [0xFF, 0xFE, rest @ ..] => (false, rest),
        _ => {
            let zeros_at = |first: usize| {
                body.iter()
                    .skip(first)
                    .step_by(2)
                    .filter(|&&b| b == 0)
                    .count()
            };
            (zeros_at(0) >= zeros_at(1), body)
        }
    };
    let units = body.chunks_exact(2).map(|pair| {
        let pair = [pair[0], pair[1]];
        if big_endian {
            u16::from_be_bytes(pair)
        } else {
            u16::from_le_bytes(pair)
        }
    });
    char::decode_utf16(units)
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect()
}

/// The UserComment A1111 writes for `text`: `piexif.helper.UserComment.dump(text,
/// encoding="unicode")`, the `UNICODE` prefix and UTF-16 big-endian.
pub fn a1111_user_comment(text: &str) -> Vec<u8> {
    let mut out = UNICODE_PREFIX.to_vec();
    out.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
    out
}

/// A raw EXIF block (a TIFF header and its IFDs, without the `Exif\0\0` of a JPEG APP1)
/// carrying `text` as A1111 writes it: one UserComment in the EXIF IFD. The `image` crate's
/// JPEG and WebP encoders embed it as it is.
pub fn a1111_exif(text: &str) -> Result<Vec<u8>, String> {
    comment_block(a1111_user_comment(text))
}

/// A big-endian EXIF block (as piexif writes) of one UserComment.
fn comment_block(comment: Vec<u8>) -> Result<Vec<u8>, String> {
    let field = Field {
        tag: Tag::UserComment,
        ifd_num: In::PRIMARY,
        value: Value::Undefined(comment, 0),
    };
    let mut writer = Writer::new();
    writer.push_field(&field);
    let mut out = std::io::Cursor::new(Vec::new());
    writer
        .write(&mut out, false)
        .map_err(|e| format!("could not write the settings as EXIF ({e})"))?;
    Ok(out.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_comments_of_every_character_code_read_back() {
        let text = "caf\u{e9} \u{1d11e}";
        let le: Vec<u8> = UNICODE_PREFIX
            .iter()
            .copied()
            .chain(text.encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        assert_eq!(decode_user_comment(&a1111_user_comment(text)), text);
        assert_eq!(decode_user_comment(&le), text);
        assert_eq!(decode_user_comment(b"ASCII\0\0\0Steps: 20\0"), "Steps: 20");
        assert_eq!(
            decode_user_comment(b"{\"prompt\": \"x\"}"),
            "{\"prompt\": \"x\"}"
        );
        assert_eq!(decode_user_comment(b"\0\0\0\0\0\0\0\0Steps: 4"), "Steps: 4");
        assert_eq!(decode_user_comment(b"JIS\0\0\0\0\0Steps: 4"), "Steps: 4");
        assert_eq!(decode_user_comment(b""), "");
    }

    #[test]
    fn the_written_block_reads_back_and_garbage_reads_as_nothing() {
        let text = "a fox\nSteps: 20, Seed: 1";
        assert_eq!(
            text_entries(&a1111_exif(text).unwrap()),
            vec![("parameters".to_string(), text.to_string())]
        );
        let mut with_header = APP1_HEADER.to_vec();
        with_header.extend(a1111_exif(text).unwrap());
        assert_eq!(text_entries(&with_header).len(), 1);
        assert!(text_entries(b"not a TIFF at all").is_empty());
        assert!(text_entries(&a1111_exif(text).unwrap()[..12]).is_empty());
    }

    #[test]
    fn a_camera_s_comment_is_not_settings_and_comfy_graphs_in_one_are_found() {
        for comment in ["ASCII\0\0\0      ", "ASCII\0\0\0Picture 1", "UNICODE\0"] {
            let mut bytes = comment.as_bytes().to_vec();
            bytes.resize(bytes.len().max(8), 0);
            let block = comment_block(bytes).unwrap();
            assert!(text_entries(&block).is_empty(), "{comment:?}");
        }
        let fooocus = br#"{"prompt": "a cat", "steps": 30}"#.to_vec();
        let entries = text_entries(&comment_block(fooocus).unwrap());
        assert_eq!(entries[0].0, "parameters", "{entries:?}");
        let graphs = br#"{"prompt": {"3": {"class_type": "KSampler"}}, "workflow": {}}"#;
        let entries = text_entries(&comment_block(graphs.to_vec()).unwrap());
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["prompt", "workflow"],
            "ComfyUI's graphs in a comment"
        );
    }

    #[test]
    fn only_key_and_json_strings_are_comfy_entries() {
        assert_eq!(
            comfy_entry("prompt:{\"3\": {}}"),
            Some(("prompt".into(), "{\"3\": {}}".into()))
        );
        assert_eq!(comfy_entry("Canon EOS R5"), None);
        assert_eq!(comfy_entry("Model: x"), None);
        assert_eq!(comfy_entry("a b:{}"), None);
    }
}
