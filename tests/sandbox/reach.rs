//! A program the sandbox cannot read is a setup `error` naming the path and
//! the `[sandbox] read` line to add, never a red test: at load (`check`,
//! attach, before any gate runs) for what the program's `#!` line and a
//! version manager's layout show, and at run time for what a script execs
//! that no load-time walk can see.

use crate::common;
use crate::common::shorthand::assert_has;

use common::daemon::Daemon;
use common::{Scratch, allow_config, assert_no_survivors, check_args, marker, run_gatehost};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn script(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A home directory under /tmp (which the sandbox does not read) holding a
/// pyenv-like install: `shims/python3` execs `$PYENV_ROOT/libexec/pyenv
/// exec python3`, as pyenv's shims do. Its path carries the marker, so any
/// process left running from it is found.
fn fake_pyenv(s: &Scratch, m: &str) -> (PathBuf, PathBuf) {
    let home = s.etc.join(format!("gatehost-test-{m}")).join("home");
    let root = home.join(".pyenv");
    script(
        &root.join("shims/python3"),
        &format!(
            "#!/usr/bin/env bash\nset -e\nprogram=\"${{0##*/}}\"\nexport PYENV_ROOT=\"{}\"\n\
             exec \"$PYENV_ROOT/libexec/pyenv\" exec \"$program\" \"$@\"\n",
            root.display()
        ),
    );
    script(
        &root.join("libexec/pyenv"),
        "#!/usr/bin/env bash\necho \"fake pyenv: $*\"\n",
    );
    (home, root)
}

fn pyenv_env(home: &Path, root: &Path) -> (String, String) {
    (
        format!("{}:/usr/bin:/bin", root.join("shims").display()),
        home.display().to_string(),
    )
}

#[test]
fn a_pyenv_shim_the_sandbox_cannot_read_is_an_error_at_check_naming_the_read_line() {
    let s = Scratch::new();
    let m = marker("reach-pyenv");
    let (home, root) = fake_pyenv(&s, &m);
    let (path, home_s) = pyenv_env(&home, &root);
    let env = [("PATH", path.as_str()), ("HOME", home_s.as_str())];
    let config = allow_config(&["python3"]);
    let cfg = s.write("config.toml", &config);
    // The shim is the second gate: nothing runs before the check.
    let gate = s.write(
        "gate.json",
        &json!([
            {"command": "bash", "args": ["-c", "touch ran-first"]},
            {"command": "python3"},
        ])
        .to_string(),
    );
    let run = run_gatehost(&check_args(&cfg, &s.ws, &[], &gate), &env);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.outcome(), "error", "{}", run.stdout);
    let reason = run.gate0()["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let libexec = root.join("libexec/pyenv").display().to_string();
    for want in [
        format!("the sandbox does not let gates read {libexec}"),
        "python3 is a pyenv shim".to_string(),
        format!(
            "add `read = [\"{}\"]` to [sandbox] in {}",
            root.display(),
            cfg.display()
        ),
    ] {
        assert!(reason.contains(&want), "{want:?} missing from: {reason}");
    }
    assert!(
        !s.ws.join("ran-first").exists(),
        "a gate ran before the check"
    );
    // With the read line the hint names, the same gates pass.
    let granted = config.replace(
        "[sandbox]\nread = [",
        &format!("[sandbox]\nread = [{:?}, ", root.display().to_string()),
    );
    assert_ne!(granted, config);
    let cfg = s.write("config.toml", &granted);
    let run = run_gatehost(&check_args(&cfg, &s.ws, &[], &gate), &env);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_has(&run.stdout, "fake pyenv: exec python3");
    assert_no_survivors(&m);
}

#[test]
fn a_pyenv_shim_the_sandbox_cannot_read_is_refused_at_attach() {
    let s = Scratch::new();
    let m = marker("reach-attach");
    let (_home, root) = fake_pyenv(&s, &m);
    let shim = root.join("shims/python3").display().to_string();
    let cfg = s.write("config.toml", &allow_config(&[&shim]));
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    let (status, body) = d.post(
        "/v1/policies",
        &d.operator,
        Some(json!({"sessionId": "s1", "gate": {"command": shim}})),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "gate", "{body}");
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    for want in [
        format!("{}", root.join("libexec/pyenv").display()),
        format!("read = [\"{}\"]", root.display()),
        cfg.display().to_string(),
    ] {
        assert!(msg.contains(&want), "{want:?} missing from: {msg}");
    }
    drop(d);
    assert_no_survivors(&m);
}

#[test]
fn an_exec_the_sandbox_refuses_at_run_time_is_an_error_with_the_hint_not_a_fail() {
    let s = Scratch::new();
    let m = marker("reach-run");
    // A tool outside every grant that the load check cannot see: the gate
    // is `bash -c`, and the script execs it.
    let tools = s.etc.join(format!("gatehost-test-{m}")).join("tools");
    script(&tools.join("bin/tool"), "#!/bin/sh\necho tool ran\n");
    let tool = tools.join("bin/tool").display().to_string();
    let gate = json!({"command": "bash", "args": ["-c", format!("exec {tool}")]}).to_string();
    let run = s.check(&allow_config(&[]), &gate, &[]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let v = run.gate0();
    assert_eq!(v["outcome"], "error", "{v}");
    assert_eq!(v["exitCode"], 126, "{v}");
    let reason = v["reason"].as_str().unwrap_or_default();
    for want in [
        format!("the sandbox does not let gates read {tool}"),
        "refused at run time".to_string(),
        format!("add `read = [\"{}\"]` to [sandbox]", tools.display()),
    ] {
        assert!(reason.contains(&want), "{want:?} missing from: {reason}");
    }
    // A 126 from a path inside the grants (a file of the workspace that is
    // not executable) is what it was: the gate's own failure.
    let notexec = s.write_ws("notexec", "#!/bin/sh\n");
    std::fs::set_permissions(&notexec, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let gate = json!({"command": "bash", "args": ["-c", format!("exec {}", notexec.display())]})
        .to_string();
    let run = s.check(&allow_config(&[]), &gate, &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let v = run.gate0();
    assert_eq!(v["outcome"], "fail", "{v}");
    assert_eq!(v["exitCode"], 126, "{v}");
    assert_no_survivors(&m);
}
