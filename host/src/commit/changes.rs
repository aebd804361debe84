//! What changed in the workspace since HEAD, as a unified diff in `git diff`
//! form, for gates run by the daemon (plugins get its files as
//! `changed-files` and each file's part through `file-diff`).
//!
//! It reads the workspace through the same confined snapshot as a commit
//! (cap-std, symlinks never followed, `.gitignore` honoured, `.git`
//! skipped) and HEAD's blobs in process: like the commit, it runs nothing
//! the repository names (no diff driver, no textconv, no filter). Content
//! is compared raw.

use super::{
    CommitError, EntryKind, Excludes, Workspace, git, is_dot_git, normalise_paths, read_snapshot,
    resolve_head, tracked_entries,
};
use crate::change::{ChangeKind, FileChange, Side, quoted};
use gix::bstr::{BString, ByteSlice};
use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::Path;

/// The most diff text produced: beyond it the diff is refused rather than
/// cut (a cut diff would hide changed files from the gates).
pub const MAX_DIFF_BYTES: usize = 16 * 1024 * 1024;

pub(super) fn mode(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::BlobExecutable => "100755",
        EntryKind::Link => "120000",
        EntryKind::Commit => "160000",
        EntryKind::Tree => "040000",
        EntryKind::Blob => "100644",
    }
}

/// Every change between HEAD's tree and the workspace (tracked files
/// modified or deleted, untracked files not ignored), as one unified diff.
/// Empty when nothing changed. An unborn HEAD diffs against nothing.
pub fn workspace_diff(workspace: &Path) -> Result<String, CommitError> {
    Ok(workspace_changes(workspace)?
        .into_iter()
        .map(|f| f.hunks)
        .collect())
}

/// The same changes, one entry per file (what plugins get as
/// `changed-files` and `file-diff`). Every top-level name is taken
/// literally, whatever it holds (`-x`, `:x`, `*`, `?`, `[`, `\`, spaces,
/// newlines): no pathspec is ever built from a name.
pub fn workspace_changes(workspace: &Path) -> Result<Vec<FileChange>, CommitError> {
    let t0 = std::time::Instant::now();
    let ws = Workspace::open(workspace)?;
    let repo = &ws.repo;
    let head = resolve_head(repo)?;
    let mut names = BTreeSet::new();
    // Top-level names are given to the snapshot as paths, which would take
    // them even if ignored (as `git add -f`): filter the ignored ones here.
    let mut excludes = Excludes::new(&ws.common)?;
    excludes.push_dir(&ws.root, b"".as_bstr())?;
    let entries = ws.root.entries().map_err(|source| CommitError::Io {
        path: ".".into(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| CommitError::Io {
            path: ".".into(),
            source,
        })?;
        let name = entry.file_name();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        // Names that are not UTF-8 cannot be named through the plugin
        // interface (its paths are strings); they are logged, not hidden.
        match name.to_str() {
            Some(n) => {
                if !is_dot_git(n.as_bytes()) && !excludes.is_ignored(n.as_bytes().as_bstr(), is_dir)
                {
                    names.insert(n.to_string());
                }
            }
            None => {
                if !excludes.is_ignored(
                    std::os::unix::ffi::OsStrExt::as_bytes(name.as_os_str()).as_bstr(),
                    is_dir,
                ) {
                    return Err(CommitError::PathNotUtf8(
                        name.to_string_lossy().into_owned(),
                    ));
                }
            }
        }
    }
    if let Some(tree) = head.tree {
        let tree = repo.find_tree(tree).map_err(git("read HEAD tree"))?;
        for entry in tree.iter() {
            let entry = entry.map_err(git("read HEAD tree"))?;
            names.insert(entry.filename().to_str_lossy().into_owned());
        }
    }
    let paths: Vec<String> = names.into_iter().collect();
    let t1 = std::time::Instant::now();
    let tracked = tracked_entries(repo, head.tree, &paths)?;
    let t2 = std::time::Instant::now();
    let snapshot = read_snapshot(&ws, &paths, &tracked)?;
    let t3 = std::time::Instant::now();
    let out = diff_content(repo, &tracked, &snapshot, Detail::Hunks)?;
    tracing::debug!(
        open_us = (t1 - t0).as_micros(),
        tracked_us = (t2 - t1).as_micros(),
        read_us = (t3 - t2).as_micros(),
        diff_us = t3.elapsed().as_micros(),
        files = snapshot.files().count(),
        "workspace changes"
    );
    Ok(out)
}

/// The same diff, limited to `paths` (commit paths: files or directories),
/// reading only them.
pub fn paths_diff(workspace: &Path, paths: &[String]) -> Result<String, CommitError> {
    Ok(crate::change::render(&paths_changes(
        workspace,
        paths,
        Detail::Hunks,
    )?))
}

/// How much of each file's change to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// Kind, sides and line counts; `hunks` holds the file's header only.
    Counts,
    /// The same and the file's hunks, rendered.
    Hunks,
}

/// The changes under `paths` (commit paths), one entry per file, reading
/// only them.
pub fn paths_changes(
    workspace: &Path,
    paths: &[String],
    detail: Detail,
) -> Result<Vec<FileChange>, CommitError> {
    let paths = normalise_paths(paths)?;
    let ws = Workspace::open(workspace)?;
    let head = resolve_head(&ws.repo)?;
    changes_of(&ws, head.tree, &paths, detail)
}

/// One read of the commit `paths`: their content's fingerprint (as
/// [`super::fingerprint`]) and their changes against `HEAD`.
pub fn fingerprint_and_changes(
    workspace: &Path,
    paths: &[String],
    detail: Detail,
) -> Result<(String, Vec<FileChange>), CommitError> {
    let paths = normalise_paths(paths)?;
    let ws = Workspace::open(workspace)?;
    let head = resolve_head(&ws.repo)?;
    let tracked = tracked_entries(&ws.repo, head.tree, &paths)?;
    let snapshot = read_snapshot(&ws, &paths, &tracked)?;
    let changes = diff_content(&ws.repo, &tracked, &snapshot, detail)?;
    Ok((snapshot.digest(), changes))
}

/// Each changed file under `paths`: its path, how it changed and its part
/// of the diff. The files travel as data, so a name holding a newline or a
/// tab is never re-parsed from text.
fn changes_of(
    ws: &Workspace,
    head_tree: Option<gix::ObjectId>,
    paths: &[String],
    detail: Detail,
) -> Result<Vec<FileChange>, CommitError> {
    let repo = &ws.repo;
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let tracked = tracked_entries(repo, head_tree, paths)?;
    let snapshot = read_snapshot(ws, paths, &tracked)?;
    diff_content(repo, &tracked, &snapshot, detail)
}

/// Each changed file between `tracked` (HEAD's entries under the paths)
/// and `snapshot` (what was read for them), typed: blob ids and modes
/// from the objects, line counts from the diff's operations (never from
/// its text), and the file's hunks rendered once.
pub(super) fn diff_content(
    repo: &gix::Repository,
    tracked: &std::collections::BTreeMap<BString, (EntryKind, gix::ObjectId)>,
    snapshot: &super::Snapshot,
    detail: Detail,
) -> Result<Vec<FileChange>, CommitError> {
    let mut out = Vec::new();
    let mut total = 0usize;
    let mut push = |out: &mut Vec<FileChange>, change: Option<FileChange>| {
        let Some(change) = change else {
            return Ok(());
        };
        total += change.hunks.len();
        if total > MAX_DIFF_BYTES {
            return Err(CommitError::DiffTooLarge(MAX_DIFF_BYTES));
        }
        out.push(change);
        Ok(())
    };
    let mut present: std::collections::HashSet<&[u8]> =
        std::collections::HashSet::with_capacity(tracked.len());
    let blob = |id| -> Result<Vec<u8>, CommitError> {
        Ok(repo
            .find_blob(id)
            .map_err(git("read HEAD blob"))?
            .data
            .clone())
    };
    for item in snapshot.files() {
        present.insert(item.path.as_slice());
        let new_kind = item.kind.entry_kind();
        let new_id = item.oid(repo.object_hash())?;
        // Unchanged (same blob, same mode): nothing to read or show.
        if let Some((kind, id)) = tracked.get(&item.path)
            && (*kind == EntryKind::Commit || (*id == new_id && *kind == new_kind))
        {
            continue;
        }
        // As bytes: never hidden, never renamed (an interface whose paths
        // are strings refuses the change, naming it).
        let path = BString::from(item.path.as_slice());
        // Content vouched for by the stat cache is read from its blob.
        let data = match item.known {
            Some(id) => blob(id)?,
            None => item.data.clone(),
        };
        let new = Some(Version {
            bytes: &data,
            kind: new_kind,
            id: new_id,
        });
        let change = match tracked.get(&item.path) {
            Some((kind, id)) => {
                let old = blob(*id)?;
                let old = Version {
                    bytes: &old,
                    kind: *kind,
                    id: *id,
                };
                file_change(path, Some(old), new, detail)
            }
            None => file_change(path, None, new, detail),
        };
        push(&mut out, change)?;
    }
    for (path, (kind, id)) in tracked {
        if *kind == EntryKind::Commit || present.contains(path.as_slice()) {
            continue;
        }
        let old = blob(*id)?;
        let path = path.clone();
        let old = Version {
            bytes: &old,
            kind: *kind,
            id: *id,
        };
        push(&mut out, file_change(path, Some(old), None, detail))?;
    }
    Ok(out)
}

fn as_text(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

/// One side of a file: its content, kind and blob.
#[derive(Clone, Copy)]
pub(super) struct Version<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) kind: EntryKind,
    pub(super) id: gix::ObjectId,
}

fn side(v: &Version<'_>) -> Side {
    Side {
        id: Some(v.id.to_hex().to_string()),
        mode: u32::from_str_radix(mode(v.kind), 8).ok(),
    }
}

/// One file's change, its hunks rendered `git diff` style (paths quoted as
/// git quotes them); `None` when nothing differs.
pub(super) fn file_change(
    path: BString,
    old: Option<Version<'_>>,
    new: Option<Version<'_>>,
    detail: Detail,
) -> Option<FileChange> {
    let kind = match (&old, &new) {
        (None, Some(_)) => ChangeKind::Added,
        (Some(_), None) => ChangeKind::Deleted,
        (Some(_), Some(_)) => ChangeKind::Modified,
        (None, None) => return None,
    };
    let (a, b) = (quoted("a/", &path), quoted("b/", &path));
    let mut out = String::new();
    let _ = writeln!(out, "diff --git {a} {b}");
    match (&old, &new) {
        (None, Some(n)) => {
            let _ = writeln!(out, "new file mode {}", mode(n.kind));
        }
        (Some(o), None) => {
            let _ = writeln!(out, "deleted file mode {}", mode(o.kind));
        }
        (Some(o), Some(n)) if o.kind != n.kind => {
            let _ = writeln!(out, "old mode {}\nnew mode {}", mode(o.kind), mode(n.kind));
        }
        _ => {}
    }
    let old_bytes = old.map(|v| v.bytes).unwrap_or(b"");
    let new_bytes = new.map(|v| v.bytes).unwrap_or(b"");
    let from = if old.is_some() {
        a
    } else {
        "/dev/null".to_string()
    };
    let to = if new.is_some() {
        b
    } else {
        "/dev/null".to_string()
    };
    let (mut added, mut removed, mut binary) = (0u64, 0u64, false);
    match (as_text(old_bytes), as_text(new_bytes)) {
        (Some(o), Some(n)) => {
            if o == n && old.map(|v| v.kind) == new.map(|v| v.kind) {
                return None;
            }
            if o != n {
                let diff = similar::TextDiff::from_lines(o, n);
                for op in diff.ops() {
                    for change in diff.iter_changes(op) {
                        match change.tag() {
                            similar::ChangeTag::Insert => added += 1,
                            similar::ChangeTag::Delete => removed += 1,
                            similar::ChangeTag::Equal => {}
                        }
                    }
                }
                if detail == Detail::Hunks {
                    let text = diff
                        .unified_diff()
                        .context_radius(3)
                        .header(&from, &to)
                        .to_string();
                    out.push_str(&text);
                    if !text.ends_with('\n') {
                        out.push('\n');
                    }
                }
            }
        }
        _ => {
            binary = true;
            let _ = writeln!(out, "Binary files {from} and {to} differ");
        }
    }
    Some(FileChange {
        path,
        kind,
        old: old.as_ref().map(side),
        new: new.as_ref().map(side),
        added,
        removed,
        binary,
        hunks: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::ChangeKind;
    use crate::change::split;
    use crate::commit::test_git::git;
    use std::process::Command;

    #[test]
    fn the_diff_lists_every_change_and_nothing_else() {
        let t = tempfile::tempdir().expect("tempdir");
        let ws = t.path();
        git(ws, &["init", "-q", "-b", "main"]);
        std::fs::create_dir_all(ws.join("src")).expect("mkdir");
        std::fs::write(ws.join("src/lib.rs"), "fn a() {}\nfn b() {}\n").expect("write");
        std::fs::write(ws.join("gone.txt"), "bye\n").expect("write");
        std::fs::write(ws.join("same.txt"), "same\n").expect("write");
        std::fs::write(ws.join(".gitignore"), "target/\n").expect("write");
        git(ws, &["add", "-A"]);
        git(ws, &["commit", "-q", "-m", "init"]);
        assert_eq!(
            workspace_diff(ws).expect("diff"),
            "",
            "a clean tree has no diff"
        );
        std::fs::write(ws.join("src/lib.rs"), "fn a() {}\nfn c() {}\n").expect("write");
        std::fs::remove_file(ws.join("gone.txt")).expect("rm");
        std::fs::write(ws.join("new.txt"), "hello\n").expect("write");
        std::fs::create_dir_all(ws.join("target")).expect("mkdir");
        std::fs::write(ws.join("target/out.bin"), [0u8, 1, 2]).expect("write");
        std::fs::write(ws.join("blob.bin"), [0u8, 159, 146, 150]).expect("write");
        let diff = workspace_diff(ws).expect("diff");
        let files: Vec<(String, ChangeKind)> = split(&diff)
            .into_iter()
            .map(|f| (f.path_lossy().into_owned(), f.kind))
            .collect();
        assert_eq!(
            files,
            vec![
                ("blob.bin".to_string(), ChangeKind::Added),
                ("new.txt".to_string(), ChangeKind::Added),
                ("src/lib.rs".to_string(), ChangeKind::Modified),
                ("gone.txt".to_string(), ChangeKind::Deleted),
            ],
            "{diff}"
        );
        assert!(diff.contains("-fn b() {}\n+fn c() {}\n"), "{diff}");
        assert!(
            diff.contains("Binary files /dev/null and b/blob.bin differ"),
            "{diff}"
        );
        assert!(
            !diff.contains("target/"),
            "ignored files are not changes: {diff}"
        );
    }

    #[test]
    fn changes_carry_blob_ids_modes_and_counts_read_as_git_would() {
        let t = tempfile::tempdir().expect("tempdir");
        let ws = t.path();
        git(ws, &["init", "-q", "-b", "main"]);
        // Lines that look like diff headers are content all the same.
        std::fs::write(ws.join("notes.md"), "-- a\nkeep\n").expect("write");
        git(ws, &["add", "-A"]);
        git(ws, &["commit", "-q", "-m", "init"]);
        std::fs::write(ws.join("notes.md"), "keep\n++ b\n+++ c\n").expect("write");
        let name = "tab\there \"q\".txt";
        std::fs::write(ws.join(name), "x\n").expect("write");
        let changes = workspace_changes(ws).expect("changes");
        let notes = changes
            .iter()
            .find(|c| c.path == "notes.md")
            .expect("notes");
        assert_eq!((notes.added, notes.removed, notes.binary), (2, 1, false));
        let old_id = notes
            .old
            .as_ref()
            .and_then(|s| s.id.clone())
            .expect("old id");
        let head_blob = Command::new("git")
            .args(["rev-parse", "HEAD:notes.md"])
            .current_dir(ws)
            .output()
            .expect("git");
        assert_eq!(old_id, String::from_utf8_lossy(&head_blob.stdout).trim());
        assert_eq!(notes.new.as_ref().and_then(|s| s.mode), Some(0o100644));
        // The rendered text, read back, gives the same files and counts
        // (paths quoted as git quotes them).
        let text = crate::change::render(&changes);
        assert!(
            text.contains("diff --git \"a/tab\\there \\\"q\\\".txt\""),
            "{text}"
        );
        let back: Vec<(String, u64, u64)> = split(&text)
            .into_iter()
            .map(|f| (f.path_lossy().into_owned(), f.added, f.removed))
            .collect();
        let direct: Vec<(String, u64, u64)> = changes
            .iter()
            .map(|f| (f.path_lossy().into_owned(), f.added, f.removed))
            .collect();
        assert_eq!(back, direct);
        // Counts only: the same counts and sides, no hunk rendered.
        let counted = paths_changes(ws, &["notes.md".to_string()], Detail::Counts).expect("counts");
        assert_eq!((counted[0].added, counted[0].removed), (2, 1));
        assert_eq!(counted[0].old, notes.old);
        assert!(!counted[0].hunks.contains("@@"), "{}", counted[0].hunks);
        assert!(notes.hunks.contains("@@"));
        // One read gives the fingerprint the commit checks and the changes.
        let paths = vec!["notes.md".to_string()];
        let (fp, from_one_read) =
            fingerprint_and_changes(ws, &paths, Detail::Counts).expect("read");
        assert_eq!(
            fp,
            super::super::fingerprint(ws, &paths).expect("fingerprint")
        );
        assert_eq!(from_one_read, counted);
    }

    #[test]
    fn every_changed_name_is_listed_whatever_it_holds() {
        let t = tempfile::tempdir().expect("tempdir");
        let ws = t.path();
        git(ws, &["init", "-q", "-b", "main"]);
        std::fs::write(ws.join("README"), "hi\n").expect("write");
        git(ws, &["add", "-A"]);
        git(ws, &["commit", "-q", "-m", "init"]);
        // Names git would take as options, pathspec magic or globs, and
        // names that break a text diff's headers.
        let hostile = [
            "-rf",
            "--exec=x",
            ":(glob)*",
            ":!README",
            "*",
            "a?b",
            "[ab]",
            "back\\slash",
            "with space",
            "tab\there",
            "new\nline",
            " b",
        ];
        for name in hostile {
            std::fs::write(ws.join(name), "dbg!(1)\n").expect("write");
        }
        std::fs::create_dir_all(ws.join("-dir")).expect("mkdir");
        std::fs::write(ws.join("-dir/*.rs"), "x\n").expect("write");
        let changes = workspace_changes(ws).expect("changes");
        let mut listed: Vec<&str> = changes.iter().filter_map(|f| f.path_str()).collect();
        listed.sort();
        let mut want: Vec<&str> = hostile.to_vec();
        want.push("-dir/*.rs");
        want.sort();
        assert_eq!(listed, want);
        assert!(changes.iter().all(|f| f.kind == ChangeKind::Added));
        // Each file's own part holds its content.
        let nl = changes
            .iter()
            .find(|f| f.path == "new\nline")
            .expect("listed");
        assert!(nl.hunks.contains("+dbg!(1)"), "{}", nl.hunks);
    }
}
