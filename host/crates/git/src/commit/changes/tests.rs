use super::*;
use crate::change::ChangeKind;
use crate::change::split;
use crate::commit::test_git::git;
use crate::supervise::reaper::TrackedCommand as _;
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
    let changes = workspace_changes(ws, ChangeCaps::default()).expect("changes");
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
        .tracked_output()
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
    let (fp, from_one_read) = fingerprint_and_changes(ws, &paths, Detail::Counts).expect("read");
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
    let changes = workspace_changes(ws, ChangeCaps::default()).expect("changes");
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

/// Issue 30: a change set's caps. A file over the per-file cap, on
/// either side, is listed and never read (a tracked one unchanged is
/// not listed: its streamed blob id is HEAD's); past the total cap the
/// next files come with their headers only.
#[test]
fn a_change_set_caps_big_files_and_its_total_and_lists_every_file() {
    let t = tempfile::tempdir().expect("tempdir");
    let ws = t.path();
    git(ws, &["init", "-q", "-b", "main"]);
    let big = "x".repeat(200);
    std::fs::write(ws.join("same.big"), &big).expect("write");
    std::fs::write(ws.join("grows.big"), &big).expect("write");
    std::fs::write(ws.join("gone.big"), &big).expect("write");
    std::fs::write(ws.join("shrinks.big"), &big).expect("write");
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "-q", "-m", "init"]);
    std::fs::write(ws.join("grows.big"), format!("{big}y")).expect("write");
    std::fs::remove_file(ws.join("gone.big")).expect("rm");
    std::fs::write(ws.join("shrinks.big"), "small\n").expect("write");
    std::fs::write(ws.join("new.big"), &big).expect("write");
    std::fs::write(ws.join("a.txt"), "one\n").expect("write");
    std::fs::write(ws.join("b.txt"), "two\n").expect("write");
    let caps = ChangeCaps {
        file_bytes: 100,
        total_bytes: 10_000,
    };
    let changes = workspace_changes(ws, caps).expect("changes");
    let by = |p: &str| changes.iter().find(|c| c.path == p);
    assert!(by("same.big").is_none(), "unchanged: {changes:?}");
    let file = |bytes| Some(Capped::File { bytes, cap: 100 });
    let grows = by("grows.big").expect("grows");
    assert_eq!(
        (grows.kind, grows.capped),
        (ChangeKind::Modified, file(201))
    );
    let blob = |p: &str| git(ws, &["hash-object", p]).trim().to_string();
    assert_eq!(
        grows.new.as_ref().and_then(|s| s.id.clone()),
        Some(blob("grows.big")),
        "hashed as it streamed, as git hashes it"
    );
    assert!(!grows.hunks.contains("@@"), "{}", grows.hunks);
    let gone = by("gone.big").expect("gone");
    assert_eq!((gone.kind, gone.capped), (ChangeKind::Deleted, file(200)));
    let shrinks = by("shrinks.big").expect("shrinks");
    assert_eq!(
        (shrinks.kind, shrinks.capped),
        (ChangeKind::Modified, file(200)),
        "HEAD's side is over the cap: never read"
    );
    let new = by("new.big").expect("new");
    assert_eq!((new.kind, new.capped), (ChangeKind::Added, file(200)));
    assert_eq!(new.new.as_ref().and_then(|s| s.id.clone()), None);
    for small in ["a.txt", "b.txt"] {
        let f = by(small).expect("small");
        assert_eq!(f.capped, None);
        assert!(f.hunks.contains("@@"), "{}", f.hunks);
    }
    // A total cap a.txt's part fits and b.txt's does not.
    let a_len = by("a.txt").expect("a").hunks.len() as u64;
    let tight = ChangeCaps {
        file_bytes: 100,
        total_bytes: a_len + 1,
    };
    let changes = workspace_changes(ws, tight).expect("changes");
    let a = changes.iter().find(|c| c.path == "a.txt").expect("a");
    assert_eq!(a.capped, None, "{changes:?}");
    let b = changes
        .iter()
        .find(|c| c.path == "b.txt")
        .expect("b listed");
    assert_eq!(b.capped, Some(Capped::Total { cap: a_len + 1 }));
    assert!(
        b.hunks.starts_with("diff --git a/b.txt b/b.txt\n"),
        "{}",
        b.hunks
    );
    assert!(!b.hunks.contains("+two"), "{}", b.hunks);
    assert_eq!(changes.len(), 6, "every file listed: {changes:?}");
}

/// The walk goes [`super::super::walk::MAX_WALK_DEPTH`] directories deep
/// and no deeper: a file at the last level is in the change set; one
/// level more and the read is refused, naming the depth (before: the
/// recursion overflowed the stack and aborted the host).
#[test]
fn the_walk_reads_to_its_depth_and_refuses_a_deeper_chain() {
    let t = tempfile::tempdir().expect("tempdir");
    let ws = t.path();
    git(ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("a.txt"), "a\n").expect("write");
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "-q", "-m", "init"]);
    let max = super::super::walk::MAX_WALK_DEPTH;
    let deepest = vec!["d"; max].join("/");
    std::fs::create_dir_all(ws.join(&deepest)).expect("mkdir");
    std::fs::write(ws.join(&deepest).join("x.txt"), "x\n").expect("write");
    let changes = workspace_changes(ws, ChangeCaps::default()).expect("at the limit");
    let paths: Vec<String> = changes
        .iter()
        .map(|c| c.path_lossy().into_owned())
        .collect();
    assert_eq!(paths, [format!("{deepest}/x.txt")]);
    std::fs::create_dir(ws.join(&deepest).join("d")).expect("mkdir");
    match workspace_changes(ws, ChangeCaps::default()) {
        Err(CommitError::TooDeep { max: m, path }) => {
            assert_eq!(m, max);
            assert!(path.starts_with("d/d/"), "{path}");
        }
        other => panic!("expected TooDeep, got {other:?}"),
    }
}
