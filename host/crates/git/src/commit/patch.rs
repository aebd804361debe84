//! The exact patch a commit policy commits, read from git objects: the
//! snapshot's tree against `HEAD` (before the commit), or the commit
//! against its parent (after), as a unified diff in `git diff
//! --full-index` form, a page at a time.
//!
//! Owns: the tree-to-tree diff (gix's tree diff, exact renames paired as
//! git pairs them: same blob, one side deleted and the other added) and
//! its rendering, file by file, within a page's bounds.
//!
//! Must never: read the workspace (the patch is objects already written),
//! run any program (no diff driver, textconv, filter or external diff: the
//! content is compared raw, as the commit stores it), or write anything.
//! Renames that are not exact (git's default `-M50%` similarity) are shown
//! as a deletion and an addition, which apply the same.

use super::changes::{Version, file_change, mode};
use super::{CommitError, Detail, EntryKind, Workspace, git, resolve_head};
use crate::change::{ChangeKind, Hunk, quoted};
use gix::ObjectId;
use gix::bstr::BString;
use std::fmt::Write;
use std::path::Path;

/// One changed file between two trees, before its content is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchEntry {
    /// The path after the change (the deleted path for a deletion).
    pub path: BString,
    /// The path before a rename.
    pub from: Option<BString>,
    /// How it changed.
    pub kind: ChangeKind,
    /// Its entry in the base tree: kind (blob, executable, link) and
    /// object id; none when added.
    pub old: Option<(EntryKind, ObjectId)>,
    /// Its entry in the new tree; none when deleted.
    pub new: Option<(EntryKind, ObjectId)>,
}

/// One file of a rendered page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchFile {
    /// The file and how it changed.
    pub entry: PatchEntry,
    /// Lines added in its hunks.
    pub added: u64,
    /// Lines removed in its hunks.
    pub removed: u64,
    /// Whether either side is binary (no text hunks).
    pub binary: bool,
    /// Its hunks were over the page's byte bound on their own: the page
    /// holds its headers only.
    pub cut: bool,
    /// Its hunks as data (none when binary, cut, or a rename or mode
    /// change alone).
    pub hunks: Vec<Hunk>,
    /// Its content became empty (modified to no bytes).
    pub emptied: bool,
}

impl PatchFile {
    /// Its mode before, as git writes it (`100644`); none when added.
    pub fn old_mode(&self) -> Option<&'static str> {
        self.entry.old.map(|(k, _)| mode(k))
    }

    /// Its mode after; none when deleted.
    pub fn new_mode(&self) -> Option<&'static str> {
        self.entry.new.map(|(k, _)| mode(k))
    }
}

/// A page of the patch: files `from..next`, their text concatenated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchPage {
    /// The page's files, in path order.
    pub files: Vec<PatchFile>,
    /// Their diff text, `git diff` style, concatenated.
    pub patch: String,
    /// The index of the first file not on this page; `None` on the last.
    pub next: Option<usize>,
    /// How many files change in all.
    pub total: usize,
}

/// What to diff: a base tree (none: the empty tree) against a tree,
/// limited to paths at or below `paths` when given.
#[derive(Debug, Clone)]
pub struct PatchSpec {
    /// The base tree; `None`: the empty tree (a first commit).
    pub base: Option<ObjectId>,
    /// The tree diffed against it.
    pub tree: ObjectId,
    /// Only paths at or below these (workspace-relative); `None`: all.
    pub paths: Option<Vec<String>>,
}

/// How much one page may hold.
#[derive(Debug, Clone, Copy)]
pub struct PageBounds {
    /// The index of the page's first file among all the changed files.
    pub from: usize,
    /// At most this many files on the page.
    pub max_files: usize,
    /// At most this many bytes of diff text (a file past it alone is
    /// `cut`).
    pub max_bytes: usize,
}

/// The base for a snapshot not yet committed: the tree of the branch the
/// snapshot was taken on, where it points now (a commit the snapshot is
/// rebased on touched none of its paths, or the commit is refused).
pub fn head_tree(workspace: &Path) -> Result<(Option<ObjectId>, Option<ObjectId>), CommitError> {
    let ws = Workspace::open(workspace)?;
    let head = resolve_head(&ws.repo)?;
    Ok((head.commit, head.tree))
}

/// A commit's tree and its first parent's tree (none for a root commit).
pub fn commit_trees(
    workspace: &Path,
    commit: &str,
) -> Result<(Option<ObjectId>, ObjectId), CommitError> {
    let ws = Workspace::open(workspace)?;
    let repo = &ws.repo;
    let id = ObjectId::from_hex(commit.as_bytes())
        .map_err(|e| CommitError::InvalidPrepared(format!("commit {commit:?}: {e}")))?;
    let c = repo.find_commit(id).map_err(git("read the commit"))?;
    let tree = c.tree_id().map_err(git("read the commit"))?.detach();
    let base = match c.parent_ids().next() {
        Some(p) => Some(
            repo.find_commit(p.detach())
                .map_err(git("read the commit's parent"))?
                .tree_id()
                .map_err(git("read the commit's parent"))?
                .detach(),
        ),
        None => None,
    };
    Ok((base, tree))
}

fn under(path: &[u8], paths: &[String]) -> bool {
    paths.iter().any(|p| {
        let p = p.as_bytes();
        path == p || (path.starts_with(p) && path.get(p.len()) == Some(&b'/'))
    })
}

/// Every changed file (no tree entries), sorted by path as `git diff`
/// lists them, exact renames paired.
pub fn entries(workspace: &Path, spec: &PatchSpec) -> Result<Vec<PatchEntry>, CommitError> {
    let ws = Workspace::open(workspace)?;
    entries_in(&ws.repo, spec)
}

fn entries_in(repo: &gix::Repository, spec: &PatchSpec) -> Result<Vec<PatchEntry>, CommitError> {
    use gix::diff::tree::recorder::Change;
    let kind = repo.object_hash();
    let new = repo.find_tree(spec.tree).map_err(git("read the tree"))?;
    let old_data = match spec.base {
        Some(b) => repo
            .find_tree(b)
            .map_err(git("read the base tree"))?
            .data
            .clone(),
        None => Vec::new(),
    };
    let mut recorder = gix::diff::tree::Recorder::default();
    let mut state = gix::diff::tree::State::default();
    gix::diff::tree(
        gix::objs::TreeRefIter::from_bytes(&old_data, kind),
        gix::objs::TreeRefIter::from_bytes(&new.data, kind),
        &mut state,
        &repo.objects,
        &mut recorder,
    )
    .map_err(|e| CommitError::InvalidPrepared(format!("the tree diff failed: {e}")))?;
    let keep = |path: &BString| spec.paths.as_ref().is_none_or(|ps| under(path, ps));
    let mut added = Vec::new();
    let mut deleted = Vec::new();
    let mut out = Vec::new();
    for change in recorder.records {
        match change {
            Change::Addition {
                entry_mode,
                oid,
                path,
                ..
            } if !entry_mode.is_tree() && keep(&path) => {
                added.push((path, (entry_mode.kind(), oid)));
            }
            Change::Deletion {
                entry_mode,
                oid,
                path,
                ..
            } if !entry_mode.is_tree() && keep(&path) => {
                deleted.push((path, (entry_mode.kind(), oid)));
            }
            Change::Modification {
                previous_entry_mode,
                previous_oid,
                entry_mode,
                oid,
                path,
            } if keep(&path) => match (previous_entry_mode.is_tree(), entry_mode.is_tree()) {
                (false, false) => out.push(PatchEntry {
                    path,
                    from: None,
                    kind: ChangeKind::Modified,
                    old: Some((previous_entry_mode.kind(), previous_oid)),
                    new: Some((entry_mode.kind(), oid)),
                }),
                // A file became a directory (its files come as additions)
                // or the reverse.
                (false, true) => deleted.push((path, (previous_entry_mode.kind(), previous_oid))),
                (true, false) => added.push((path, (entry_mode.kind(), oid))),
                (true, true) => {}
            },
            _ => {}
        }
    }
    deleted.sort();
    added.sort();
    // Exact renames: an added blob whose id a deleted path had.
    let mut gone: Vec<Option<(BString, (EntryKind, ObjectId))>> =
        deleted.into_iter().map(Some).collect();
    for (path, new) in added {
        let source = gone.iter_mut().find(|d| {
            d.as_ref().is_some_and(|(_, (k, id))| {
                *id == new.1 && *k != EntryKind::Commit && new.0 != EntryKind::Commit
            })
        });
        match source.and_then(Option::take) {
            Some((from, old)) => out.push(PatchEntry {
                path,
                from: Some(from),
                kind: ChangeKind::Renamed,
                old: Some(old),
                new: Some(new),
            }),
            None => out.push(PatchEntry {
                path,
                from: None,
                kind: ChangeKind::Added,
                old: None,
                new: Some(new),
            }),
        }
    }
    for (path, old) in gone.into_iter().flatten() {
        out.push(PatchEntry {
            path,
            from: None,
            kind: ChangeKind::Deleted,
            old: Some(old),
            new: None,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// One page of the patch of `spec`.
pub fn page(
    workspace: &Path,
    spec: &PatchSpec,
    bounds: PageBounds,
) -> Result<PatchPage, CommitError> {
    let ws = Workspace::open(workspace)?;
    let repo = &ws.repo;
    let all = entries_in(repo, spec)?;
    let total = all.len();
    let mut files = Vec::new();
    let mut patch = String::new();
    let mut next = None;
    // A file cut to its headers fills its page.
    let mut full = false;
    for (i, entry) in all.into_iter().enumerate().skip(bounds.from) {
        if full || files.len() >= bounds.max_files.max(1) {
            next = Some(i);
            break;
        }
        let Rendered {
            mut text,
            added,
            removed,
            binary,
            mut hunks,
            emptied,
        } = render(repo, &entry)?;
        let mut cut = false;
        if patch.len() + text.len() > bounds.max_bytes {
            if !files.is_empty() {
                next = Some(i);
                break;
            }
            // Alone over the bound: its headers only.
            let end = text.find("\n@@ ").map(|n| n + 1).unwrap_or(text.len());
            text.truncate(end.min(bounds.max_bytes));
            hunks.clear();
            cut = true;
            full = true;
        }
        patch.push_str(&text);
        files.push(PatchFile {
            entry,
            added,
            removed,
            binary,
            cut,
            hunks,
            emptied,
        });
    }
    Ok(PatchPage {
        files,
        patch,
        next,
        total,
    })
}

/// A side's bytes: a blob's content, a gitlink's `Subproject commit` line
/// (as git shows it).
fn content(
    repo: &gix::Repository,
    side: Option<(EntryKind, ObjectId)>,
) -> Result<Vec<u8>, CommitError> {
    match side {
        None => Ok(Vec::new()),
        Some((EntryKind::Commit, id)) => Ok(format!("Subproject commit {id}\n").into_bytes()),
        Some((_, id)) => Ok(repo.find_blob(id).map_err(git("read a blob"))?.data.clone()),
    }
}

/// The files of `spec`'s patch at exactly these paths (a comment's check:
/// whether a line is in the diff), whole, in path order.
pub fn files_at(
    workspace: &Path,
    spec: &PatchSpec,
    paths: &[&str],
) -> Result<Vec<PatchFile>, CommitError> {
    let ws = Workspace::open(workspace)?;
    let repo = &ws.repo;
    let mut out = Vec::new();
    for entry in entries_in(repo, spec)? {
        if !paths.iter().any(|p| entry.path == p.as_bytes()) {
            continue;
        }
        let r = render(repo, &entry)?;
        out.push(PatchFile {
            entry,
            added: r.added,
            removed: r.removed,
            binary: r.binary,
            cut: false,
            hunks: r.hunks,
            emptied: r.emptied,
        });
    }
    Ok(out)
}

/// One file rendered: its text, `git diff --full-index` style, its counts
/// and its hunks as data.
struct Rendered {
    text: String,
    added: u64,
    removed: u64,
    binary: bool,
    hunks: Vec<Hunk>,
    emptied: bool,
}

/// One file's text, `git diff --full-index` style, its counts and hunks.
fn render(repo: &gix::Repository, entry: &PatchEntry) -> Result<Rendered, CommitError> {
    if let (Some(from), ChangeKind::Renamed) = (&entry.from, entry.kind) {
        // Exact renames: the same blob, maybe another mode.
        let (a, b) = (quoted("a/", from), quoted("b/", &entry.path));
        let mut out = format!("diff --git {a} {b}\n");
        if let (Some((ok, _)), Some((nk, _))) = (entry.old, entry.new)
            && ok != nk
        {
            let _ = writeln!(out, "old mode {}\nnew mode {}", mode(ok), mode(nk));
        }
        let _ = writeln!(out, "similarity index 100%");
        let _ = writeln!(out, "rename from {}", quoted("", from));
        let _ = writeln!(out, "rename to {}", quoted("", &entry.path));
        return Ok(Rendered {
            text: out,
            added: 0,
            removed: 0,
            binary: false,
            hunks: Vec::new(),
            emptied: false,
        });
    }
    let old_bytes = content(repo, entry.old)?;
    let new_bytes = content(repo, entry.new)?;
    let version = |bytes, side: Option<(EntryKind, ObjectId)>| {
        side.map(|(kind, id)| Version { bytes, kind, id })
    };
    let Some(change) = file_change(
        entry.path.clone(),
        version(&old_bytes, entry.old),
        version(&new_bytes, entry.new),
        Detail::Lines,
        None,
    ) else {
        return Ok(Rendered {
            text: String::new(),
            added: 0,
            removed: 0,
            binary: false,
            hunks: Vec::new(),
            emptied: false,
        });
    };
    let emptied =
        entry.kind == ChangeKind::Modified && new_bytes.is_empty() && !old_bytes.is_empty();
    let mut text = change.hunks;
    // git's `index` line, before the content's headers.
    let old_id = entry.old.map(|s| s.1);
    let new_id = entry.new.map(|s| s.1);
    if old_id != new_id {
        let null = ObjectId::null(repo.object_hash());
        let mut line = format!(
            "index {}..{}",
            old_id.unwrap_or(null),
            new_id.unwrap_or(null)
        );
        if let (Some((ok, _)), Some((nk, _))) = (entry.old, entry.new)
            && ok == nk
        {
            let _ = write!(line, " {}", mode(ok));
        }
        line.push('\n');
        let at = text
            .find("\n--- ")
            .or_else(|| text.find("\nBinary files "))
            .map(|n| n + 1)
            .unwrap_or(text.len());
        text.insert_str(at, &line);
    }
    Ok(Rendered {
        text,
        added: change.added,
        removed: change.removed,
        binary: change.binary,
        hunks: change.lines,
        emptied,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit::test_git::git;

    /// `git diff`'s hunk headers carry a function context this patch does
    /// not (it runs no diff driver): compared without it.
    fn without_context(patch: &str) -> String {
        patch
            .lines()
            .map(|l| match l.strip_prefix("@@ ") {
                Some(rest) => match rest.find(" @@") {
                    Some(n) => format!("@@ {} @@", &rest[..n]),
                    None => l.to_string(),
                },
                None => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn oid(hex: &str) -> ObjectId {
        ObjectId::from_hex(hex.trim().as_bytes()).expect("oid")
    }

    #[test]
    fn the_patch_is_what_git_diff_prints_added_modified_deleted_renamed() {
        let t = tempfile::tempdir().expect("tempdir");
        let ws = t.path();
        git(ws, &["init", "-q", "-b", "main"]);
        std::fs::create_dir_all(ws.join("src")).expect("mkdir");
        std::fs::write(ws.join("src/lib.rs"), "fn a() {}\nfn b() {}\nfn c() {}\n").expect("w");
        std::fs::write(ws.join("gone.txt"), "bye\n").expect("w");
        std::fs::write(ws.join("old name.txt"), "moved\nas is\n").expect("w");
        std::fs::write(ws.join("outside.txt"), "out\n").expect("w");
        git(ws, &["add", "-A"]);
        git(ws, &["commit", "-q", "-m", "init"]);
        let base = git(ws, &["rev-parse", "HEAD^{tree}"]);
        std::fs::write(ws.join("src/lib.rs"), "fn a() {}\nfn x() {}\nfn c() {}\n").expect("w");
        std::fs::remove_file(ws.join("gone.txt")).expect("rm");
        git(ws, &["mv", "old name.txt", "new\tname.txt"]);
        std::fs::write(ws.join("added.bin"), [0u8, 1, 2]).expect("w");
        std::fs::write(ws.join("src/new.rs"), "pub fn n() {}").expect("w");
        git(ws, &["add", "-A"]);
        let tree = git(ws, &["write-tree"]);
        let spec = PatchSpec {
            base: Some(oid(&base)),
            tree: oid(&tree),
            paths: None,
        };
        let bounds = PageBounds {
            from: 0,
            max_files: 1000,
            max_bytes: 1 << 20,
        };
        let whole_page = page(ws, &spec, bounds).expect("page");
        let want = git(ws, &["diff", "--full-index", base.trim(), tree.trim()]);
        assert_eq!(without_context(&whole_page.patch), without_context(&want));
        let kinds: Vec<(String, ChangeKind)> = whole_page
            .files
            .iter()
            .map(|f| (f.entry.path.to_string(), f.entry.kind))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("added.bin".into(), ChangeKind::Added),
                ("gone.txt".into(), ChangeKind::Deleted),
                ("new\tname.txt".into(), ChangeKind::Renamed),
                ("src/lib.rs".into(), ChangeKind::Modified),
                ("src/new.rs".into(), ChangeKind::Added),
            ]
        );
        assert_eq!((whole_page.total, whole_page.next), (5, None));
        // Limited to commit paths: the rest is not in the patch.
        let limited = PatchSpec {
            paths: Some(vec!["src".into()]),
            ..spec.clone()
        };
        let only = page(ws, &limited, bounds).expect("page");
        let want = git(
            ws,
            &[
                "diff",
                "--full-index",
                base.trim(),
                tree.trim(),
                "--",
                "src",
            ],
        );
        assert_eq!(without_context(&only.patch), without_context(&want));
        // Pages: two files at a time, the same text in all.
        let mut whole = String::new();
        let mut from = 0;
        let mut pages = 0;
        loop {
            let p = super::page(
                ws,
                &spec,
                PageBounds {
                    from,
                    max_files: 2,
                    ..bounds
                },
            )
            .expect("page");
            whole.push_str(&p.patch);
            pages += 1;
            match p.next {
                Some(n) => from = n,
                None => break,
            }
        }
        assert_eq!(pages, 3);
        assert_eq!(whole, whole_page.patch);
    }

    #[test]
    fn a_file_over_the_page_bound_is_cut_to_its_headers_and_said() {
        let t = tempfile::tempdir().expect("tempdir");
        let ws = t.path();
        git(ws, &["init", "-q", "-b", "main"]);
        std::fs::write(ws.join("a.txt"), "a\n").expect("w");
        git(ws, &["add", "-A"]);
        git(ws, &["commit", "-q", "-m", "init"]);
        let base = git(ws, &["rev-parse", "HEAD^{tree}"]);
        let big: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(ws.join("big.txt"), &big).expect("w");
        std::fs::write(ws.join("c.txt"), "c\n").expect("w");
        git(ws, &["add", "-A"]);
        let tree = git(ws, &["write-tree"]);
        let spec = PatchSpec {
            base: Some(oid(&base)),
            tree: oid(&tree),
            paths: None,
        };
        let bounds = PageBounds {
            from: 0,
            max_files: 1000,
            max_bytes: 4096,
        };
        let first = page(ws, &spec, bounds).expect("page");
        assert!(first.patch.len() <= 4096, "{}", first.patch.len());
        assert_eq!(first.files.len(), 1);
        assert!(first.files[0].cut);
        assert_eq!(first.files[0].added, 20_000, "the counts are whole");
        assert!(first.patch.contains("+++ b/big.txt"), "{}", first.patch);
        assert!(!first.patch.contains("@@"), "{}", first.patch);
        assert_eq!(first.next, Some(1));
        let second = page(ws, &spec, PageBounds { from: 1, ..bounds }).expect("page");
        assert!(second.patch.contains("+c\n"), "{}", second.patch);
        assert_eq!(second.next, None);
    }
}
