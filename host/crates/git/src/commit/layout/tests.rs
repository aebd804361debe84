use super::super::tests::{commit, git, head, paths, repo, write};
use super::*;
use crate::commit::{fingerprint, git_dir_handle, prepare, workspace_changes};
use crate::supervise::reaper::TrackedCommand as _;
use std::os::unix::fs::symlink;

/// A repository (`main`) with a linked worktree `wt` on branch `agent`,
/// made by `git worktree add`.
fn linked() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let t = repo();
    let main = t.path().to_path_buf();
    let outer = tempfile::tempdir().unwrap();
    let wt = outer.path().join("wt");
    git(
        &main,
        &["worktree", "add", "-q", wt.to_str().unwrap(), "-b", "agent"],
    );
    // Keep `outer` alive with the repository.
    let keep = outer.keep();
    (t, main, keep.join("wt"))
}

fn refusal(ws: &Path) -> String {
    match GitDirs::of(ws) {
        Err(e @ CommitError::ForeignGitDir { .. }) => e.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_linked_worktree_commits_to_its_own_branch_and_index() {
    let (_t, main, wt) = linked();
    let dirs = GitDirs::of(&wt).unwrap();
    assert_eq!(dirs.git_dir, main.join(".git/worktrees/wt"));
    assert_eq!(dirs.common_dir, main.join(".git"));
    assert_eq!(dirs.linked.as_deref(), Some("wt"));
    let main_before = head(&main);
    write(&wt, "a.txt", "changed in the worktree\n");
    write(&wt, "new.txt", "new\n");
    // Its change set, against its own HEAD.
    let changes = workspace_changes(&wt, crate::change::ChangeCaps::default()).unwrap();
    let changed: Vec<String> = changes
        .iter()
        .map(|c| c.path_lossy().into_owned())
        .collect();
    assert_eq!(changed, ["a.txt", "new.txt"]);
    let prepared = commit(&wt, &["a.txt", "new.txt"], "from the worktree");
    assert_eq!(prepared.reference, "refs/heads/agent");
    let agent = git(&main, &["rev-parse", "agent"]).trim().to_owned();
    assert_eq!(Some(agent.clone()), prepared.commit);
    assert_eq!(head(&wt), agent);
    assert_eq!(
        head(&main),
        main_before,
        "the main worktree's branch did not move"
    );
    assert_eq!(
        git(&wt, &["status", "--porcelain"]),
        "",
        "the worktree's index is clean"
    );
    assert_eq!(git(&main, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&wt, &["show", "agent:a.txt"]),
        "changed in the worktree\n"
    );
    // The repository's info/exclude is honoured in the worktree.
    std::fs::write(main.join(".git/info/exclude"), "*.log\n").unwrap();
    write(&wt, "debug.log", "x\n");
    assert!(
        workspace_changes(&wt, crate::change::ChangeCaps::default())
            .unwrap()
            .is_empty()
    );
    // Writes are confined beneath the repository's git directory.
    let fd = git_dir_handle(&wt).unwrap();
    let held = std::fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&fd)
    ))
    .unwrap();
    assert_eq!(held, main.join(".git"));
}

#[test]
fn a_gitfile_naming_another_repositorys_worktree_is_refused() {
    let (_t, _main, wt) = linked();
    let (_o, other, other_wt) = linked();
    let before = git(&other, &["for-each-ref"]);
    // The agent's worktree claims the other repository's worktree entry.
    let entry = other.join(".git/worktrees/wt");
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", entry.display())).unwrap();
    write(&wt, "a.txt", "hostile\n");
    let why = refusal(&wt);
    assert!(
        why.contains(&format!("{}/gitdir names", entry.display())),
        "{why}"
    );
    assert!(why.contains("another worktree"), "{why}");
    let p = paths(&["a.txt"]);
    assert!(matches!(
        prepare(&wt, &p, "m", "00"),
        Err(CommitError::ForeignGitDir { .. })
    ));
    assert!(git_dir_handle(&wt).is_err());
    assert_eq!(
        git(&other, &["for-each-ref"]),
        before,
        "nothing written there"
    );
    assert_eq!(git(&other_wt, &["status", "--porcelain"]), "");
}

#[test]
fn a_gitfile_naming_a_directory_outside_any_repository_is_refused() {
    let (_t, _main, wt) = linked();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        wt.join(".git"),
        format!("gitdir: {}\n", outside.path().display()),
    )
    .unwrap();
    let why = refusal(&wt);
    assert!(why.contains(&outside.path().display().to_string()), "{why}");
    assert!(why.contains("is not REPOSITORY/worktrees/NAME"), "{why}");
    // Shaped like one, but without the files git made.
    let fake = outside.path().join("worktrees/wt");
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", fake.display())).unwrap();
    let why = refusal(&wt);
    assert!(
        why.contains(&format!("{}/gitdir is missing", fake.display())),
        "{why}"
    );
    // A main repository's .git is not a worktree entry.
    let (_t2, main2, _) = linked();
    std::fs::write(
        wt.join(".git"),
        format!("gitdir: {}/.git\n", main2.display()),
    )
    .unwrap();
    assert!(refusal(&wt).contains("is not REPOSITORY/worktrees/NAME"));
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        1,
        "nothing written"
    );
}

#[test]
fn a_commondir_that_escapes_is_refused() {
    let (_t, main, wt) = linked();
    let (_o, other, _) = linked();
    let entry = main.join(".git/worktrees/wt");
    for named in [
        format!("{}/.git", other.display()),
        "../../../nowhere".to_string(),
    ] {
        std::fs::write(entry.join("commondir"), format!("{named}\n")).unwrap();
        let why = refusal(&wt);
        assert!(
            why.contains(&format!("{}/commondir leads to", entry.display())),
            "{named}: {why}"
        );
    }
    // git's own value works again.
    std::fs::write(entry.join("commondir"), "../..\n").unwrap();
    GitDirs::of(&wt).unwrap();
}

#[test]
fn a_symlinked_gitdir_and_dot_dot_paths_are_never_followed() {
    let (_t, main, wt) = linked();
    let worktrees = main.join(".git/worktrees");
    std::fs::rename(worktrees.join("wt"), worktrees.join("real")).unwrap();
    symlink(worktrees.join("real"), worktrees.join("wt")).unwrap();
    let why = refusal(&wt);
    assert!(why.contains("leads through a symlink"), "{why}");
    assert!(
        why.contains(&worktrees.join("wt").display().to_string()),
        "{why}"
    );
    std::fs::remove_file(worktrees.join("wt")).unwrap();
    std::fs::rename(worktrees.join("real"), worktrees.join("wt")).unwrap();
    GitDirs::of(&wt).unwrap();
    for (gitdir, says) in [
        (
            format!("{}/.git/worktrees/../worktrees/wt", main.display()),
            "`..` component",
        ),
        ("../main/.git/worktrees/wt".to_string(), "relative gitdir"),
    ] {
        std::fs::write(wt.join(".git"), format!("gitdir: {gitdir}\n")).unwrap();
        let why = refusal(&wt);
        assert!(why.contains(says), "{gitdir}: {why}");
    }
    // A symlinked .git is refused as before.
    std::fs::remove_file(wt.join(".git")).unwrap();
    symlink(main.join(".git"), wt.join(".git")).unwrap();
    assert!(matches!(
        GitDirs::of(&wt),
        Err(CommitError::NotARepository { .. })
    ));
}

#[test]
fn specials_in_a_linked_worktrees_directories_are_refused_by_their_path() {
    let (_t, main, wt) = linked();
    let index = main.join(".git/worktrees/wt/index");
    std::fs::remove_file(&index).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&index)
        .tracked_status()
        .unwrap();
    assert!(made.success());
    let p = paths(&["a.txt"]);
    match fingerprint(&wt, &p) {
        Err(e @ CommitError::UnsafeRepository(_)) => {
            assert!(
                e.to_string()
                    .contains(&format!("{} is a FIFO", index.display())),
                "{e}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    std::fs::remove_file(&index).unwrap();
    // A symlinked directory of the repository's, where a commit writes.
    let heads = main.join(".git/refs/heads");
    let moved = main.join("heads-elsewhere");
    std::fs::rename(&heads, &moved).unwrap();
    symlink(&moved, &heads).unwrap();
    match fingerprint(&wt, &p) {
        Err(e @ CommitError::UnsafeRepository(_)) => {
            assert!(
                e.to_string()
                    .contains(&format!("{} is a symlink", heads.display())),
                "{e}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // The objects directory itself is checked with the layout.
    std::fs::remove_file(&heads).unwrap();
    std::fs::rename(&moved, &heads).unwrap();
    let objects = main.join(".git/objects");
    let moved = main.join("objects-elsewhere");
    std::fs::rename(&objects, &moved).unwrap();
    symlink(&moved, &objects).unwrap();
    let why = refusal(&wt);
    assert!(why.contains("no objects directory"), "{why}");
}
