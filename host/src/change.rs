//! The change set: which files changed and how, each with its own diff
//! text, below both the gates and the WASM host (which hands it to
//! plugins as `changed-files` and `file-diff`), the commit module (which
//! computes it) and the engine (which summarises it). Also splitting a
//! unified diff (as `git diff` prints it) into such per-file parts.
//!
//! It imports nothing of the crate. It only splits on headers; it never
//! applies or trusts a diff.

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
    Renamed,
}

/// One file's part of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiff {
    /// Workspace-relative path (the new path for renames).
    pub path: String,
    pub kind: ChangeKind,
    /// The file's part of the diff, headers included.
    pub text: String,
}

/// Splits a diff into files. Handles `git diff` output (`diff --git`
/// headers) and plain unified diffs (`---`/`+++` pairs).
pub fn split(diff: &str) -> Vec<FileDiff> {
    let mut files: Vec<FileDiff> = Vec::new();
    let mut current: Option<(Vec<&str>, bool)> = None; // (lines, started by diff --git)
    let flush = |files: &mut Vec<FileDiff>, lines: &[&str]| {
        if let Some(f) = describe(lines) {
            files.push(f);
        }
    };
    let lines: Vec<&str> = diff.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let starts_git = line.starts_with("diff --git ");
        let starts_plain = line.starts_with("--- ")
            && lines.get(i + 1).is_some_and(|n| n.starts_with("+++ "))
            && !matches!(&current, Some((l, true)) if !l.iter().any(|x| x.starts_with("@@")));
        if starts_git || starts_plain {
            if let Some((l, _)) = current.take() {
                flush(&mut files, &l);
            }
            current = Some((vec![line], starts_git));
        } else if let Some((l, _)) = current.as_mut() {
            l.push(line);
        }
        i += 1;
    }
    if let Some((l, _)) = current.take() {
        flush(&mut files, &l);
    }
    files
}

fn strip_prefix(p: &str) -> Option<String> {
    let p = p.split('\t').next()?.trim();
    if p == "/dev/null" {
        return None;
    }
    let p = p
        .strip_prefix("a/")
        .or_else(|| p.strip_prefix("b/"))
        .unwrap_or(p);
    Some(p.to_string())
}

fn describe(lines: &[&str]) -> Option<FileDiff> {
    let mut old = None;
    let mut new = None;
    let mut kind = ChangeKind::Modified;
    let mut header_new = None;
    for l in lines {
        if let Some(rest) = l.strip_prefix("diff --git ") {
            // "a/x b/x": the new path is after the last " b/".
            if let Some(idx) = rest.rfind(" b/") {
                header_new = Some(rest[idx + 3..].to_string());
            }
        } else if l.starts_with("new file mode") {
            kind = ChangeKind::Added;
        } else if l.starts_with("deleted file mode") {
            kind = ChangeKind::Deleted;
        } else if let Some(p) = l.strip_prefix("rename to ") {
            kind = ChangeKind::Renamed;
            new = Some(p.trim().to_string());
        } else if let Some(p) = l.strip_prefix("--- ") {
            if old.is_none() {
                old = Some(strip_prefix(p));
            }
        } else if let Some(p) = l.strip_prefix("+++ ") {
            if new.is_none() {
                new = Some(strip_prefix(p).unwrap_or_default());
            }
        } else if l.starts_with("@@") {
            break;
        }
    }
    if let (Some(None), _) = (&old, &new) {
        kind = ChangeKind::Added;
    }
    let path = match (new, header_new) {
        (Some(p), _) if !p.is_empty() => p,
        (_, Some(h)) if kind != ChangeKind::Deleted || old.is_none() => h,
        _ => old.flatten()?,
    };
    if path.is_empty() {
        return None;
    }
    if matches!(lines.iter().find(|l| l.starts_with("+++ ")), Some(l) if l.contains("/dev/null")) {
        kind = ChangeKind::Deleted;
    }
    Some(FileDiff {
        path,
        kind,
        text: lines.join("\n") + "\n",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIT_DIFF: &str = "\
diff --git a/src/lib.rs b/src/lib.rs
index 1111111..2222222 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,2 +1,3 @@
 fn a() {}
+fn b() { dbg!(1); }
--- not a header, a removed line starting with dashes
diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+hello
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/x.rs b/y.rs
similarity index 90%
rename from x.rs
rename to y.rs
";

    #[test]
    fn git_diffs_split_per_file_with_their_kind() {
        let files = split(GIT_DIFF);
        let summary: Vec<(&str, ChangeKind)> =
            files.iter().map(|f| (f.path.as_str(), f.kind)).collect();
        assert_eq!(
            summary,
            vec![
                ("src/lib.rs", ChangeKind::Modified),
                ("new.txt", ChangeKind::Added),
                ("old.txt", ChangeKind::Deleted),
                ("y.rs", ChangeKind::Renamed),
            ]
        );
        assert!(files[0].text.contains("dbg!(1)"));
        assert!(
            files[0].text.contains("--- not a header"),
            "a removed line stays in its file"
        );
        assert!(!files[0].text.contains("hello"));
    }

    #[test]
    fn plain_unified_diffs_split_too() {
        let d = "--- a/one\n+++ b/one\n@@ -1 +1 @@\n-x\n+y\n--- a/two\n+++ b/two\n@@ -1 +1 @@\n-p\n+q\n";
        let files = split(d);
        assert_eq!(files.len(), 2);
        assert_eq!(files[1].path, "two");
        assert!(files[1].text.contains("+q"));
    }

    #[test]
    fn noise_is_ignored() {
        assert!(split("").is_empty());
        assert!(split("just some text\n").is_empty());
    }
}
