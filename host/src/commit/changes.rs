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
    resolve_head, tracked_entries, validate_commit_path,
};
use gix::bstr::{BString, ByteSlice};
use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::Path;

/// The most diff text produced: beyond it the diff is refused rather than
/// cut (a cut diff would hide changed files from the gates).
pub const MAX_DIFF_BYTES: usize = 16 * 1024 * 1024;

fn mode(kind: EntryKind) -> &'static str {
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
    let ws = Workspace::open(workspace)?;
    let repo = &ws.repo;
    let head = resolve_head(repo)?;
    let mut names = BTreeSet::new();
    // Top-level names are given to the snapshot as paths, which would take
    // them even if ignored (as `git add -f`): filter the ignored ones here.
    let mut excludes = Excludes::new(&ws.root)?;
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
        if let Some(n) = name.to_str()
            && !is_dot_git(n.as_bytes())
            && validate_commit_path(n).is_ok()
            && !excludes.is_ignored(n.as_bytes().as_bstr(), is_dir)
        {
            names.insert(n.to_string());
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
    diff_of(&ws, head.tree, &paths)
}

/// The same diff, limited to `paths` (commit paths: files or directories),
/// reading only them.
pub fn paths_diff(workspace: &Path, paths: &[String]) -> Result<String, CommitError> {
    let paths = normalise_paths(paths)?;
    let ws = Workspace::open(workspace)?;
    let head = resolve_head(&ws.repo)?;
    diff_of(&ws, head.tree, &paths)
}

fn diff_of(
    ws: &Workspace,
    head_tree: Option<gix::ObjectId>,
    paths: &[String],
) -> Result<String, CommitError> {
    let repo = &ws.repo;
    if paths.is_empty() {
        return Ok(String::new());
    }
    let tracked = tracked_entries(repo, head_tree, paths)?;
    let snapshot = read_snapshot(&ws.root, paths, &tracked)?;
    let mut out = String::new();
    let mut present: BTreeSet<BString> = BTreeSet::new();
    let blob = |id| -> Result<Vec<u8>, CommitError> {
        Ok(repo
            .find_blob(id)
            .map_err(git("read HEAD blob"))?
            .data
            .clone())
    };
    for item in snapshot.files() {
        present.insert(item.path.clone());
        let path = item.path.to_str_lossy();
        let new_kind = item.kind.entry_kind();
        match tracked.get(&item.path) {
            Some((EntryKind::Commit, _)) => {}
            Some((kind, id)) => {
                let old = blob(*id)?;
                if old != item.data || *kind != new_kind {
                    file_diff(
                        &mut out,
                        &path,
                        Some((&old, *kind)),
                        Some((&item.data, new_kind)),
                    );
                }
            }
            None => file_diff(&mut out, &path, None, Some((&item.data, new_kind))),
        }
        if out.len() > MAX_DIFF_BYTES {
            return Err(CommitError::DiffTooLarge(MAX_DIFF_BYTES));
        }
    }
    for (path, (kind, id)) in &tracked {
        if *kind == EntryKind::Commit || present.contains(path) {
            continue;
        }
        let old = blob(*id)?;
        file_diff(&mut out, &path.to_str_lossy(), Some((&old, *kind)), None);
        if out.len() > MAX_DIFF_BYTES {
            return Err(CommitError::DiffTooLarge(MAX_DIFF_BYTES));
        }
    }
    Ok(out)
}

fn as_text(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

/// Appends one file's part, `git diff` style.
fn file_diff(
    out: &mut String,
    path: &str,
    old: Option<(&[u8], EntryKind)>,
    new: Option<(&[u8], EntryKind)>,
) {
    let _ = writeln!(out, "diff --git a/{path} b/{path}");
    match (old, new) {
        (None, Some((_, k))) => {
            let _ = writeln!(out, "new file mode {}", mode(k));
        }
        (Some((_, k)), None) => {
            let _ = writeln!(out, "deleted file mode {}", mode(k));
        }
        (Some((_, a)), Some((_, b))) if a != b => {
            let _ = writeln!(out, "old mode {}\nnew mode {}", mode(a), mode(b));
        }
        _ => {}
    }
    let old_bytes = old.map(|(b, _)| b).unwrap_or(b"");
    let new_bytes = new.map(|(b, _)| b).unwrap_or(b"");
    let a = if old.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".to_string()
    };
    let b = if new.is_some() {
        format!("b/{path}")
    } else {
        "/dev/null".to_string()
    };
    match (as_text(old_bytes), as_text(new_bytes)) {
        (Some(o), Some(n)) => {
            if o == n {
                return;
            }
            let diff = similar::TextDiff::from_lines(o, n);
            let text = diff
                .unified_diff()
                .context_radius(3)
                .header(&a, &b)
                .to_string();
            out.push_str(&text);
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
        _ => {
            let _ = writeln!(out, "Binary files {a} and {b} differ");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::diff::split;
    use crate::wasm::ChangeKind;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .args([
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
            ])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

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
        let files: Vec<(String, ChangeKind)> =
            split(&diff).into_iter().map(|f| (f.path, f.kind)).collect();
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
}
