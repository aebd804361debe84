//! The change set, typed: which files changed and how ([`FileChange`]:
//! path, kind, the old and new blob and mode, lines added and removed, and
//! the file's hunks), below the gates and the WASM host (which hand it to
//! judges and plugins as `changed-files` and `file-diff`), the commit
//! module (which computes it from the workspace in one read) and the
//! engine (which summarises it for `policy:commit-ready` from the counts,
//! never from the text). The text form is rendered only at the edges
//! ([`render`]); [`split`] reads a unified diff someone gave (`check
//! --diff`) into the same type, following each hunk's line counts, so a
//! content line that looks like a header stays content.
//!
//! Paths in the text are quoted as git quotes them (`"a/t\tab"`), through
//! gix's quoting, both ways. It imports nothing of the crate, and never
//! applies or trusts a diff.

use gix::bstr::{BStr, BString, ByteSlice};
use std::borrow::Cow;

pub mod generated;
pub mod hunks;
pub use hunks::{Hunk, HunkLine, LineKind};

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// New: not in the base tree.
    Added,
    /// Its content or mode changed.
    Modified,
    /// Gone from the workspace.
    Deleted,
    /// Moved from another path (the old path is in the diff's headers).
    Renamed,
}

impl ChangeKind {
    /// Its name as plugins and the API show it (`added`).
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
            ChangeKind::Renamed => "renamed",
        }
    }
}

/// One side of a change: the blob (hex; possibly abbreviated when read
/// from a diff text, absent when the text did not say) and its git mode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Side {
    /// The blob's object id (hex), when known.
    pub id: Option<String>,
    /// Its git mode (`0o100644`, `0o100755`, `0o120000`), when known.
    pub mode: Option<u32>,
}

/// One file's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Workspace-relative path (the new path for renames), as the
    /// filesystem and git hold it: bytes, not necessarily UTF-8.
    pub path: BString,
    /// How it changed.
    pub kind: ChangeKind,
    /// Before (none for an added file) and after (none for a deleted one).
    pub old: Option<Side>,
    /// The side after the change (none for a deleted file).
    pub new: Option<Side>,
    /// Lines added and removed (0 for binary content).
    pub added: u64,
    /// Lines removed (0 for binary content).
    pub removed: u64,
    /// Whether either side's content is binary (no line counts, no text
    /// hunks).
    pub binary: bool,
    /// The file's part of the diff, `git diff` style, headers included
    /// (its headers only when the change was computed for its counts, or
    /// its content was capped).
    pub hunks: String,
    /// The same hunks as data (lines with their kind and numbers), when
    /// the change was computed for them (`Detail::Lines`); empty
    /// otherwise, and for binary or capped content.
    pub lines: Vec<Hunk>,
    /// Set when the file's content was left out of the change set (its
    /// hunks are its headers only, its counts 0): which cap and why. A
    /// gate given the change says so in its verdict.
    pub capped: Option<Capped>,
}

/// Why a file's content is not in a change set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capped {
    /// The file (either side) is larger than the per-file cap: it was
    /// never read into memory (a tracked one is hashed as it streams, to
    /// know whether it changed).
    File {
        /// The file's size (bytes).
        bytes: u64,
        /// The per-file cap (bytes).
        cap: u64,
    },
    /// The change set's text reached its total cap before this file.
    Total {
        /// The total cap (bytes).
        cap: u64,
    },
}

impl Capped {
    /// One line for a person (a verdict's finding, a judge's material).
    pub fn describe(&self) -> String {
        match self {
            Capped::File { bytes, cap } => format!(
                "its content was not read: {bytes} bytes, over the change set's per-file cap of {cap} bytes ([limits] change_file_cap_bytes)"
            ),
            Capped::Total { cap } => format!(
                "its content was left out: the change set reached its cap of {cap} bytes ([limits] change_cap_bytes)"
            ),
        }
    }
}

/// The bounds of a change set handed to gates: a file larger than
/// `file_bytes` is not read, and past `total_bytes` of diff text the
/// remaining files are listed with their headers only ([`Capped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeCaps {
    /// The per-file cap (bytes; `[limits] change_file_cap_bytes`).
    pub file_bytes: u64,
    /// The total cap of the diff text (bytes; `[limits] change_cap_bytes`).
    pub total_bytes: u64,
}

/// The default per-file cap of a change set.
pub const DEFAULT_FILE_CAP: u64 = 8 * 1024 * 1024;
/// The default total cap of a change set's text.
pub const DEFAULT_TOTAL_CAP: u64 = 16 * 1024 * 1024;

impl Default for ChangeCaps {
    fn default() -> Self {
        ChangeCaps {
            file_bytes: DEFAULT_FILE_CAP,
            total_bytes: DEFAULT_TOTAL_CAP,
        }
    }
}

impl FileChange {
    /// The path as text, for interfaces whose paths are strings (the
    /// plugins'); `None` when it is not UTF-8.
    pub fn path_str(&self) -> Option<&str> {
        self.path.to_str().ok()
    }

    /// The path for people (a byte that is not UTF-8 shown as U+FFFD).
    pub fn path_lossy(&self) -> Cow<'_, str> {
        self.path.to_str_lossy()
    }
}

/// The whole change as one unified diff (the files' parts in order).
pub fn render(changes: &[FileChange]) -> String {
    changes.iter().map(|f| f.hunks.as_str()).collect()
}

/// A path as `git diff` writes it after its `a/` or `b/` prefix: quoted
/// when it holds a byte git quotes (a tab, a newline, a quote, non-ASCII).
pub fn quoted(prefix: &str, path: &[u8]) -> String {
    let mut whole = prefix.as_bytes().to_vec();
    whole.extend_from_slice(path);
    gix::quote::ansi_c::quote(whole.as_bstr())
        .to_str_lossy()
        .into_owned()
}

/// A path as a diff header gives it (quoted or not), without its `a/` or
/// `b/` prefix; `None` for `/dev/null` or a quote that does not close.
fn header_path(text: &str) -> Option<BString> {
    let text = text.trim_end_matches(['\r']);
    let path: Cow<'_, BStr> = if text.starts_with('"') {
        gix::quote::ansi_c::undo(text.as_bytes().as_bstr()).ok()?.0
    } else {
        // An unquoted path ends at a tab (a timestamp may follow).
        let p = text.split('\t').next().unwrap_or_default();
        Cow::Borrowed(p.as_bytes().as_bstr())
    };
    if path.as_bytes() == b"/dev/null" {
        return None;
    }
    let path: &[u8] = path.as_bytes();
    let path = path
        .strip_prefix(b"a/")
        .or_else(|| path.strip_prefix(b"b/"))
        .unwrap_or(path);
    (!path.is_empty()).then(|| BString::from(path))
}

/// The new path of a `diff --git A B` header: B, quoted or after the last
/// ` b/` of an unquoted pair.
fn git_header_new(rest: &str) -> Option<BString> {
    if rest.starts_with('"') {
        let (_, used) = gix::quote::ansi_c::undo(rest.as_bytes().as_bstr()).ok()?;
        return header_path(rest.get(used..)?.trim_start());
    }
    if let Some(idx) = rest.find(" \"") {
        return header_path(rest.get(idx + 1..)?);
    }
    let idx = rest.rfind(" b/")?;
    header_path(rest.get(idx + 1..)?)
}

/// `@@ -a,b +c,d @@`: the old and new line counts (a missing count is 1).
fn hunk_counts(line: &str) -> Option<(u64, u64)> {
    let body = line.strip_prefix("@@ ")?;
    let (ranges, _) = body.split_once(" @@")?;
    let mut parts = ranges.split(' ');
    let count = |r: &str, sign: char| -> Option<u64> {
        let r = r.strip_prefix(sign)?;
        match r.split_once(',') {
            Some((_, n)) => n.parse().ok(),
            None => Some(1),
        }
    };
    Some((count(parts.next()?, '-')?, count(parts.next()?, '+')?))
}

/// Reads a diff into files: `git diff` output (`diff --git` headers,
/// quoted paths included) and plain unified diffs (`---`/`+++` pairs).
/// Lines inside a hunk are taken by the hunk's counts, so a removed line
/// `--- x` or an added line `+++ y` is content, never a header.
pub fn split(diff: &str) -> Vec<FileChange> {
    let lines: Vec<&str> = diff.lines().collect();
    let mut files = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let starts_git = lines[i].starts_with("diff --git ");
        let starts_plain =
            lines[i].starts_with("--- ") && lines.get(i + 1).is_some_and(|n| n.starts_with("+++ "));
        if !(starts_git || starts_plain) {
            i += 1;
            continue;
        }
        let (file, next) = read_file(&lines, i);
        if let Some(f) = file {
            files.push(f);
        }
        i = next.max(i + 1);
    }
    files
}

/// One file from its first header line at `start`; the file (if it names
/// one) and the index of the first line after it.
fn read_file(lines: &[&str], start: usize) -> (Option<FileChange>, usize) {
    let mut kind = ChangeKind::Modified;
    let (mut old_path, mut new_path, mut header_new) = (None, None, None);
    let (mut saw_old, mut old_is_null) = (false, false);
    let mut new_is_null = false;
    let (mut old, mut new) = (Side::default(), Side::default());
    let (mut added, mut removed, mut binary) = (0u64, 0u64, false);
    let mut i = start;
    // Header lines, up to the first hunk or the next file.
    while i < lines.len() {
        let l = lines[i];
        if i > start && (l.starts_with("diff --git ") || l.starts_with("@@ ")) {
            break;
        }
        if i > start
            && l.starts_with("--- ")
            && saw_old
            && lines.get(i + 1).is_some_and(|n| n.starts_with("+++ "))
        {
            break;
        }
        if let Some(rest) = l.strip_prefix("diff --git ") {
            header_new = git_header_new(rest);
        } else if let Some(m) = l.strip_prefix("new file mode ") {
            kind = ChangeKind::Added;
            new.mode = u32::from_str_radix(m.trim(), 8).ok();
        } else if let Some(m) = l.strip_prefix("deleted file mode ") {
            kind = ChangeKind::Deleted;
            old.mode = u32::from_str_radix(m.trim(), 8).ok();
        } else if let Some(m) = l.strip_prefix("old mode ") {
            old.mode = u32::from_str_radix(m.trim(), 8).ok();
        } else if let Some(m) = l.strip_prefix("new mode ") {
            new.mode = u32::from_str_radix(m.trim(), 8).ok();
        } else if let Some(p) = l.strip_prefix("rename to ") {
            kind = ChangeKind::Renamed;
            new_path = header_path(p.trim_start()).or(new_path);
        } else if let Some(rest) = l.strip_prefix("index ") {
            let mut words = rest.split(' ');
            if let Some((a, b)) = words.next().and_then(|ids| ids.split_once("..")) {
                old.id = Some(a.to_string());
                new.id = Some(b.to_string());
            }
            if let Some(m) = words.next().and_then(|m| u32::from_str_radix(m, 8).ok()) {
                old.mode = old.mode.or(Some(m));
                new.mode = new.mode.or(Some(m));
            }
        } else if let Some(p) = l.strip_prefix("--- ") {
            saw_old = true;
            old_path = header_path(p);
            old_is_null = old_path.is_none();
        } else if let Some(p) = l.strip_prefix("+++ ") {
            let p = header_path(p);
            new_is_null = p.is_none();
            if p.is_some() {
                new_path = p;
            }
        } else if l.starts_with("Binary files ") || l == "GIT binary patch" {
            binary = true;
        }
        i += 1;
    }
    // Hunks, each by its counts.
    while i < lines.len() {
        let Some((mut old_left, mut new_left)) = hunk_counts(lines[i]) else {
            break;
        };
        i += 1;
        while i < lines.len() && (old_left > 0 || new_left > 0) {
            let l = lines[i];
            match l.as_bytes().first() {
                Some(b'+') if new_left > 0 => {
                    added += 1;
                    new_left -= 1;
                }
                Some(b'-') if old_left > 0 => {
                    removed += 1;
                    old_left -= 1;
                }
                Some(b' ') | None => {
                    old_left = old_left.saturating_sub(1);
                    new_left = new_left.saturating_sub(1);
                }
                Some(b'\\') => {}
                _ => break,
            }
            i += 1;
        }
        // "\ No newline at end of file" after the last line.
        while i < lines.len() && lines[i].starts_with('\\') {
            i += 1;
        }
    }
    if old_is_null && kind == ChangeKind::Modified {
        kind = ChangeKind::Added;
    }
    if new_is_null {
        kind = ChangeKind::Deleted;
    }
    let path = match (new_path, header_new, old_path) {
        (Some(p), _, _) => Some(p),
        (None, Some(h), _) => Some(h),
        (None, None, o) => o,
    };
    let file = path.map(|path| FileChange {
        path,
        kind,
        old: (kind != ChangeKind::Added).then_some(old),
        new: (kind != ChangeKind::Deleted).then_some(new),
        added,
        removed,
        binary,
        hunks: lines[start..i].join("\n") + "\n",
        lines: Vec::new(),
        capped: None,
    });
    (file, i)
}

#[cfg(test)]
mod tests;
