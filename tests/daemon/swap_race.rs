//! The workspace swap race (issue 48, item 1), through a real daemon: an
//! agent registers a directory of its own as a session's workspace and,
//! while its gate is being set up, swaps that directory for a symlink to
//! the daemon's data directory (or for another directory). The swap is
//! made deterministically, between the path's resolution and its open, by
//! the test build's `GATEHOST_TEST_BEFORE_WORKSPACE_OPEN` hook (a script
//! armed by a file, so that registration itself is not raced).
//!
//! Whatever the run (a native gate, a WASM plugin, a judge, an agent the
//! daemon starts), it is given the directory the checks looked at or
//! nothing: the data directory is never opened as a workspace, nothing is
//! written there, nothing of it is read, and the refusal says why.

use crate::common;
use crate::common::shorthand::{assert_has, assert_lacks};

use common::daemon::Daemon;
use common::{Scratch, allow_config, assert_no_env_survivors, marker};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);
const HOOK: &str = "GATEHOST_TEST_BEFORE_WORKSPACE_OPEN";

/// A daemon whose workspace opens run `hook.sh`, and a session `s1` whose
/// workspace is `ws/inner` (a plain directory: no git repository above it
/// decides the workspace).
struct Race {
    s: Scratch,
    d: Daemon,
    inner: PathBuf,
    data: PathBuf,
    armed: PathBuf,
}

/// What the armed hook puts at the workspace's path.
enum SwapIn<'a> {
    /// A symlink to this directory.
    Symlink(&'a Path),
    /// This (real) directory, moved there.
    Directory(&'a Path),
}

impl Race {
    fn new(extra_config: &str) -> Race {
        let s = Scratch::new();
        let inner = s.ws.join("inner");
        std::fs::create_dir_all(&inner).expect("mkdir");
        let data = s.etc.join("data");
        let armed = s.etc.join("armed");
        let cfg = s.write(
            "config.toml",
            &format!("{}{extra_config}", allow_config(&["true"])),
        );
        let hook = s.etc.join("hook.sh");
        std::fs::write(&hook, "#!/bin/bash\nexit 0\n").expect("hook");
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let hook_text = hook.display().to_string();
        let d = Daemon::start_with_env(&data, &cfg, &[(HOOK, hook_text.as_str())]);
        d.register("s1", &inner);
        Race {
            s,
            d,
            inner,
            data,
            armed,
        }
    }

    /// Arms the hook: at the next open of the workspace, it swaps `swap`
    /// in at the workspace's path (once; the real workspace is kept at
    /// `inner.real`).
    fn arm(&self, swap: SwapIn<'_>) {
        let inner = self.inner.display();
        let put = match swap {
            SwapIn::Symlink(target) => format!("ln -s '{}' '{inner}'", target.display()),
            SwapIn::Directory(dir) => format!("mv '{}' '{inner}'", dir.display()),
        };
        let script = format!(
            "#!/bin/bash\n[ \"$1\" = '{inner}' ] || exit 0\nrm '{armed}' 2>/dev/null || exit 0\nmv '{inner}' '{inner}.real' && {put}\n",
            armed = self.armed.display()
        );
        let hook = self.s.etc.join("hook.sh");
        std::fs::write(&hook, script).expect("hook");
        std::fs::write(&self.armed, "").expect("arm");
    }

    /// Attaches `gate` to s1 (the attach opens the workspace too, before
    /// the hook is armed), arms the hook with `swap`, ends the session's
    /// turn, and returns the blocked policy.
    fn gate_blocked(&self, gate: Value, swap: SwapIn<'_>) -> Value {
        let pid = self.d.attach(json!({
            "sessionId": "s1", "gate": gate, "onFail": {"maxRetries": 0}
        }));
        self.arm(swap);
        self.d.report("s1", "turn-end");
        self.d.wait_status(&pid, "blocked", T)
    }

    /// Names of the data directory's entries.
    fn data_entries(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.data)
            .expect("data dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn assert_hook_fired(&self) {
        assert!(!self.armed.exists(), "the hook never swapped");
        assert!(
            std::fs::symlink_metadata(&self.inner).is_ok(),
            "something is at the workspace's path"
        );
    }
}

fn reason(p: &Value) -> String {
    p["reason"].as_str().unwrap_or_default().to_string()
}

#[test]
fn a_native_gate_is_never_given_a_data_directory_swapped_in() {
    let r = Race::new("");
    let before = r.data_entries();
    let p = r.gate_blocked(
        json!({"command": "bash", "args": ["-c", "echo ran > gate-was-here; ls > listing"]}),
        SwapIn::Symlink(&r.data),
    );
    r.assert_hook_fired();
    let why = reason(&p);
    assert!(why.contains("symlink"), "{p}");
    assert!(why.starts_with("the gate could not run"), "{p}");
    assert_eq!(
        r.data_entries(),
        before,
        "nothing was written in the data directory"
    );
    assert!(
        !r.inner
            .with_extension("real")
            .join("gate-was-here")
            .exists()
    );
}

#[test]
fn a_wasm_plugin_never_reads_a_data_directory_swapped_in() {
    let plugins =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/target/wasm32-wasip2/release");
    let cache = Scratch::new();
    let r = Race::new(&format!(
        "[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n",
        plugins.display(),
        cache.etc.join("cache").display()
    ));
    // Every line of every file is a finding: the operator's token would
    // be spelled out in the verdict.
    let p = r.gate_blocked(
        json!({"wasm": {"plugin": "forbid-patterns", "config": {
            "scope": "all",
            "rules": [{"id": "any", "pattern": ".+", "message": "a line"}]
        }}}),
        SwapIn::Symlink(&r.data),
    );
    r.assert_hook_fired();
    assert!(reason(&p).contains("symlink"), "{p}");
    let shown = p.to_string();
    let token = std::fs::read_to_string(r.data.join("operator.token")).expect("token");
    assert_lacks(&shown, "operator.token");
    assert_lacks(&shown, token.trim());
}

#[test]
fn a_judge_never_runs_for_a_data_directory_swapped_in() {
    let seen = Scratch::new();
    let saved = seen.out.join("prompt.txt");
    let r = Race::new(&format!(
        "[judge.adapters.record]\ncommand = [\"bash\", \"{}\", \"{}\"]\nwrite = [\"{}\"]\n",
        common::fixture_str("judges/record-prompt.sh"),
        saved.display(),
        seen.out.display()
    ));
    let p = r.gate_blocked(
        json!({"judge": {"adapter": "record", "prompt": "Is it clean?"}}),
        SwapIn::Symlink(&r.data),
    );
    r.assert_hook_fired();
    assert!(reason(&p).contains("symlink"), "{p}");
    assert!(!saved.exists(), "the judge ran");
}

#[test]
fn an_agent_the_daemon_starts_is_never_confined_to_a_data_directory_swapped_in() {
    let r = Race::new("");
    let before = r.data_entries();
    let m = marker("swap-agent");
    r.arm(SwapIn::Symlink(&r.data));
    let (code, body) = r.d.post(
        "/v1/sessions/start",
        &r.d.operator,
        Some(json!({
            "id": "bot",
            "cwd": r.inner,
            "command": ["bash", "-c", format!("echo {m} > agent-was-here; sleep 5")]
        })),
    );
    r.assert_hook_fired();
    assert!((400..500).contains(&code), "HTTP {code}: {body}");
    assert_has(&body.to_string(), "symlink");
    assert_eq!(
        r.data_entries(),
        before,
        "nothing was written in the data directory"
    );
    assert_no_env_survivors(&m);
    let (code, _) = r.d.get("/v1/sessions/bot", &r.d.operator);
    assert_eq!(code, 404, "no session was registered");
}

#[test]
fn a_workspace_replaced_by_another_directory_since_registration_runs_nothing() {
    let r = Race::new("");
    // Another directory of the agent's, where the gate would pass.
    let other = r.s.ws.join("other");
    std::fs::create_dir_all(&other).expect("mkdir");
    let p = r.gate_blocked(
        json!({"command": "bash", "args": ["-c", "echo ran > gate-was-here"]}),
        SwapIn::Directory(&other),
    );
    r.assert_hook_fired();
    let why = reason(&p);
    assert!(
        why.contains("no longer the directory that was registered"),
        "{p}"
    );
    assert!(why.contains("register the session again"), "{p}");
    assert!(
        !r.inner.join("gate-was-here").exists(),
        "the gate ran in the other directory"
    );
    // Registered again, the session's workspace is that directory.
    r.d.register("s1", &r.inner);
    let pid =
        r.d.attach(json!({"sessionId": "s1", "gate": {"command": "true"}}));
    r.d.report("s1", "turn-end");
    r.d.wait_status(&pid, "done", T);
}
