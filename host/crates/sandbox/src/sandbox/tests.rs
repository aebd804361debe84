use super::*;

#[test]
fn a_grant_holding_a_protected_path_is_carved_around_it() {
    let t = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(t.path()).expect("canonical");
    for d in ["etc/a", "etc/gatehost/keys", "etc/b", "other"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    std::fs::write(root.join("etc/file"), "x").expect("write");
    std::fs::write(root.join("etc/gatehost/config.toml"), "x").expect("write");
    std::os::unix::fs::symlink(root.join("etc/gatehost"), root.join("etc/link")).expect("ln");
    let protected = vec![root.join("etc/gatehost/config.toml")];
    let got = grants_around(&[root.join("etc"), root.join("other")], &protected);
    let rel: Vec<String> = got
        .iter()
        .map(|p| p.strip_prefix(&root).expect("inside").display().to_string())
        .collect();
    assert_eq!(
        rel,
        ["etc/a", "etc/b", "etc/file", "etc/gatehost/keys", "other"]
    );
}

#[test]
fn a_grant_inside_a_protected_path_is_dropped() {
    let t = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(t.path()).expect("canonical");
    std::fs::create_dir_all(root.join("data/sub")).expect("mkdir");
    let got = grants_around(
        &[root.join("data/sub"), root.join("missing")],
        &[root.join("data")],
    );
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn the_loader_and_sandbox_variables_cannot_be_set_by_a_gate() {
    for n in [
        "PATH",
        "HOME",
        "TMPDIR",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "GATEHOST_TOKEN",
    ] {
        assert!(!settable_env_name(OsStr::new(n)), "{n}");
    }
    for n in ["RUST_LOG", "CARGO_TERM_COLOR", "CI"] {
        assert!(settable_env_name(OsStr::new(n)), "{n}");
    }
}

#[test]
fn a_workspace_overlapping_a_protected_path_is_refused() {
    let t = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(t.path()).expect("canonical");
    std::fs::create_dir_all(root.join("data/inner")).expect("mkdir");
    let sandbox = Sandbox {
        state: State::Confined { abi: 6 },
        drop_caps: false,
        user: None,
        base: Some(BaseGrants::open(6, &[], &[], &[]).expect("base")),
        read_paths: Vec::new(),
        protected: vec![root.join("data")],
        protected_places: crate::anchor::Places::of(&[root.join("data")]),
        scratch_root: Some(root.join("scratch")),
        refusal: None,
    };
    let wrap = |ws: &Path| {
        let anchor = crate::anchor::WorkspaceAnchor::open(ws).expect("anchor");
        sandbox
            .prepare(
                Path::new("/bin/true"),
                Place::Workspace(&anchor),
                &Grants::default(),
            )
            .map(|p| p.plan.is_some())
    };
    // A workspace holding the data directory, the data directory
    // itself, and a workspace inside it.
    for ws in [root.clone(), root.join("data"), root.join("data/inner")] {
        let err = wrap(&ws).expect_err("refused");
        assert!(err.to_string().contains("overlaps gatehost's own"), "{err}");
    }
    std::fs::create_dir_all(root.join("ws")).expect("mkdir");
    let confined = wrap(&root.join("ws")).expect("a workspace beside it is fine");
    assert!(confined);
}

/// What a killed host left in the scratch root goes at the next start;
/// a directory in use (locked by its host) or just made stays.
#[test]
fn scratch_directories_a_dead_host_left_are_reclaimed_and_no_others() {
    let t = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(t.path()).expect("canonical");
    let sandbox = Sandbox {
        state: State::Disabled,
        drop_caps: false,
        user: None,
        base: None,
        read_paths: Vec::new(),
        protected: Vec::new(),
        protected_places: crate::anchor::Places::default(),
        scratch_root: Some(root.join("scratch")),
        refusal: None,
    };
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let age = |p: &Path| {
        std::fs::File::open(p)
            .expect("open")
            .set_modified(old)
            .expect("set mtime");
    };
    // In use: made by this process, held, and old.
    let held = sandbox.scratch(true).expect("scratch");
    age(&held.dir_path());
    // Left by a dead host: old, its tmp/ full.
    let dead = root.join("scratch/g-dead");
    std::fs::create_dir_all(dead.join("tmp")).expect("mkdir");
    std::fs::write(dead.join("tmp/big"), "x").expect("write");
    age(&dead);
    // Just made (maybe not locked yet), and a name that is not a gate's.
    let young = root.join("scratch/g-young");
    std::fs::create_dir_all(&young).expect("mkdir");
    let other = root.join("scratch/keep-me");
    std::fs::create_dir_all(&other).expect("mkdir");
    age(&other);
    assert_eq!(sandbox.reclaim_scratch(), 1);
    assert!(!dead.exists());
    assert!(held.dir_path().exists() && young.exists() && other.exists());
    let path = held.dir_path();
    drop(held);
    assert!(!path.exists(), "a gate's own directory goes with it");
}
