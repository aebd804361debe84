use super::*;

const GIT_DIFF: &str = "\
diff --git a/src/lib.rs b/src/lib.rs
index 1111111..2222222 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,2 +1,2 @@
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
deleted file mode 100755
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
fn git_diffs_split_per_file_with_their_kind_sides_and_counts() {
    let files = split(GIT_DIFF);
    let summary: Vec<(&str, ChangeKind, u64, u64)> = files
        .iter()
        .map(|f| (f.path_str().unwrap_or("?"), f.kind, f.added, f.removed))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("src/lib.rs", ChangeKind::Modified, 1, 1),
            ("new.txt", ChangeKind::Added, 1, 0),
            ("old.txt", ChangeKind::Deleted, 0, 1),
            ("y.rs", ChangeKind::Renamed, 0, 0),
        ]
    );
    assert!(files[0].hunks.contains("dbg!(1)"));
    assert!(
        files[0].hunks.contains("--- not a header"),
        "a removed line stays in its file"
    );
    assert!(!files[0].hunks.contains("hello"));
    assert_eq!(
        files[0].old,
        Some(Side {
            id: Some("1111111".into()),
            mode: Some(0o100644)
        })
    );
    assert_eq!(files[1].old, None);
    assert_eq!(files[1].new.as_ref().and_then(|s| s.mode), Some(0o100644));
    assert_eq!(files[2].old.as_ref().and_then(|s| s.mode), Some(0o100755));
    assert_eq!(files[2].new, None);
    assert_eq!(render(&files), GIT_DIFF);
}

#[test]
fn content_that_looks_like_headers_stays_in_its_hunk() {
    // A file whose added lines are themselves a diff: the hunk's counts
    // say they are content, so no file is made of them and the counts hold.
    let d = "\
diff --git a/notes.md b/notes.md
--- a/notes.md
+++ b/notes.md
@@ -1 +1,4 @@
-old
+++ b/evil
+diff --git a/evil b/evil
+--- a/evil
+@@ -1 +1 @@
diff --git a/z b/z
--- a/z
+++ b/z
@@ -1 +1 @@
-a
+b
";
    let files = split(d);
    let paths: Vec<&str> = files.iter().map(|f| f.path_str().unwrap_or("?")).collect();
    assert_eq!(paths, vec!["notes.md", "z"]);
    assert_eq!((files[0].added, files[0].removed), (4, 1));
    assert_eq!((files[1].added, files[1].removed), (1, 1));
}

#[test]
fn quoted_paths_are_read_and_written_as_git_quotes_them() {
    let name = "t\tab \"q\" é";
    let a = quoted("a/", name.as_bytes());
    let b = quoted("b/", name.as_bytes());
    assert_eq!(a, "\"a/t\\tab \\\"q\\\" \\303\\251\"");
    let d = format!(
        "diff --git {a} {b}\nnew file mode 100644\n--- /dev/null\n+++ {b}\n@@ -0,0 +1 @@\n+x\n"
    );
    let files = split(&d);
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].path_str(), Some(name));
    assert_eq!(files[0].kind, ChangeKind::Added);
    // Only the header names it (a rename without content).
    let d = format!("diff --git {a} {b}\nold mode 100644\nnew mode 100755\n");
    let files = split(&d);
    assert_eq!(files[0].path_str(), Some(name));
    assert_eq!(files[0].new.as_ref().and_then(|s| s.mode), Some(0o100755));
    assert_eq!(quoted("a/", b"plain/path.rs"), "a/plain/path.rs");
    // Bytes that are not UTF-8 are octal escapes, read back as the bytes.
    let odd = b"evil\xff.rs";
    let b = quoted("b/", odd);
    assert_eq!(b, "\"b/evil\\377.rs\"");
    let d = format!(
        "diff --git {} {b}\n--- /dev/null\n+++ {b}\n@@ -0,0 +1 @@\n+x\n",
        quoted("a/", odd)
    );
    let files = split(&d);
    assert_eq!(files[0].path.as_slice(), odd);
    assert_eq!(files[0].path_str(), None);
}

#[test]
fn plain_unified_diffs_split_too() {
    let d =
        "--- a/one\n+++ b/one\n@@ -1 +1 @@\n-x\n+y\n--- a/two\n+++ b/two\n@@ -1 +1 @@\n-p\n+q\n";
    let files = split(d);
    assert_eq!(files.len(), 2);
    assert_eq!(files[1].path_str(), Some("two"));
    assert!(files[1].hunks.contains("+q"));
    assert!(!files[0].hunks.contains("+q"));
}

#[test]
fn binary_files_are_marked_and_count_no_lines() {
    let d = "diff --git a/img.png b/img.png\nindex 1..2 100644\nBinary files a/img.png and b/img.png differ\n";
    let files = split(d);
    assert_eq!(files.len(), 1);
    assert!(files[0].binary);
    assert_eq!((files[0].added, files[0].removed), (0, 0));
}

#[test]
fn noise_is_ignored() {
    assert!(split("").is_empty());
    assert!(split("just some text\n").is_empty());
}
