use super::*;

#[test]
fn relative_entries_are_a_configuration_error() {
    let err = HostConfig::from_toml("[shell]\nallow = [\"./run.sh\"]\n", "c.toml").unwrap_err();
    assert!(err.to_string().contains("shell.allow"), "{err}");
}

#[test]
fn the_documented_keys_parse() {
    let text = r#"
[shell]
allow = ["true", "/usr/bin/git"]

[judge]
slots = 2

[judge.adapters.mine]
command = ["/opt/bin/my-llm", "--model", "{model}"]
env = ["MY_KEY"]

[limits]
output_cap_bytes = 4096
kill_grace_ms = 500
"#;
    let c = HostConfig::from_toml(text, "c.toml").expect("parses");
    assert_eq!(c.judge_slots, 2);
    assert_eq!(c.output_cap, 4096);
    assert_eq!(c.kill_grace, Duration::from_millis(500));
    assert_eq!(c.allow.entries().len(), 2);
    assert_eq!(c.adapters["mine"].env, vec!["MY_KEY".to_string()]);
    assert!(c.adapters.contains_key("claude"), "defaults stay");
}

#[test]
fn allow_entries_with_argument_rules_and_sandbox_keys_parse() {
    let text = r#"
[shell]
allow = ["true", { program = "cargo", subcommands = ["test", "build"], deny = ["--config", "-Z"] }, { program = "sh", free_args = true, network = true }]
pass_env = ["RUST_LOG"]

[sandbox]
read = ["~/.cargo", "/opt/tools"]
write = ["/var/cache/build"]
required = false

[judge.adapters.mine]
command = ["/opt/bin/my-llm"]
read = ["~/.config/my-llm"]
network = false
"#;
    let c = HostConfig::from_toml(text, "c.toml").expect("parses");
    let e = c.allow.entries();
    assert_eq!(e.len(), 3);
    assert!(e[0].args.bare);
    assert_eq!(
        e[1].args.subcommands.as_deref(),
        Some(&["test".to_string(), "build".to_string()][..])
    );
    assert_eq!(
        e[1].args.deny,
        vec!["--config".to_string(), "-Z".to_string()]
    );
    assert!(e[2].args.free && e[2].network && !e[1].network);
    assert_eq!(c.pass_env, vec!["RUST_LOG".to_string()]);
    let home = dirs::home_dir().expect("home");
    assert_eq!(
        c.sandbox.read,
        vec![home.join(".cargo"), PathBuf::from("/opt/tools")]
    );
    assert!(!c.sandbox.required && c.sandbox.enabled);
    assert_eq!(c.adapters["mine"].read, vec![home.join(".config/my-llm")]);
    assert!(!c.adapters["mine"].network && c.adapters["claude"].network);
    let e = HostConfig::from_toml("[shell]\npass_env = [\"LD_PRELOAD\"]\n", "c.toml").unwrap_err();
    assert!(e.to_string().contains("shell.pass_env"), "{e}");
    let e = HostConfig::from_toml(
        "[shell]\nallow = [{ program = \"x\", frees = true }]\n",
        "c.toml",
    )
    .unwrap_err();
    assert!(e.to_string().contains("shell.allow"), "{e}");
}

#[test]
fn unknown_keys_and_zero_slots_are_refused() {
    let e = HostConfig::from_toml("[shell]\nallowed = []\n", "c.toml").unwrap_err();
    assert!(e.to_string().contains("allowed"), "{e}");
    let e = HostConfig::from_toml("[judge]\nslots = 0\n", "c.toml").unwrap_err();
    assert!(e.to_string().contains("judge.slots"), "{e}");
}

#[test]
fn no_file_means_defaults_and_an_empty_allowlist() {
    let c = HostConfig::load(None).expect("defaults");
    assert!(c.allow.entries().is_empty());
    assert_eq!(c.judge_slots, 4);
    assert_eq!(c.output_cap, 1024 * 1024);
}

#[test]
fn adapter_templates_fill_or_drop_the_model() {
    let a = default_adapters();
    let hardening = [
        "--setting-sources",
        "user",
        "--strict-mcp-config",
        "--tools",
        "",
        "--no-session-persistence",
    ];
    let with = |head: &[&str]| -> Vec<String> {
        head.iter()
            .chain(hardening.iter())
            .map(|s| s.to_string())
            .collect()
    };
    assert_eq!(
        a["claude"].argv("claude", Some("opus")).unwrap(),
        with(&["claude", "-p", "--model", "opus"])
    );
    assert_eq!(
        a["claude"].argv("claude", None).unwrap(),
        with(&["claude", "-p"])
    );
    assert_eq!(
        a["codex"].argv("codex", None).unwrap(),
        vec!["codex", "exec", "-"]
    );
    assert!(
        a["ollama"]
            .argv("ollama", None)
            .unwrap_err()
            .contains("needs a model")
    );
    assert_eq!(
        a["ollama"].argv("ollama", Some("llama3")).unwrap(),
        vec!["ollama", "run", "llama3"]
    );
}

/// The README's configuration sample is a configuration this build
/// reads (every key known, every value valid).
#[test]
fn the_readme_configuration_sample_parses() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../README.md"))
            .expect("README");
    let sample = readme
        .split("```toml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .find(|b| b.contains("[daemon]"))
        .expect("a toml block with [daemon]");
    let c = HostConfig::from_toml(sample, "README.md").expect("the README sample");
    assert_eq!(
        c.retention.deliveries_max_age,
        Duration::from_secs(7 * 24 * 3600)
    );
    assert_eq!(c.daemon.max_gating, 8);
    assert_eq!(c.daemon.session_policies.len(), 1);
    assert_eq!(c.daemon.session_policies[0].agents, ["claude", "codex"]);
    let pg = c.store.postgres.expect("the sample's [store] url");
    assert!(pg.url.starts_with("postgres://"), "{}", pg.url);
    assert!(pg.password_file.is_some());
}

#[test]
fn worktree_caches_are_plain_relative_directories() {
    let c = HostConfig::from_toml(
        "[daemon]\nworktree_caches = [\"target\", \"build/cache\"]\n",
        "c.toml",
    )
    .expect("parses");
    assert_eq!(c.daemon.worktree_caches, ["target", "build/cache"]);
    for bad in [
        "../x",
        "/abs",
        "./target",
        "",
        ".git",
        ".git/objects",
        "a/../b",
    ] {
        let e = HostConfig::from_toml(
            &format!("[daemon]\nworktree_caches = [{bad:?}]\n"),
            "c.toml",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("daemon.worktree_caches[0]"),
            "{bad}: {e}"
        );
    }
}

/// Issue 24, item 2: the places no workspace may overlap, compared
/// canonically, in both directions, including places not made yet.
#[test]
fn a_workspace_overlapping_a_host_place_is_found_either_way() {
    let t = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(t.path()).expect("canonical");
    let data = root.join("data");
    std::fs::create_dir(&data).expect("mkdir");
    let planned = root.join("not-yet").join("worktrees");
    let places = vec![data.clone(), planned.clone()];
    assert_eq!(super::overlapping_place(&root, &places), Some(data.clone()));
    assert_eq!(
        super::overlapping_place(&data.join("inside"), &places),
        Some(data.clone())
    );
    assert_eq!(
        super::overlapping_place(&root.join("not-yet"), &places),
        Some(planned)
    );
    std::fs::create_dir(root.join("ws")).expect("mkdir");
    assert_eq!(super::overlapping_place(&root.join("ws"), &places), None);
    // A sibling whose name starts the same is not inside.
    assert_eq!(super::overlapping_place(&root.join("data2"), &places), None);
}

/// An agent's gate sets only the variables its allowlist entry lists
/// (none by default): `GIT_CONFIG_*` makes `git status` run any command.
#[test]
fn an_agent_gate_sets_only_the_variables_its_entry_lists() {
    let text = r#"
[shell]
allow = [
  { program = "git", subcommands = ["status"] },
  { program = "cargo", subcommands = ["test"], env = ["RUST_LOG", "GIT_CONFIG_COUNT"] },
]
"#;
    let c = HostConfig::from_toml(text, "/etc/gatehost/config.toml").expect("parses");
    let git_config = ["GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0"];
    let status = vec!["status".to_string()];
    let err = c
        .allow
        .admit_with_args("git", &status, &git_config, Trust::Agent)
        .expect_err("refused")
        .to_string();
    for want in [
        "may not set env 'GIT_CONFIG_COUNT'",
        "shell.allow[0] (program \"git\")",
        "/etc/gatehost/config.toml",
        "env = [\"GIT_CONFIG_COUNT\"]",
        "run code",
    ] {
        assert!(err.contains(want), "{want:?} missing from: {err}");
    }
    // One unlisted name is enough to refuse.
    let test = vec!["test".to_string()];
    let err = c
        .allow
        .admit_with_args(
            "cargo",
            &test,
            &["RUST_LOG", "GIT_EXTERNAL_DIFF"],
            Trust::Agent,
        )
        .expect_err("refused")
        .to_string();
    assert!(
        err.contains("'GIT_EXTERNAL_DIFF'") && err.contains("shell.allow[1]"),
        "{err}"
    );
    // Listed names are the operator's call (warned about at load when they
    // run code), as is anything in an operator's gate.
    assert!(
        c.allow
            .admit_with_args(
                "cargo",
                &test,
                &["RUST_LOG", "GIT_CONFIG_COUNT"],
                Trust::Agent
            )
            .is_ok()
    );
    assert!(
        c.allow
            .admit_with_args("git", &status, &git_config, Trust::Operator)
            .is_ok()
    );
    assert!(
        c.allow
            .admit_with_args("git", &status, &[], Trust::Agent)
            .is_ok()
    );
}

#[test]
fn an_allowlist_env_name_is_an_exact_settable_name() {
    for bad in [
        "GIT_CONFIG_*",
        "A=B",
        "",
        "PATH",
        "LD_PRELOAD",
        "GATEHOST_X",
        "HOME",
    ] {
        let text = format!("[shell]\nallow = [{{ program = \"true\", env = [\"{bad}\"] }}]\n");
        let err = HostConfig::from_toml(&text, "c.toml")
            .expect_err(bad)
            .to_string();
        assert!(err.contains("shell.allow"), "{bad}: {err}");
    }
}

/// Issue 24, item 7: the per-gate limits parse, 0 turns one off, and a
/// value too small to be meant is an error naming the key.
#[test]
fn gate_limits_parse_with_defaults_and_zero_for_off() {
    use crate::supervise::{
        DEFAULT_GATE_FILE_BYTES, DEFAULT_GATE_PIDS, DEFAULT_GATE_SCRATCH_BYTES,
    };
    let d = HostConfig::from_toml("", "c.toml").expect("parses");
    assert_eq!(d.gate_limits.pids, Some(DEFAULT_GATE_PIDS));
    assert_eq!(
        d.gate_limits.scratch_bytes,
        Some(DEFAULT_GATE_SCRATCH_BYTES)
    );
    assert_eq!(d.gate_limits.file_bytes, Some(DEFAULT_GATE_FILE_BYTES));
    let mem = d.gate_limits.memory.expect("a memory limit by default");
    assert!(mem >= 16 * 1024 * 1024, "{mem}");
    assert_eq!(mem, crate::supervise::default_gate_memory());

    let c = HostConfig::from_toml(
        "[limits]\ngate_memory_bytes = 268435456\ngate_pids = 64\ngate_file_bytes = 16777216\ngate_scratch_bytes = 33554432\n",
        "c.toml",
    )
    .expect("parses");
    assert_eq!(c.gate_limits.scratch_bytes, Some(33554432));
    assert_eq!(c.gate_limits.memory, Some(268435456));
    assert_eq!(c.gate_limits.pids, Some(64));
    assert_eq!(c.gate_limits.file_bytes, Some(16777216));

    let off = HostConfig::from_toml(
        "[limits]\ngate_memory_bytes = 0\ngate_pids = 0\ngate_file_bytes = 0\ngate_scratch_bytes = 0\n",
        "c.toml",
    )
    .expect("parses");
    assert_eq!(off.gate_limits, crate::supervise::GateLimits::NONE);

    for (text, key) in [
        (
            "[limits]\ngate_memory_bytes = 4096\n",
            "limits.gate_memory_bytes",
        ),
        (
            "[limits]\ngate_file_bytes = 100\n",
            "limits.gate_file_bytes",
        ),
        (
            "[limits]\ngate_scratch_bytes = 4096\n",
            "limits.gate_scratch_bytes",
        ),
    ] {
        let err = HostConfig::from_toml(text, "c.toml").expect_err(text);
        let said = err.to_string();
        assert!(said.contains(key) && said.contains("too small"), "{said}");
    }
    for text in [
        "[limits]\ngate_pids = -1\n",
        "[limits]\ngate_memory_bytes = \"4G\"\n",
    ] {
        assert!(HostConfig::from_toml(text, "c.toml").is_err(), "{text}");
    }
}

#[test]
fn a_misspelt_top_level_table_is_named_as_one_with_its_line_and_nearest_name() {
    let text = "[shell]\nallow = []\n\n[sandox]\nenabled = true\n";
    let err = HostConfig::from_toml(text, "/etc/gatehost/config.toml").unwrap_err();
    let m = err.to_string();
    assert_eq!(
        m,
        "unknown table `sandox` in /etc/gatehost/config.toml line 4; did you mean `sandbox`?"
    );
    assert!(!m.contains("shell.sandox"), "{m}");
    // A top-level key, dotted or not, is named as a key.
    let err = HostConfig::from_toml("limit.output_cap_bytes = 1\n", "c.toml").unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown key `limit` in c.toml line 1; did you mean `limits`?"
    );
    // Far from every name: no suggestion.
    let err = HostConfig::from_toml("[shell]\n[zzzz]\n", "c.toml").unwrap_err();
    assert_eq!(err.to_string(), "unknown table `zzzz` in c.toml line 2");
}

#[test]
fn an_unknown_key_inside_a_known_table_keeps_its_path() {
    let text = "[sandbox]\nenabled = true\n[shell.alow]\nx = 1\n";
    let err = HostConfig::from_toml(text, "c.toml").unwrap_err();
    let m = err.to_string();
    assert!(
        m.starts_with("configuration c.toml: shell.alow (line 3"),
        "{m}"
    );
    let text = "[shell]\nallow = []\n[daemon]\nmax_gatin = 1\n";
    let m = HostConfig::from_toml(text, "c.toml")
        .unwrap_err()
        .to_string();
    assert!(m.contains("daemon.max_gatin (line 4"), "{m}");
    assert!(m.contains("did you mean `max_gating`?"), "{m}");
}

/// Issues 26 and 28: the operator's webhooks, each with its format and
/// events, the standalone hook's notification, and errors naming the key.
#[test]
fn webhooks_notify_url_and_the_hooks_notification_parse_with_their_defaults() {
    use super::webhooks::{EventSet, Format};
    let c = HostConfig::from_toml(
        r#"
[daemon]
webhook_url = "http://127.0.0.1:9/all"
notify_url = "https://hooks.slack.example/T/B/x"
notify_format = "slack"
public_url = "https://gatehost.example/"

[[daemon.webhooks]]
url = "https://ntfy.example/agents"
format = "ntfy"

[[daemon.webhooks]]
url = "http://127.0.0.1:9/some"
events = ["blocked", "session:stale"]

[hook]
notify_url = "https://discord.example/api/webhooks/1/x"
notify_format = "discord"
"#,
        "c.toml",
    )
    .expect("parses");
    let t = &c.daemon.targets;
    assert_eq!(t.len(), 4);
    assert_eq!((t[0].format, &t[0].events), (Format::Raw, &EventSet::All));
    assert_eq!(
        (t[1].format, &t[1].events),
        (Format::Slack, &EventSet::attention())
    );
    assert_eq!(
        (t[2].format, &t[2].events),
        (Format::Ntfy, &EventSet::attention())
    );
    assert_eq!(
        t[3].events,
        EventSet::Only(vec!["policy:blocked", "session:stale"])
    );
    assert_eq!(
        c.daemon.public_url.as_deref(),
        Some("https://gatehost.example")
    );
    let hook = c.hook.notify.expect("a hook notification");
    assert_eq!(hook.format, Format::Discord);
    assert_eq!(hook.events, EventSet::attention());

    for (bad, key) in [
        (
            "[daemon]\nwebhook_url = \"ftp://x\"\n",
            "daemon.webhook_url",
        ),
        (
            "[daemon]\nnotify_url = \"http://h/\"\nnotify_events = [\"blockd\"]\n",
            "daemon.notify_events",
        ),
        (
            "[daemon]\nnotify_format = \"slack\"\n",
            "daemon.notify_format",
        ),
        (
            "[daemon]\nwebhook_url = \"http://h/\"\nwebhook_format = \"teams\"\n",
            "webhook_format",
        ),
        (
            "[[daemon.webhooks]]\nurl = \"http://h/\"\nevents = []\n",
            "daemon.webhooks[0].events",
        ),
        ("[daemon]\npublic_url = \"gatehost\"\n", "daemon.public_url"),
        ("[hook]\nnotify_url = \"x\"\n", "hook.notify_url"),
    ] {
        let err = HostConfig::from_toml(bad, "c.toml")
            .expect_err(bad)
            .to_string();
        assert!(err.contains(key), "{bad}: {err}");
    }
}

#[test]
fn agents_get_no_pseudo_terminal_unless_granted() {
    let c = HostConfig::from_toml("", "c.toml").expect("parses");
    assert!(c.agents.confine && c.agents.network && !c.agents.pty);
    let c =
        HostConfig::from_toml("[agents]\npty = true\nnetwork = false\n", "c.toml").expect("parses");
    assert!(c.agents.pty && !c.agents.network);
    let e = HostConfig::from_toml("[agents]\nptys = true\n", "c.toml").unwrap_err();
    assert!(e.to_string().contains("ptys"), "{e}");
}

#[test]
fn ack_requires_is_the_token_by_default_a_passkey_when_said_and_nothing_else() {
    let c = HostConfig::from_toml("", "c.toml").expect("parses");
    assert_eq!(c.daemon.ack_requires, AckRequires::Token);
    let c =
        HostConfig::from_toml("[daemon]\nack_requires = \"passkey\"\n", "c.toml").expect("parses");
    assert_eq!(c.daemon.ack_requires, AckRequires::Passkey);
    let c =
        HostConfig::from_toml("[daemon]\nack_requires = \"token\"\n", "c.toml").expect("parses");
    assert_eq!(c.daemon.ack_requires, AckRequires::Token);
    let e = HostConfig::from_toml("[daemon]\nack_requires = \"password\"\n", "c.toml").unwrap_err();
    assert!(e.to_string().contains("ack_requires"), "{e}");
}

#[test]
fn sandbox_spawn_takes_vfork_or_fork_and_names_them_otherwise() {
    use crate::supervise::SpawnMode;
    let spawn = |text: &str| HostConfig::from_toml(text, "c.toml").map(|c| c.sandbox.spawn);
    assert_eq!(spawn("").expect("default"), SpawnMode::Vfork);
    assert_eq!(
        spawn("[sandbox]\nspawn = \"vfork\"\n").expect("vfork"),
        SpawnMode::Vfork
    );
    assert_eq!(
        spawn("[sandbox]\nspawn = \"fork\"\n").expect("fork"),
        SpawnMode::Fork
    );
    let m = spawn("[sandbox]\nspawn = \"posix_spawn\"\n")
        .expect_err("refused")
        .to_string();
    assert!(m.contains("sandbox.spawn"), "{m}");
    assert!(m.contains("\"vfork\" or \"fork\""), "{m}");
    assert!(m.contains("\"posix_spawn\""), "{m}");
}
