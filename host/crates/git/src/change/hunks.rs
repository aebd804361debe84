//! A file's hunks as data: each hunk's ranges as `git diff` writes them in
//! its `@@` header, and each line's kind, text and number on each side,
//! taken from the diff's operations as the text is rendered from them
//! (never by reading the text back), so a reader (the page, the comment
//! check) never re-parses a patch: an added line that reads `++ b/x` or
//! `@@` is an added line, and a quoted name is the file's name.
//!
//! It owns the types and their making from one `similar` hunk; it must
//! never read a file or render text.

use similar::udiff::UnifiedDiffHunk;

/// What a line of a hunk is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// On both sides, unchanged.
    Context,
    /// On the new side only.
    Added,
    /// On the old side only.
    Removed,
}

impl LineKind {
    /// Its name as the API shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            LineKind::Context => "context",
            LineKind::Added => "added",
            LineKind::Removed => "removed",
        }
    }
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HunkLine {
    /// Context, added or removed.
    pub kind: LineKind,
    /// The line's text, without its newline (bytes that are not UTF-8
    /// shown as U+FFFD).
    pub text: String,
    /// Its number in the old file (from 1); none for an added line.
    pub old: Option<u32>,
    /// Its number in the new file (from 1); none for a removed line.
    pub new: Option<u32>,
    /// The file ends with this line and no newline (`\ No newline at end
    /// of file` follows it in the text).
    pub no_newline: bool,
}

/// One hunk: its ranges as its `@@ -old_start,old_lines
/// +new_start,new_lines @@` header gives them, and its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// The first old line (the line before the hunk when it holds no old
    /// line, as git writes it).
    pub old_start: u32,
    /// How many old lines it holds.
    pub old_lines: u32,
    /// The first new line (as `old_start`).
    pub new_start: u32,
    /// How many new lines it holds.
    pub new_lines: u32,
    /// Its lines, in order.
    pub lines: Vec<HunkLine>,
}

impl Hunk {
    /// The hunk's header, as `git diff` writes it (without a function
    /// context: no diff driver runs).
    pub fn header(&self) -> String {
        let range = |start: u32, lines: u32| {
            if lines == 1 {
                start.to_string()
            } else {
                format!("{start},{lines}")
            }
        };
        format!(
            "@@ -{} +{} @@",
            range(self.old_start, self.old_lines),
            range(self.new_start, self.new_lines)
        )
    }
}

fn number(index: Option<usize>) -> Option<u32> {
    index.map(|i| u32::try_from(i + 1).unwrap_or(u32::MAX))
}

/// The ranges of a hunk's side, from its operations' (`start..end`,
/// 0-based): git's start (1-based, or the line before an empty range) and
/// its length.
fn range(first: usize, end: usize) -> (u32, u32) {
    let len = end.saturating_sub(first);
    let start = if len == 0 { first } else { first + 1 };
    let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    (clamp(start), clamp(len))
}

/// The hunk `h` of a line diff, as data.
pub fn of_unified(h: &UnifiedDiffHunk<'_, '_, '_, str>) -> Hunk {
    let ops = h.ops();
    let (old, new) = match (ops.first(), ops.last()) {
        (Some(a), Some(z)) => (
            range(a.old_range().start, z.old_range().end),
            range(a.new_range().start, z.new_range().end),
        ),
        _ => ((0, 0), (0, 0)),
    };
    let lines = h
        .iter_changes()
        .map(|c| {
            let value = c.value();
            let text = value.strip_suffix('\n').unwrap_or(value).to_string();
            let (kind, old, new) = match c.tag() {
                similar::ChangeTag::Equal => (
                    LineKind::Context,
                    number(c.old_index()),
                    number(c.new_index()),
                ),
                similar::ChangeTag::Insert => (LineKind::Added, None, number(c.new_index())),
                similar::ChangeTag::Delete => (LineKind::Removed, number(c.old_index()), None),
            };
            HunkLine {
                kind,
                text,
                old,
                new,
                no_newline: !value.ends_with('\n'),
            }
        })
        .collect();
    Hunk {
        old_start: old.0,
        old_lines: old.1,
        new_start: new.0,
        new_lines: new.1,
        lines,
    }
}
