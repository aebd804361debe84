//! The agent's last message, read from a CLI's transcript when its hook
//! JSON does not carry it (Claude Code before `last_assistant_message`,
//! Cursor).
//!
//! It owns the reading rules: only a regular file (never a FIFO or a
//! device: the read must not hang or block), only its last 4 MiB, JSON lines
//! read from the end, the first entry whose role is `assistant` (at the top,
//! under `message` or under `payload`) giving its text parts. It must never
//! fail the hook: no transcript, or none readable, is no message.

use serde_json::Value;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

const TAIL: u64 = 4 * 1024 * 1024;

/// The last assistant message in the transcript at `path`, if one is found.
pub fn last_assistant_message(path: &Path) -> Option<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let start = meta.len().saturating_sub(TAIL);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::new();
    f.take(TAIL).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    text.lines().rev().find_map(|line| {
        let v: Value = serde_json::from_str(line).ok()?;
        // The message is the entry itself, or under `message` (Claude
        // Code) or `payload` (Codex).
        [&v, &v["message"], &v["payload"]]
            .into_iter()
            .find(|m| m["role"] == "assistant")
            .and_then(text_of)
    })
}

/// The text of a message: a string `content`, or the `text` of its parts.
fn text_of(m: &Value) -> Option<String> {
    match &m["content"] {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Array(parts) => {
            let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
            let joined = text.join("\n");
            (!joined.trim().is_empty()).then_some(joined)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_last_assistant_text_in_each_cli_shape() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("t.jsonl");
        let claude = r#"{"type":"user","message":{"role":"user","content":"do it"}}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"first"}]}}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","name":"x"}]}}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"All done."}]}}
{"type":"system","content":"hook ran"}"#;
        std::fs::write(&p, claude).unwrap();
        assert_eq!(last_assistant_message(&p).as_deref(), Some("All done."));
        let codex = r#"{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Codex done."}]}}
{"type":"event_msg","payload":{"type":"token_count"}}"#;
        std::fs::write(&p, codex).unwrap();
        assert_eq!(last_assistant_message(&p).as_deref(), Some("Codex done."));
        let plain = "{\"role\":\"assistant\",\"content\":\"plain\"}\nnot json\n";
        std::fs::write(&p, plain).unwrap();
        assert_eq!(last_assistant_message(&p).as_deref(), Some("plain"));
    }

    #[test]
    fn a_fifo_a_symlink_or_nothing_is_no_message() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("fifo");
        let path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        assert_eq!(last_assistant_message(&fifo), None);
        let real = t.path().join("real");
        std::fs::write(&real, "{\"role\":\"assistant\",\"content\":\"x\"}").unwrap();
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(last_assistant_message(&link), None);
        assert_eq!(last_assistant_message(&t.path().join("none")), None);
    }
}
