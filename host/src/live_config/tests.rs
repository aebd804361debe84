//! Unit tests of the diff ("what changed"), of the settings kept until a
//! restart, and of the checks a reload passes (serve's own).

use super::*;

fn parsed(text: &str) -> HostConfig {
    HostConfig::from_toml(text, "test.toml").expect("valid configuration")
}

#[test]
fn identical_configurations_differ_in_nothing() {
    let text = "[shell]\nallow = [\"true\"]\n[daemon]\nwebhook_url = \"http://127.0.0.1:1/h\"\n";
    assert_eq!(diff(&parsed(text), &parsed(text)), Changes::default());
}

#[test]
fn each_changed_setting_is_named_and_only_those() {
    let old = parsed("[shell]\nallow = [\"true\"]\n");
    let new = parsed(
        "[shell]\nallow = [\"true\", \"false\"]\n[daemon]\nwebhook_url = \"http://127.0.0.1:1/h\"\nenabled = false\n",
    );
    let c = diff(&old, &new);
    assert_eq!(
        c.changed,
        vec!["shell.allow", "daemon.enabled", "daemon.webhook_url"]
    );
    assert!(c.needs_restart.is_empty(), "{c:?}");
}

#[test]
fn adapters_are_named_one_by_one_added_changed_or_removed() {
    let old = parsed(
        "[judge.adapters.mine]\ncommand = [\"true\"]\n[judge.adapters.gone]\ncommand = [\"true\"]\n",
    );
    let new = parsed(
        "[judge.adapters.mine]\ncommand = [\"false\"]\n[judge.adapters.fresh]\ncommand = [\"true\"]\n",
    );
    let c = diff(&old, &new);
    assert_eq!(
        c.changed,
        vec![
            "judge.adapters.fresh",
            "judge.adapters.mine",
            "judge.adapters.gone"
        ]
    );
}

#[test]
fn restart_settings_are_reported_and_keep_their_old_value() {
    let old = parsed("[judge]\nslots = 2\n[daemon]\nmax_gating = 3\nmax_long_polls = 10\n");
    let mut new = parsed(
        "[judge]\nslots = 5\n[daemon]\nmax_gating = 4\nmax_long_polls = 20\ndefault_nudge = \"again\"\n[sandbox]\nrequired = false\n",
    );
    let c = diff(&old, &new);
    assert_eq!(
        c.needs_restart,
        vec![
            "judge.slots",
            "sandbox",
            "daemon.max_gating",
            "daemon.max_long_polls"
        ]
    );
    assert!(c.changed.contains(&"daemon.default_nudge".to_string()));
    keep_until_restart(&old, &mut new, &c.needs_restart);
    assert_eq!(new.judge_slots, 2);
    assert_eq!(new.daemon.max_gating, 3);
    assert_eq!(new.daemon.max_long_polls, Some(10));
    assert!(new.sandbox.required);
    // What applies live is applied.
    assert_eq!(new.daemon.default_nudge, "again");
    // Once kept, only the live settings still differ.
    let after = diff(&old, &new);
    assert!(after.needs_restart.is_empty(), "{after:?}");
    assert_eq!(after.changed, vec!["daemon.default_nudge"]);
}

#[test]
fn every_restart_setting_can_keep_its_old_value() {
    // A setting said to need a restart that `keep_until_restart` does not
    // know would be applied live after all.
    let names: Vec<String> = settings(&HostConfig::default())
        .into_iter()
        .filter(|s| s.restart)
        .map(|s| s.name)
        .collect();
    assert!(!names.is_empty());
    let old = parsed("");
    let mut new = parsed(
        "[judge]\nslots = 7\n[wasm]\npooling = false\n[sandbox]\nrequired = false\n[retention]\nenabled = false\n[store]\nurl = \"postgres://u@h/d\"\n[daemon]\nmax_gating = 2\nwebhook_secret_file = \"/s\"\nwebhook_timeout_ms = 5\nwebhook_max_attempts = 2\nagent_token_file = \"/a\"\noperator_token_file = \"/o\"\nnotify_secret_file = \"/n\"\nworktree_dir = \"/w\"\nworktree_caches = [\"target\"]\nmax_long_polls = 3\n",
    );
    let c = diff(&old, &new);
    assert_eq!(c.needs_restart, names, "every restart setting changed here");
    keep_until_restart(&old, &mut new, &c.needs_restart);
    assert_eq!(diff(&old, &new), Changes::default());
}

fn data_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

#[test]
fn a_workspace_root_over_the_data_directory_is_rejected_as_at_start() {
    let d = data_dir();
    let data = d.path().join("data");
    let mut config = parsed(&format!(
        "[daemon]\nworkspace_roots = [\"{}\"]\n",
        d.path().display()
    ));
    let err = prepare(&mut config, &data).expect_err("a root holding the data directory");
    assert!(err.contains("workspace_roots"), "{err}");
    assert!(err.contains("overlaps"), "{err}");
}

#[test]
fn a_file_that_does_not_load_is_rejected_with_its_reason() {
    let d = data_dir();
    let path = d.path().join("config.toml");
    std::fs::write(&path, "[shell\nallow = [").expect("write");
    let err = load_for_serve(Some(&path), &d.path().join("data")).expect_err("bad TOML");
    assert!(err.contains("config.toml"), "{err}");
    std::fs::write(&path, "[judge]\nslots = 0\n").expect("write");
    let err = load_for_serve(Some(&path), &d.path().join("data")).expect_err("slots 0");
    assert!(err.contains("judge.slots"), "{err}");
    std::fs::write(&path, "[shell]\nallow = [\"true\"]\n").expect("write");
    let ok = load_for_serve(Some(&path), &d.path().join("data")).expect("valid");
    assert!(ok.sandbox.protect.contains(&d.path().join("data")));
}

#[test]
fn a_file_stamp_changes_with_a_rename_over_it_and_a_rewrite() {
    let d = data_dir();
    let path = d.path().join("c.toml");
    std::fs::write(&path, "a").expect("write");
    let first = FileStamp::of(&path);
    assert_eq!(first, FileStamp::of(&path));
    let other = d.path().join("c.new");
    std::fs::write(&other, "a").expect("write");
    std::fs::rename(&other, &path).expect("rename");
    let renamed = FileStamp::of(&path);
    assert_ne!(first, renamed, "another inode");
    std::fs::write(&path, "ab").expect("write");
    assert_ne!(renamed, FileStamp::of(&path), "another size");
    std::fs::remove_file(&path).expect("remove");
    assert_eq!(FileStamp::of(&path), FileStamp(None));
}

#[test]
fn a_file_that_sets_nothing_is_rejected_on_reload_only() {
    let dir = data_dir();
    let data = dir.path().join("data");
    for text in ["", "\n\n", "# only a comment\n   \n# another\n"] {
        let file = dir.path().join("config.toml");
        std::fs::write(&file, text).expect("write");
        let err = load_for_reload(&file, &data).expect_err("rejected");
        assert!(err.contains("sets nothing"), "{err}");
        assert!(err.contains("restart"), "{err}");
        // At start, an empty file is the defaults, as ever.
        assert!(load_for_serve(Some(&file), &data).is_ok());
    }
    let file = dir.path().join("config.toml");
    std::fs::write(&file, "[shell]\nallow = [\"true\"]\n").expect("write");
    assert!(load_for_reload(&file, &data).is_ok());
}
