//! A patch's hunks as data (`commit::patch`, `change::hunks`): the names
//! git quotes are the files' names, a content line that reads like a
//! header is a line of its file, each line's numbers are its own, and the
//! text the patch carries is exactly what the data renders to.

use super::*;
use crate::change::LineKind;
use crate::commit::patch::{PageBounds, PatchSpec, files_at, page};

/// One file's part of a patch rendered back from its hunks as data: each
/// hunk's header, each line with its marker, git's no-newline note.
fn rendered(f: &crate::commit::patch::PatchFile) -> String {
    let mut out = String::new();
    for h in &f.hunks {
        out.push_str(&h.header());
        out.push('\n');
        for l in &h.lines {
            let marker = match l.kind {
                LineKind::Context => ' ',
                LineKind::Added => '+',
                LineKind::Removed => '-',
            };
            out.push(marker);
            out.push_str(&l.text);
            out.push('\n');
            if l.no_newline {
                out.push_str("\\ No newline at end of file\n");
            }
        }
    }
    out
}

#[test]
fn hunks_as_data_name_quoted_files_keep_header_like_lines_and_render_the_text() {
    let t = tempfile::tempdir().expect("tempdir");
    let ws = t.path();
    git(ws, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(ws.join("docs")).expect("mkdir");
    let long: String = (1..=30).map(|n| format!("line {n}\n")).collect();
    std::fs::write(ws.join("app.py"), &long).expect("w");
    std::fs::write(ws.join("docs/Überblick.md"), "# Titel\nalt\n").expect("w");
    std::fs::write(ws.join("emptied.txt"), "was here\n").expect("w");
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "-q", "-m", "init"]);
    let base = git(ws, &["rev-parse", "HEAD^{tree}"]);
    // Two hunks in app.py: line 3 changed, and at 28 a line that reads
    // like a file header and one like a hunk header added.
    let mut lines: Vec<String> = (1..=30).map(|n| format!("line {n}")).collect();
    lines[2] = "line three".into();
    lines.insert(28, "++ b/docs/Überblick.md".into());
    lines.insert(29, "@@ -1 +1 @@".into());
    std::fs::write(ws.join("app.py"), lines.join("\n") + "\n").expect("w");
    std::fs::write(ws.join("docs/Überblick.md"), "# Titel\nneu").expect("w");
    std::fs::write(ws.join("emptied.txt"), "").expect("w");
    git(ws, &["add", "-A"]);
    let tree = git(ws, &["write-tree"]);
    let spec = PatchSpec {
        base: Some(gix::ObjectId::from_hex(base.trim().as_bytes()).expect("oid")),
        tree: gix::ObjectId::from_hex(tree.trim().as_bytes()).expect("oid"),
        paths: None,
    };
    let bounds = PageBounds {
        from: 0,
        max_files: 100,
        max_bytes: 1 << 20,
    };
    let p = page(ws, &spec, bounds).expect("page");
    let names: Vec<String> = p.files.iter().map(|f| f.entry.path.to_string()).collect();
    assert_eq!(names, ["app.py", "docs/Überblick.md", "emptied.txt"]);
    // git quotes the name in the text; the data holds it as it is.
    assert!(
        p.patch.contains("\"b/docs/\\303\\234berblick.md\""),
        "{}",
        p.patch
    );
    // Each file's text, from its first hunk on, is its data rendered.
    for f in &p.files {
        assert!(!f.hunks.is_empty(), "{}", f.entry.path);
        assert!(
            p.patch.contains(&rendered(f)),
            "{}:\n{}\nnot in\n{}",
            f.entry.path,
            rendered(f),
            p.patch
        );
    }
    let app = &p.files[0];
    assert_eq!(app.hunks.len(), 2, "{:#?}", app.hunks);
    let second = &app.hunks[1];
    let added: Vec<(&str, Option<u32>, Option<u32>)> = second
        .lines
        .iter()
        .filter(|l| l.kind == LineKind::Added)
        .map(|l| (l.text.as_str(), l.old, l.new))
        .collect();
    assert_eq!(
        added,
        [
            ("++ b/docs/Überblick.md", None, Some(29)),
            ("@@ -1 +1 @@", None, Some(30))
        ]
    );
    // Context after them: old 29 is new 31.
    let after = second
        .lines
        .iter()
        .find(|l| l.kind == LineKind::Context && l.text == "line 29")
        .expect("context");
    assert_eq!((after.old, after.new), (Some(29), Some(31)));
    let first = &app.hunks[0];
    let changed: Vec<(LineKind, Option<u32>, Option<u32>)> = first
        .lines
        .iter()
        .filter(|l| l.kind != LineKind::Context)
        .map(|l| (l.kind, l.old, l.new))
        .collect();
    assert_eq!(
        changed,
        [
            (LineKind::Removed, Some(3), None),
            (LineKind::Added, None, Some(3))
        ]
    );
    // The last line without a newline, and a file emptied.
    let doc = &p.files[1];
    let last = doc.hunks[0].lines.last().expect("a line");
    assert_eq!(
        (last.kind, last.text.as_str(), last.no_newline),
        (LineKind::Added, "neu", true)
    );
    assert!(!doc.emptied);
    assert!(p.files[2].emptied, "{:#?}", p.files[2]);
    // The comments' check reads the same files, at exactly their paths.
    let only = files_at(ws, &spec, &["docs/Überblick.md", "docs"]).expect("files");
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].hunks, doc.hunks);
}
