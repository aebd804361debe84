//! `gatehost check` as a user runs it: input validation before anything
//! runs, exit codes, gate lists, where the operator's files may live, the
//! human output, and the shipped example.

use crate::common;
use common::*;
use std::path::{Path, PathBuf};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A scratch area with `config` (config.toml) and `gate` (gate.json)
/// written beside the workspace: the area and the two files.
fn with_files(config: &str, gate: &str) -> (Scratch, PathBuf, PathBuf) {
    let s = Scratch::new();
    let (cfg, gate) = (s.write("config.toml", config), s.write("gate.json", gate));
    (s, cfg, gate)
}

/// The words of `line` (split at spaces) as arguments.
fn words(line: &str) -> Vec<String> {
    line.split(' ').map(String::from).collect()
}

/// `gatehost check [--json] [--config CONFIG] --workspace WS OPTIONS...
/// GATE`, with `env` added to its environment.
fn check(
    json: bool,
    config: Option<&Path>,
    [ws, gate]: [&Path; 2],
    options: &[&str],
    env: &[(&str, &str)],
) -> CliRun {
    let mut all = vec!["check".to_string()];
    if json {
        all.push("--json".into());
    }
    if let Some(c) = config {
        all.extend(["--config".into(), c.display().to_string()]);
    }
    all.extend(["--workspace".into(), ws.display().to_string()]);
    all.extend(options.iter().map(|o| o.to_string()));
    all.push(gate.display().to_string());
    run_gatehost(&all, env)
}

#[test]
fn malformed_gate_files_are_errors_that_name_the_field() {
    let s = Scratch::new();
    let marker_file = s.ws.join("ran");
    let touch = marker_file.display().to_string();
    let cases = [
        (
            format!(r#"{{"command": "touch", "args": ["{touch}"], "colour": "red"}}"#),
            "unknown field `colour`",
        ),
        (
            format!(r#"{{"command": "touch", "args": ["{touch}"], "timeoutMs": "10"}}"#),
            "timeoutMs: invalid type",
        ),
        (
            format!(r#"{{"command": "touch", "args": ["{touch}"], "timeoutMs": 0}}"#),
            "timeoutMs: must be at least 1",
        ),
        (
            r#"{"command": ""}"#.to_string(),
            "command: must not be empty",
        ),
        (
            format!(
                r#"[{{"command": "touch", "args": ["{touch}"]}}, {{"judge": {{"adapter": "j"}}}}]"#
            ),
            "[1].judge: missing field `prompt`",
        ),
        (
            r#"{"command": "touch", "args": "x"}"#.to_string(),
            "args: invalid type",
        ),
        ("not json".to_string(), "not valid JSON"),
    ];
    for (gate, expected) in cases {
        let run = s.check(&allow_config(&["touch"]), &gate, &[]);
        assert_eq!(run.code, 2, "{gate}");
        assert_eq!(run.outcome(), "error");
        assert!(run.reason().contains(expected), "{gate}: {}", run.reason());
        assert!(
            !marker_file.exists(),
            "a gate ran although the file was malformed: {gate}"
        );
    }
}

#[test]
fn a_list_runs_cheap_gates_first_and_stops_at_the_first_that_does_not_pass() {
    let s = Scratch::new();
    let log = s.out.join("judge-ran");
    let cfg = format!(
        "{}\n[judge.adapters.j]\ncommand = [\"bash\", \"{}\", \"{}\"]\nwrite = [\"{}\"]\n",
        allow_config(&[]),
        fixture_str("judges/record-prompt.sh"),
        log.display(),
        s.out.display()
    );
    let judge = r#"{"judge": {"adapter": "j", "prompt": "p"}}"#;
    let failing = script_gate("gates/exit-with.sh", &["3"], 10_000);
    let run = s.check(&cfg, &format!("[{judge}, {failing}]"), &[]);
    assert_eq!(run.code, 1);
    let json = run.json();
    assert_eq!(
        json["gates"].as_array().unwrap().len(),
        1,
        "only the shell gate ran"
    );
    assert!(
        json["gates"][0]["gate"]
            .as_str()
            .unwrap()
            .starts_with("shell: bash")
    );
    assert_eq!(json["skipped"][0], "judge: j");
    assert!(
        run.reason().starts_with("gate 1 of 2 (shell: bash"),
        "{}",
        run.reason()
    );
    assert!(run.reason().ends_with("exited with code 3"));
    assert!(!log.exists(), "the judge ran after a failing gate");

    let passing = script_gate("gates/exit-with.sh", &["0"], 10_000);
    let run = s.check(&cfg, &format!("[{judge}, {passing}]"), &[]);
    // The judge (record-prompt answers FAIL) ran second.
    assert_eq!(run.code, 1);
    let json = run.json();
    assert_eq!(json["gates"][0]["outcome"], "pass");
    assert_eq!(json["gates"][1]["reason"], "judge said FAIL");
    assert!(log.exists());
}

/// The configuration (`config_in_ws`) or the gate file (else) written in
/// the workspace, the other beside it: `check --json` refuses to run,
/// exit 2, its reason saying `why`. The scratch area, configuration and
/// gate file.
fn refused_in_the_workspace(config_in_ws: bool, why: &str) -> (Scratch, PathBuf, PathBuf) {
    let s = Scratch::new();
    let (config, gate) = (allow_config(&["true"]), r#"{"command": "true"}"#);
    let (cfg, gate) = if config_in_ws {
        (
            s.write_ws(".gatehost.toml", &config),
            s.write("gate.json", gate),
        )
    } else {
        (
            s.write("config.toml", &config),
            s.write_ws("gate.json", gate),
        )
    };
    let run = check(true, Some(&cfg), [&s.ws, &gate], &[], &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.reason().contains(why), "{}", run.reason());
    (s, cfg, gate)
}

#[test]
fn the_configuration_must_not_live_in_the_workspace() {
    refused_in_the_workspace(true, "is inside the workspace");
}

#[test]
fn a_gate_file_in_the_workspace_needs_an_explicit_trust_flag() {
    let (s, cfg, gate) = refused_in_the_workspace(false, "--trust-workspace-gate-file");
    let trusted = ["--trust-workspace-gate-file"];
    assert_eq!(
        check(true, Some(&cfg), [&s.ws, &gate], &trusted, &[]).code,
        0
    );
}

#[test]
fn configuration_comes_from_the_flag_else_the_environment() {
    let s = Scratch::new();
    let cfg = s.write("env-config.toml", &allow_config(&["true"]));
    let gate = s.write("gate.json", r#"{"command": "true"}"#);
    let with = |env: (&str, &str)| check(true, None, [&s.ws, &gate], &[], &[env]);
    let run = with(("GATEHOST_CONFIG", cfg.to_str().unwrap()));
    assert_eq!(run.code, 0, "{}", run.stdout);
    // Without any configuration the allowlist is empty.
    let run = with(("XDG_CONFIG_HOME", s.etc.to_str().unwrap()));
    assert_eq!(run.code, 2);
    assert_eq!(run.reason(), "command 'true' is not in the allowlist");
    // A named configuration that does not exist is an error, not defaults.
    let run = with(("GATEHOST_CONFIG", "/nonexistent/gatehost.toml"));
    assert_eq!(run.code, 2);
    assert!(
        run.reason().starts_with("cannot read configuration"),
        "{}",
        run.reason()
    );
}

#[test]
fn a_bad_configuration_or_workspace_is_exit_2() {
    let s = Scratch::new();
    let run = s.check("[shell]\nallow = \"true\"\n", r#"{"command": "true"}"#, &[]);
    assert_eq!(run.code, 2);
    assert!(
        run.reason().contains("shell.allow") || run.reason().contains("allow"),
        "{}",
        run.reason()
    );
    let gate = s.write("gate.json", r#"{"command": "true"}"#);
    let nowhere = Path::new("/nonexistent/ws");
    let run = check(true, None, [nowhere, &gate], &[], &[]);
    assert_eq!(run.code, 2);
    assert!(run.reason().contains("/nonexistent/ws"), "{}", run.reason());
}

#[test]
fn human_output_shows_outcome_reason_and_the_output_tail() {
    let exit_4 = script_gate("gates/exit-with.sh", &["4"], 10_000);
    let (s, cfg, gate) = with_files(&allow_config(&[]), &exit_4);
    let run = check(false, Some(&cfg), [&s.ws, &gate], &[], &[]);
    assert_eq!(run.code, 1);
    let out = &run.stdout;
    assert!(out.starts_with("FAIL  shell: bash "), "{out}");
    assert!(out.contains("— exited with code 4  [run "), "{out}");
    assert!(out.contains("| stdout of the gate"), "{out}");
    assert!(out.contains("| stderr of the gate"), "{out}");
}

#[test]
fn help_documents_the_command_and_exit_codes() {
    let run = run_gatehost(&args(&["check", "--help"]), &[]);
    assert_eq!(run.code, 0);
    for needle in [
        "--config",
        "--workspace",
        "--context",
        "--json",
        "GATE_FILE",
        "0 pass, 1 fail",
        "GATEHOST_CONFIG",
    ] {
        assert!(
            run.stdout.contains(needle),
            "--help lacks {needle}:\n{}",
            run.stdout
        );
    }
}

#[test]
fn the_shipped_example_passes() {
    let run = check_example("gates.json", "--context", "agent-message.txt");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let json = run.json();
    assert_eq!(json["gates"][0]["gate"], "unit tests");
    assert_eq!(json["gates"][1]["reason"], "judge said PASS");
}

/// Issue 14: completions and a man page come from the clap definitions
/// (every subcommand in them), and the top-level help names all three
/// kinds of gate.
#[test]
fn completions_man_page_and_help_cover_every_command() {
    let bash = run_gatehost(&args(&["completions", "bash"]), &[]);
    assert_eq!(bash.code, 0, "{}", bash.stderr);
    for word in ["_gatehost", "serve", "policy", "plugin", "completions"] {
        assert!(bash.stdout.contains(word), "bash completions lack {word}");
    }
    let zsh = run_gatehost(&args(&["completions", "zsh"]), &[]);
    assert!(
        zsh.stdout.starts_with("#compdef gatehost"),
        "{}",
        zsh.stdout
    );
    let bad = run_gatehost(&args(&["completions", "tcsh"]), &[]);
    assert_eq!(bad.code, 2);
    let man = run_gatehost(&args(&["man"]), &[]);
    assert_eq!(man.code, 0, "{}", man.stderr);
    assert!(man.stdout.contains(".TH gatehost"), "{}", man.stdout);
    for word in ["check", "serve", "VERDICT", "WASM"] {
        assert!(man.stdout.contains(word), "the man page lacks {word}");
    }
    let help = run_gatehost(&args(&["--help"]), &[]);
    assert!(help.stdout.contains("WASM plugin"), "{}", help.stdout);
    assert!(help.stdout.contains("completions"), "{}", help.stdout);
}

/// Each error is printed once, as plain text (no terminal colours when
/// stderr is not a terminal), naming the field at fault and what to do.
#[test]
fn an_error_is_printed_once_plainly_with_the_field_and_a_fix() {
    let (s, cfg, gate) = with_files(&allow_config(&["true"]), r#"{"comand": "true"}"#);
    let run = check(
        false,
        Some(&cfg),
        [&s.ws, &gate],
        &[],
        &[("GATEHOST_LOG", "info")],
    );
    let said = &run.stderr;
    assert_eq!(run.code, 2, "{said}");
    let errors = said.matches("gatehost: error:").count();
    assert_eq!(errors, 1, "the error is printed once: {said}");
    assert!(
        said.contains(": comand: not a gate field"),
        "the field is named: {said}"
    );
    assert!(!said.contains('\u{1b}'), "no ANSI colours: {said:?}");
    assert!(said.contains("did you mean `command`?"), "{said}");
    assert!(said.contains("  hint: "), "{said}");

    // A misspelt configuration key: its line, its dotted name, the
    // nearest known key, and the file to edit.
    let cfg = s.etc.join("config.toml");
    let run = s.check("[daemon]\nmax_gatin = 2\n", r#"{"command": "true"}"#, &[]);
    assert_eq!(run.code, 2);
    let v: serde_json::Value = serde_json::from_str(run.stdout.trim()).expect("one JSON object");
    assert_eq!(v["outcome"], "error", "check's report fields stay: {v}");
    assert_eq!(v["error"]["code"], "config", "{v}");
    assert_eq!(v["error"]["field"], "daemon.max_gatin", "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("daemon.max_gatin (line 2, column 1)"),
        "{message}"
    );
    assert!(message.contains("did you mean `max_gating`?"), "{message}");
    assert!(
        v["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains(&cfg.display().to_string())),
        "{v}"
    );
    assert_eq!(
        run.stderr.matches("max_gatin").count(),
        0,
        "--json errors go to stdout only: {}",
        run.stderr
    );
}

/// A command outside the allowlist says where the allowlist is and what
/// to add; a command with its arguments in one string says how to split it.
#[test]
fn a_refused_command_says_where_the_allowlist_is_and_what_to_add() {
    let s = Scratch::new();
    let cfg = s.write("config.toml", &allow_config(&["true"]));
    for (gate, want) in [
        (r#"{"command": "false"}"#, "add \"false\" there"),
        (
            r#"{"command": "rm -rf x"}"#,
            r#"write {"command": "rm", "args": ["-rf","x"]}"#,
        ),
    ] {
        let gate_file = s.write("gate.json", gate);
        let run = check(false, Some(&cfg), [&s.ws, &gate_file], &[], &[]);
        assert_eq!(run.code, 2, "{gate}");
        assert!(
            run.stdout.contains("is not in the allowlist"),
            "{}",
            run.stdout
        );
        assert!(run.stderr.contains(want), "{gate}: {}", run.stderr);
        assert!(
            run.stderr
                .contains(&format!("[shell] allow in {}", cfg.display())),
            "{}",
            run.stderr
        );
    }
}

/// With --json, every client command's error is one object on stdout in
/// the API's error shape, whether the daemon refused or was never reached.
#[test]
fn client_command_errors_are_one_json_shape() {
    let nowhere = "--server http://127.0.0.1:1 --token x";
    let error_of = |line: &str, env: &[(&str, &str)]| {
        let run = run_gatehost(&words(line), env);
        assert_eq!(run.code, 2, "{line}: {run:?}");
        let v: serde_json::Value = serde_json::from_str(run.stdout.trim()).expect("JSON on stdout");
        (run, v["error"].clone())
    };
    let (run, e) = error_of("policy list --json", &[("HOME", "/nonexistent")]);
    assert_eq!(e["code"], "no-daemon", "{e}");
    assert_eq!(e["field"], "--server", "{e}");
    assert!(run.stderr.trim().is_empty(), "{}", run.stderr);

    let (_, e) = error_of(
        &format!("wait --policy p --timeout 1s --json {nowhere}"),
        &[],
    );
    assert_eq!(e["code"], "timeout", "{e}");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("Connection refused")),
        "the last transport error is named: {e}"
    );

    let run = run_gatehost(&words(&format!("events poll {nowhere}")), &[]);
    assert_eq!(run.code, 2);
    assert!(run.stdout.is_empty());
    let said = &run.stderr;
    assert!(
        said.starts_with("gatehost: error: cannot reach the daemon"),
        "{said}"
    );
    assert!(
        said.contains("hint: is `gatehost serve` running?"),
        "{said}"
    );
}

/// `check` under a pseudo-terminal (util-linux `script`): what the
/// terminal shows, stdout and stderr together.
fn on_a_terminal(args: &[String]) -> String {
    let mut all = vec![env!("CARGO_BIN_EXE_gatehost").to_string()];
    all.extend(args.iter().cloned());
    let line = shlex::try_join(all.iter().map(String::as_str)).expect("quote");
    let out = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("TERM", "xterm")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn check_shows_what_runs_on_a_terminal_and_nothing_extra_piped_or_with_json() {
    let sleep = r#"{"command": "bash", "args": ["-c", "sleep 0.5"]}"#;
    let (s, cfg, gate) = with_files(&allow_config(&[]), sleep);
    let json = common::check_args(&cfg, &s.ws, &[], &gate);
    let human: Vec<String> = json.iter().filter(|a| *a != "--json").cloned().collect();
    let shown = on_a_terminal(&human);
    assert!(shown.contains("running shell"), "{shown:?}");
    assert!(shown.contains("PASS  shell"), "{shown:?}");
    // With --json on a terminal, and piped: the output only.
    let shown = on_a_terminal(&json);
    assert!(!shown.contains("running shell"), "{shown:?}");
    let piped = common::run_gatehost(&human, &[]);
    assert!(!piped.stderr.contains("running shell"), "{}", piped.stderr);
    assert!(!piped.stdout.contains("running shell"), "{}", piped.stdout);
}

/// Issue 48, item 12: with `python3` a pyenv shim (a script in
/// `<root>/shims` that runs `<root>/libexec/pyenv`, which runs the real
/// interpreter), the README walkthrough's configuration lets the gate run,
/// so its red test is a FAIL (exit 1) as the walkthrough says; a
/// configuration that does not grant the shim's tree is an ERROR (exit 2:
/// the gate could not run) whose reason is printed once (before: the
/// walkthrough's config gave ERROR, its reason printed three times).
#[test]
fn a_pyenv_shims_red_test_fails_as_the_walkthrough_says_and_an_unreachable_shim_says_why_once() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new();
    let home = s.etc.join("home");
    let root = home.join(".pyenv");
    let exe = |path: &std::path::Path, text: &str| {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    };
    // pyenv's own shape: the shim sets PYENV_ROOT and execs libexec/pyenv.
    exe(
        &root.join("shims/python3"),
        &format!(
            "#!/usr/bin/env bash\nset -e\nexport PYENV_ROOT=\"{}\"\nexec \"{}/libexec/pyenv\" exec \"${{0##*/}}\" \"$@\"\n",
            root.display(),
            root.display()
        ),
    );
    exe(
        &root.join("libexec/pyenv"),
        "#!/usr/bin/env bash\n[ \"$1\" = exec ] || exit 3\nshift 2\nexec /usr/bin/python3 \"$@\"\n",
    );
    s.write_ws("calc.py", "def add(a, b):\n    return a - b\n");
    s.write_ws(
        "test_calc.py",
        "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 2), 4)\n",
    );
    let gate = s.write(
        "python.json",
        r#"{"name": "unit tests", "command": "python3", "args": ["-m", "unittest", "-q"]}"#,
    );
    let path = format!("{}:/usr/bin:/bin", root.join("shims").display());
    let home_s = home.to_str().expect("utf-8");
    // The README walkthrough's configuration, written by its own line.
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"),
    )
    .expect("README");
    let line = readme
        .lines()
        .find(|l| l.contains("> ~/.config/gatehost/config.toml"))
        .expect("the walkthrough writes ~/.config/gatehost/config.toml");
    let made = std::process::Command::new("bash")
        .args(["-c", &format!("mkdir -p ~/.config/gatehost && {line}")])
        .env("HOME", &home)
        .status()
        .expect("bash");
    assert!(made.success());
    let env = [("HOME", home_s), ("PATH", path.as_str())];
    let check_with = |config: &Path| check(false, Some(config), [&s.ws, &gate], &[], &env);
    let run = check_with(&home.join(".config/gatehost/config.toml"));
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.starts_with("FAIL  unit tests"), "{run:?}");
    assert!(run.stdout.contains("AssertionError"), "{run:?}");

    let plain = s.write("plain.toml", "[shell]\nallow = [\"python3\"]\n");
    let run = check_with(&plain);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.starts_with("ERROR unit tests"), "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr)
        .matches("python3 is a pyenv shim")
        .count();
    assert_eq!(said, 1, "the reason, once: {run:?}");
    assert!(
        run.stdout
            .contains(&format!("read = [\"{}\"]", root.display())),
        "{run:?}"
    );
}
