//! What a commit refuses: a hostile repository's hooks, filters and
//! configuration never run; a detached head, a non-repository, a symlinked
//! parent, an invalid path or an invalid prepared record is refused.

use super::*;

#[test]
fn hostile_repository_runs_nothing() {
    let t = repo();
    let ws = t.path();
    let evil = tempfile::tempdir().unwrap();
    let markers = evil.path().join("markers");
    std::fs::create_dir(&markers).unwrap();
    let script = |name: &str| -> String {
        let path = evil.path().join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\ntouch '{}/{name}'\necho FILTERED\nexit 0\n",
                markers.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let hooks = [
        "pre-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "reference-transaction",
        "post-index-change",
    ];
    let hooks_dir = evil.path().join("hooks");
    std::fs::create_dir(&hooks_dir).unwrap();
    for hook in hooks {
        let s = script(&format!("repo-hook-{hook}"));
        std::fs::copy(&s, ws.join(".git/hooks").join(hook)).unwrap();
        std::fs::set_permissions(
            ws.join(".git/hooks").join(hook),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let s = script(&format!("hookspath-{hook}"));
        std::fs::copy(&s, hooks_dir.join(hook)).unwrap();
        std::fs::set_permissions(hooks_dir.join(hook), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    let included = evil.path().join("included.gitconfig");
    std::fs::write(
        &included,
        format!(
            "[core]\n\tfsmonitor = {}\n\tpager = {}\n[gpg]\n\tprogram = {}\n[commit]\n\tgpgSign = true\n",
            script("include-fsmonitor"),
            script("include-pager"),
            script("include-gpg"),
        ),
    )
    .unwrap();
    let config = format!(
        "[core]\n\tfsmonitor = {fsm}\n\tpager = {pager}\n\thooksPath = {hooks}\n\teditor = {editor}\n\tsshCommand = {ssh}\n\
         [filter \"evil\"]\n\tclean = {clean}\n\tsmudge = {smudge}\n\tprocess = {process}\n\trequired = true\n\
         [commit]\n\tgpgSign = true\n[gpg]\n\tprogram = {gpg}\n[tag]\n\tgpgSign = true\n\
         [include]\n\tpath = {inc}\n[user]\n\tname = Hostile Repo\n\temail = hostile@example.com\n",
        fsm = script("fsmonitor"),
        pager = script("pager"),
        hooks = hooks_dir.display(),
        editor = script("editor"),
        ssh = script("ssh"),
        clean = script("clean"),
        smudge = script("smudge"),
        process = script("process"),
        gpg = script("gpg"),
        inc = included.display(),
    );
    let mut existing = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    existing.push_str(&config);
    std::fs::write(ws.join(".git/config"), existing).unwrap();
    write(ws, ".gitattributes", "* filter=evil\n");
    write(ws, "a.txt", "raw bytes\n");

    let prepared = commit(ws, &["a.txt", ".gitattributes"], "hostile");
    publish(ws, &prepared).unwrap();
    assert_eq!(ref_state(ws, &prepared).unwrap(), RefState::AtCommit);

    // Checked before any git command runs in the hostile repository.
    let ran: Vec<_> = std::fs::read_dir(&markers).unwrap().collect();
    assert!(ran.is_empty(), "programs ran: {ran:?}");

    let id = prepared.commit.clone().unwrap();
    // Inspect with the hostile features neutralised.
    let safe = [
        "core.hooksPath=/dev/null",
        "core.fsmonitor=false",
        "core.pager=cat",
        "include.path=/dev/null",
    ];
    let raw = git_cmd(ws, &safe, &["cat-file", "commit", &id]);
    let raw = String::from_utf8_lossy(&raw.stdout).into_owned();
    assert!(raw.starts_with("tree "), "{raw}");
    assert!(!raw.contains("gpgsig"), "{raw}");
    assert!(
        raw.contains("author gatehost <gatehost@localhost>"),
        "{raw}"
    );
    let blob = git_cmd(ws, &safe, &["cat-file", "blob", &format!("{id}:a.txt")]);
    assert_eq!(String::from_utf8_lossy(&blob.stdout), "raw bytes\n");
    let rev = git_cmd(ws, &safe, &["rev-parse", "refs/heads/main"]);
    assert_eq!(String::from_utf8_lossy(&rev.stdout).trim(), id);
    // The index was updated too (object-level comparison: no filter runs).
    let staged = git_cmd(ws, &safe, &["diff", "--cached", "--name-only"]);
    assert!(staged.status.success());
    assert_eq!(String::from_utf8_lossy(&staged.stdout), "");

    // Control: the planted programs are live, a plain git commit runs them.
    let _ = git_cmd(
        ws,
        &["user.name=x", "user.email=x@x"],
        &["commit", "-q", "--allow-empty", "-m", "x"],
    );
    let ran = std::fs::read_dir(&markers).unwrap().count();
    assert!(ran > 0, "the hostile setup should trigger plain git");
}

#[test]
fn detached_head_and_non_repositories_are_refused() {
    let t = repo();
    let ws = t.path();
    let id = head(ws);
    git(ws, &["checkout", "-q", "--detach", &id]);
    let p = paths(&["a.txt"]);
    assert!(matches!(
        fingerprint(ws, &p),
        Err(CommitError::DetachedHead)
    ));
    assert!(matches!(
        prepare(ws, &p, "m", "00"),
        Err(CommitError::DetachedHead)
    ));

    // A subdirectory of a repository is not a repository root (no discovery upwards).
    let sub = ws.join("dir");
    assert!(matches!(
        fingerprint(&sub, &p),
        Err(CommitError::NotARepository { .. })
    ));
    // A gitfile that is not a linked worktree's is refused.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(
        other.path().join(".git"),
        format!("gitdir: {}/.git\n", ws.display()),
    )
    .unwrap();
    assert!(matches!(
        fingerprint(other.path(), &p),
        Err(CommitError::ForeignGitDir { .. })
    ));
}

#[test]
fn symlinked_parent_directory_is_never_followed() {
    let t = repo();
    let ws = t.path();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("file"), "outside secret\n").unwrap();
    symlink(outside.path(), ws.join("link")).unwrap();
    let p = paths(&["link/file"]);
    assert!(matches!(
        fingerprint(ws, &p),
        Err(CommitError::PathBeyondSymlink { .. })
    ));
    assert!(matches!(
        prepare(ws, &p, "m", "00"),
        Err(CommitError::PathBeyondSymlink { .. })
    ));
    // Also a symlink to a directory inside the workspace, as git refuses it.
    symlink("dir", ws.join("inner")).unwrap();
    assert!(matches!(
        fingerprint(ws, &paths(&["inner/keep.txt"])),
        Err(CommitError::PathBeyondSymlink { .. })
    ));
    // The link itself is committed as a link, its target never read.
    let prepared = commit(ws, &["link"], "link");
    assert_eq!(
        ls_tree(ws, "HEAD")
            .iter()
            .filter(|l| l.ends_with(" link"))
            .count(),
        1
    );
    assert!(ls_tree(ws, "HEAD").contains(&"120000 link".to_owned()));
    assert!(prepared.commit.is_some());
}

#[test]
fn path_validation() {
    type Check = fn(&CommitPathError) -> bool;
    let refused: &[(&str, Check)] = &[
        ("", |e| matches!(e, CommitPathError::Empty)),
        ("./", |e| matches!(e, CommitPathError::Empty)),
        (".", |e| matches!(e, CommitPathError::Empty)),
        ("-rf", |e| matches!(e, CommitPathError::LeadingDash(_))),
        ("./-rf", |e| matches!(e, CommitPathError::LeadingDash(_))),
        (":(glob)*", |e| {
            matches!(
                e,
                CommitPathError::Glob(_) | CommitPathError::PathspecMagic(_)
            )
        }),
        (":!a", |e| matches!(e, CommitPathError::PathspecMagic(_))),
        ("../x", |e| matches!(e, CommitPathError::ParentComponent(_))),
        ("a/../../b", |e| {
            matches!(e, CommitPathError::ParentComponent(_))
        }),
        ("a/..", |e| matches!(e, CommitPathError::ParentComponent(_))),
        ("/etc/passwd", |e| matches!(e, CommitPathError::Absolute(_))),
        (".git/config", |e| {
            matches!(e, CommitPathError::GitComponent(_))
        }),
        ("a/.git", |e| matches!(e, CommitPathError::GitComponent(_))),
        (".GIT/hooks", |e| {
            matches!(e, CommitPathError::GitComponent(_))
        }),
        ("a\0b", |e| matches!(e, CommitPathError::Nul(_))),
        ("*.rs", |e| matches!(e, CommitPathError::Glob(_))),
        ("a?", |e| matches!(e, CommitPathError::Glob(_))),
        ("[ab]", |e| matches!(e, CommitPathError::Glob(_))),
        ("a\\b", |e| matches!(e, CommitPathError::Backslash(_))),
    ];
    for (input, check) in refused {
        match validate_commit_path(input) {
            Err(e) => assert!(check(&e), "{input:?} refused with the wrong error {e:?}"),
            Ok(v) => panic!("{input:?} accepted as {v:?}"),
        }
    }
    let accepted = [
        ("a", "a"),
        ("..x", "..x"),
        ("x..", "x.."),
        (".gitignore", ".gitignore"),
        (".github/workflows", ".github/workflows"),
        ("a/./b", "a/b"),
        ("./a//b/", "a/b"),
        ("src/main.rs", "src/main.rs"),
        ("a-b/-c", "a-b/-c"),
        ("dir with space/f", "dir with space/f"),
    ];
    for (input, want) in accepted {
        assert_eq!(
            validate_commit_path(input).as_deref(),
            Ok(want),
            "{input:?}"
        );
    }
    // prepare and fingerprint validate too.
    let t = repo();
    assert!(matches!(
        fingerprint(t.path(), &paths(&["../x"])),
        Err(CommitError::InvalidPath(CommitPathError::ParentComponent(
            _
        )))
    ));
    assert!(matches!(
        prepare(t.path(), &paths(&[".git/config"]), "m", "00"),
        Err(CommitError::InvalidPath(CommitPathError::GitComponent(_)))
    ));
}

#[test]
fn invalid_prepared_records_are_refused() {
    let t = repo();
    let ws = t.path();
    let parent = head(ws);
    let bogus = Prepared {
        commit: Some("0".repeat(40)),
        parent: Some(parent.clone()),
        reference: "refs/heads/main".into(),
        nothing_to_commit: false,
        paths: Vec::new(),
    };
    assert!(matches!(
        publish(ws, &bogus),
        Err(CommitError::InvalidPrepared(_))
    ));
    let not_branch = Prepared {
        commit: None,
        parent: Some(parent),
        reference: "HEAD".into(),
        nothing_to_commit: true,
        paths: Vec::new(),
    };
    assert!(matches!(
        ref_state(ws, &not_branch),
        Err(CommitError::InvalidPrepared(_))
    ));
}
