//! The bodies of `GET /v1/policies/{id}/diff`: a page of a policy's
//! patch, its text and its files, each file's hunks as data (what a reader
//! draws without reading the text back). Shapes only, as the rest of
//! `wire`.

use super::PolicyStatus;
use serde::{Deserialize, Serialize};

/// `GET /v1/policies/{id}/diff`: one page of the exact patch the policy
/// commits (or committed), `git diff --full-index` style.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyDiff {
    /// The policy whose patch this is.
    pub policy_id: String,
    /// The policy's status when the page was made.
    pub status: PolicyStatus,
    /// The tree committed: the snapshot's, or the commit's.
    pub tree: String,
    /// The commit the patch is against: where the branch is now (before
    /// the commit) or the commit's parent (after); null for none.
    pub base: Option<String>,
    /// The commit made, once it is.
    pub commit: Option<String>,
    /// The branch moved since the snapshot was taken.
    pub head_moved: bool,
    /// This page's files, in the patch's order.
    pub files: Vec<DiffFile>,
    /// This page's text (whole files, except one marked `cut`).
    pub patch: String,
    /// With `since=TREE`: that tree, which the patch is against (an
    /// earlier snapshot's: what changed since it was reviewed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The index of this page's first file among all of them.
    pub from: usize,
    /// `from` of the next page; null on the last.
    pub next_from: Option<usize>,
    /// How many files the whole patch has.
    pub total_files: usize,
    /// Why the page is not the whole patch, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One file of a [`PolicyDiff`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffFile {
    /// The file's path (after a rename, its new one).
    pub path: String,
    /// The path before a rename.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// added, modified, deleted or renamed.
    pub kind: String,
    /// Lines added.
    pub added: u64,
    /// Lines removed.
    pub removed: u64,
    /// A binary file: counted, its contents not shown.
    pub binary: bool,
    /// Its hunks were over the page's bound: the page holds its headers
    /// only.
    #[serde(default)]
    pub cut: bool,
    /// Its mode before (`100644`, `100755`, `120000` a link, `160000` a
    /// submodule); none when added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_mode: Option<String>,
    /// Its mode after; none when deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_mode: Option<String>,
    /// Its content became empty.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub emptied: bool,
    /// Its blob before (hex); none when added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_blob: Option<String>,
    /// Its blob after (hex); none when deleted. A reader keeps what it
    /// knows of the file ("viewed") by it: a new blob is a new content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_blob: Option<String>,
    /// Why a reader sees it collapsed at first (`a lockfile`, `vendored`,
    /// `minified`); none for a file shown open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated: Option<String>,
    /// Its hunks as data, what a reader draws (the page: never the patch
    /// text read back); none when binary, cut, or a rename or mode change
    /// alone.
    #[serde(default)]
    pub hunks: Vec<DiffHunk>,
}

/// One hunk of a [`DiffFile`]: its `@@ -oldStart,oldLines
/// +newStart,newLines @@` ranges and its lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffHunk {
    /// Its first old line (the one before it when it holds none).
    pub old_start: u32,
    /// How many old lines it holds.
    pub old_lines: u32,
    /// Its first new line (as `oldStart`).
    pub new_start: u32,
    /// How many new lines it holds.
    pub new_lines: u32,
    /// Its lines, in order.
    pub lines: Vec<DiffLine>,
}

/// What a [`DiffLine`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiffLineKind {
    /// Unchanged, on both sides.
    Context,
    /// On the new side only.
    Added,
    /// On the old side only.
    Removed,
}

/// One line of a [`DiffHunk`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffLine {
    /// Context, added or removed.
    pub kind: DiffLineKind,
    /// Its text, without its newline.
    pub text: String,
    /// Its number in the old file; none for an added line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<u32>,
    /// Its number in the new file; none for a removed line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<u32>,
    /// The file ends here without a newline.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_newline: bool,
}
