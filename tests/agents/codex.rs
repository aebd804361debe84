//! `gatehost hook codex` behind the real Codex CLI (0.169.0, pinned by
//! tests/support/agent-clis), run headless (`codex exec`) against the fake OpenAI
//! Responses API on loopback: the hook is installed as a user would (a
//! `hooks.json` in a private `CODEX_HOME`, trusted by its hash in
//! `config.toml`), a gate fails, and the test checks what reached the model,
//! what Codex did and what was left behind. How Codex is run and why each
//! setting is there: tests/support/fake-model-api/README.md, "Codex CLI".

use crate::common;

use common::agents::{AgentRun, FakeApi, agent_cli, scratch_repo};
use common::headless::{assert_nudged_once_then_commit_ready, daemon_allowing_test};
use common::{Scratch, assert_no_survivors, marker, survivors};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The model route Codex calls.
const RESPONSES: &str = "/v1/responses";
/// The longest a test waits for Codex or for one of its model calls.
const T: Duration = Duration::from_secs(90);

/// One Codex installation for one test: `CODEX_HOME`, `HOME` and `TMPDIR`
/// private, under a directory named after the test's marker (so every
/// process whose command line names it is found by `survivors`).
struct CodexEnv {
    dir: PathBuf,
    home: PathBuf,
    /// Added to Codex's environment (and so to its hooks').
    env: Vec<(String, String)>,
}

impl CodexEnv {
    /// Codex pointed at `api`, with `hook` (a shell command line) as its
    /// `SessionStart`, `UserPromptSubmit` and `Stop` hook, trusted.
    fn new(s: &Scratch, m: &str, api: &FakeApi, hook: &str) -> CodexEnv {
        let dir = run_dir(s, m);
        let home = dir.join("codex-home");
        for d in ["codex-home", "home", "tmp", "state"] {
            std::fs::create_dir_all(dir.join(d)).expect("mkdir");
        }
        let handler = |timeout: u64| json!([{"hooks": [{"type": "command", "command": hook, "timeout": timeout}]}]);
        // As `hook install` writes them: no SessionEnd (Codex 0.169 runs a
        // trusted one after a Stop hook's block, mid-session).
        let hooks = json!({"hooks": {
            "SessionStart": handler(120),
            "UserPromptSubmit": handler(120),
            "Stop": handler(120),
        }});
        let hooks_file = home.join("hooks.json");
        std::fs::write(&hooks_file, hooks.to_string()).expect("hooks.json");
        let config = format!(
            "model = \"gpt-5.5\"\nmodel_provider = \"fake\"\n\n\
             [model_providers.fake]\nname = \"fake\"\nbase_url = \"{}/v1\"\n\
             env_key = \"FAKE_OPENAI_KEY\"\nwire_api = \"responses\"\n\
             request_max_retries = 0\nstream_max_retries = 0\n\n\
             [analytics]\nenabled = false\n\n\
             [features]\nplugins = false\nshell_snapshot = false\n\
             unbounded_connection_retries = false\n\n{}",
            api.url(),
            trust_entries(&hooks_file, &hooks)
        );
        std::fs::write(home.join("config.toml"), config).expect("config.toml");
        CodexEnv {
            env: vec![
                ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
                ("HOME".into(), dir.join("home").display().to_string()),
                ("CODEX_HOME".into(), home.display().to_string()),
                ("TMPDIR".into(), dir.join("tmp").display().to_string()),
                ("FAKE_OPENAI_KEY".into(), "sk-fake".into()),
            ],
            dir,
            home,
        }
    }

    /// Codex pointed at `api`, its hooks installed and trusted by
    /// `gatehost hook install codex INSTALL_ARGS` (what a user runs).
    fn installed(s: &Scratch, m: &str, api: &FakeApi, install_args: &[String]) -> CodexEnv {
        let placeholder = CodexEnv::new(s, m, api, "true");
        // Only the provider's settings: the hooks and their trust are
        // gatehost's to write.
        std::fs::remove_file(placeholder.home.join("hooks.json")).expect("rm hooks.json");
        let config = placeholder.home.join("config.toml");
        let text = std::fs::read_to_string(&config).expect("config.toml");
        let provider = text
            .split("[hooks.state")
            .next()
            .expect("split")
            .to_string();
        std::fs::write(&config, &provider).expect("config.toml");
        let mut args: Vec<String> = vec!["hook".into(), "install".into(), "codex".into()];
        args.extend(install_args.iter().cloned());
        let run = crate::common::run_gatehost(
            &args,
            &[
                ("CODEX_HOME", placeholder.home.to_str().expect("utf-8")),
                (
                    "HOME",
                    placeholder.dir.join("home").to_str().expect("utf-8"),
                ),
            ],
        );
        assert_eq!(run.code, 0, "{run:?}");
        let after = std::fs::read_to_string(&config).expect("config.toml");
        assert!(
            after.starts_with(&provider),
            "the provider's settings were kept: {after}"
        );
        assert!(after.contains("trusted_hash"), "{after}");
        placeholder
    }

    fn state_dir(&self) -> PathBuf {
        state_dir(&self.dir)
    }

    /// Starts `codex exec PROMPT` in `cwd` (its output in files in the
    /// run's directory).
    fn spawn(&self, cwd: &Path, prompt: &str) -> AgentRun {
        let mut cmd = Command::new(agent_cli("codex"));
        cmd.args(["exec", "--skip-git-repo-check", "--strict-config", prompt])
            .current_dir(cwd)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        AgentRun::start(cmd, "", &self.dir)
    }

    /// Processes still carrying this Codex's `CODEX_HOME` in their
    /// environment: Codex and anything it started, whatever its command
    /// line.
    fn env_survivors(&self) -> Vec<i32> {
        let needle = format!("CODEX_HOME={}\0", self.home.display());
        let mut found = Vec::new();
        for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ"))
                && String::from_utf8_lossy(&env).contains(&needle)
            {
                found.push(pid);
            }
        }
        found
    }

    /// Nothing this test started is alive: by marker and by environment.
    fn assert_nothing_left(&self, m: &str) {
        assert_no_survivors(m);
        let deadline = Instant::now() + Duration::from_secs(2);
        while !self.env_survivors().is_empty() {
            assert!(
                Instant::now() < deadline,
                "processes of this Codex left alive: {:?}",
                self.env_survivors()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Where one test's Codex lives: named after the marker.
fn run_dir(s: &Scratch, m: &str) -> PathBuf {
    s.out.join(format!("gatehost-test-{m}"))
}

/// Where the hook keeps its standing: in the run's directory.
fn state_dir(run_dir: &Path) -> PathBuf {
    run_dir.join("state")
}

/// The `[hooks.state]` entries that make Codex trust every hook of
/// `hooks` (the JSON written at `file`): the key is the file's path, the
/// event in snake case and the hook's indexes; the hash is the SHA-256 of
/// the hook's normalized identity as compact JSON with sorted keys.
fn trust_entries(file: &Path, hooks: &Value) -> String {
    let mut out = String::new();
    for (event, groups) in hooks["hooks"].as_object().expect("events") {
        let label = match event.as_str() {
            "SessionStart" => "session_start",
            "UserPromptSubmit" => "user_prompt_submit",
            "Stop" => "stop",
            "SessionEnd" => "session_end",
            other => panic!("no trust label for {other}"),
        };
        for (g, group) in groups.as_array().expect("groups").iter().enumerate() {
            assert!(
                group.get("matcher").is_none(),
                "matchers are not hashed here"
            );
            for (h, hook) in group["hooks"].as_array().expect("hooks").iter().enumerate() {
                assert!(hook.get("statusMessage").is_none());
                let identity = format!(
                    "{{\"event_name\":\"{label}\",\"hooks\":[{{\"async\":{},\"command\":{},\"timeout\":{},\"type\":\"command\"}}]}}",
                    hook["async"].as_bool().unwrap_or(false),
                    serde_json::to_string(hook["command"].as_str().expect("command"))
                        .expect("json"),
                    hook["timeout"].as_u64().unwrap_or(600).max(1),
                );
                let hash = hex::encode(Sha256::digest(identity.as_bytes()));
                out.push_str(&format!(
                    "[hooks.state.{}]\ntrusted_hash = \"sha256:{hash}\"\n\n",
                    serde_json::to_string(&format!("{}:{label}:{g}:{h}", file.display()))
                        .expect("json")
                ));
            }
        }
    }
    out
}

/// The hook command line: this build's gatehost with `args`.
fn hook_command(args: &[String]) -> String {
    let mut words = vec![env!("CARGO_BIN_EXE_gatehost").to_string()];
    words.extend(["hook".to_string(), "codex".to_string()]);
    words.extend(args.iter().cloned());
    words
        .iter()
        .map(|w| {
            assert!(!w.contains('\''), "{w}");
            format!("'{w}'")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The block reasons Codex sent the model in this request: its user
/// messages `<hook_prompt …>REASON</hook_prompt>`.
fn hook_prompts(call: &Value) -> Vec<String> {
    call["body"]["input"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|i| i["role"] == "user")
                .flat_map(|i| i["content"].as_array().cloned().unwrap_or_default())
                .filter_map(|c| c["text"].as_str().map(str::to_string))
                .filter(|t| t.starts_with("<hook_prompt"))
                .collect()
        })
        .unwrap_or_default()
}

/// Codex's session id, as its model calls name it.
fn session_of(call: &Value) -> String {
    call["headers"]["session-id"]
        .as_str()
        .unwrap_or_else(|| panic!("no session-id header: {}", call["headers"]))
        .to_string()
}

/// Codex 0.169 says `warning: clamping SessionEnd hook timeout to 3s in
/// <hooks.json>` on every run whose SessionEnd hook asks for more.
fn assert_no_clamp_warning(stderr: &str) {
    assert!(
        !stderr.contains("clamping") && !stderr.contains("hook timeout"),
        "Codex clamped a hook timeout gatehost wrote: {stderr}"
    );
}

/// The hooks' status lines Codex printed on stderr for `Stop`, in order.
fn stop_statuses(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("hook: Stop "))
        .map(str::to_string)
        .collect()
}

/// Waits for `codex exec` to end and asserts what it showed: exit 0
/// (else its stderr and `more()`), `said` as all of its stdout, `stops` as
/// the Stop hook's statuses, and no clamped hook timeout. Its stderr.
fn ended(child: AgentRun, said: &str, stops: &[&str], more: impl Fn() -> String) -> String {
    let out = child.finish(T);
    let stderr = out.stderr;
    assert_eq!(out.status.code(), Some(0), "stderr:\n{stderr}{}", more());
    assert_eq!(out.stdout, said, "stderr:\n{stderr}");
    assert_eq!(stop_statuses(&stderr), stops, "{stderr}");
    assert_no_clamp_warning(&stderr);
    stderr
}

/// The standalone hook's record of one session.
fn standing(state_dir: &Path, session: &str) -> Value {
    let records: Vec<Value> = std::fs::read_dir(state_dir)
        .expect("state dir")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok())
        .collect();
    records
        .into_iter()
        .find(|r| r["sessionId"] == session)
        .unwrap_or_else(|| panic!("no hook state for session {session} in {state_dir:?}"))
}

/// Standalone options: a gate `test -f DONE` named after the marker, its
/// allowlist in a config outside the workspace.
fn standalone_args(s: &Scratch, m: &str, max_retries: u32) -> (Vec<String>, String) {
    let gate_name = format!("done-file-{m}");
    let gates = s.write(
        "gates.json",
        &json!([{"name": gate_name, "command": "test", "args": ["-f", "DONE"], "timeoutMs": 20000}])
            .to_string(),
    );
    let config = s.write("config.toml", "[shell]\nallow = [\"test\"]\n");
    let args = vec![
        "--gates".into(),
        gates.display().to_string(),
        "--config".into(),
        config.display().to_string(),
        "--state-dir".into(),
        state_dir(&run_dir(s, m)).display().to_string(),
        "--max-retries".into(),
        max_retries.to_string(),
        "--budget".into(),
        "60s".into(),
    ];
    (args, format!("The gate {gate_name} did not pass"))
}

#[test]
fn a_failing_gate_sends_codex_back_with_the_nudge_until_the_work_is_fixed() {
    let s = Scratch::new();
    let m = marker("codex-fix");
    let (api, release) = FakeApi::held_second(&s.out, "I am done.", "Now DONE exists.");
    let (args, nudge) = standalone_args(&s, &m, 2);
    // Installed as a user would: `gatehost hook install codex` writes the
    // hooks and Codex's trust of them.
    let codex = CodexEnv::installed(&s, &m, &api, &args);

    let child = codex.spawn(&s.ws, &format!("gatehost-test-{m}: create the file DONE"));
    let calls = api.wait_for_calls(RESPONSES, 2, T);
    // The first call is the prompt alone; the second carries the gate's
    // nudge, once, as the reason of the hook's block.
    assert!(
        hook_prompts(&calls[0]).is_empty(),
        "{:?}",
        hook_prompts(&calls[0])
    );
    let reasons = hook_prompts(&calls[1]);
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].contains(&nudge), "{reasons:?}");
    assert!(
        reasons[0].contains("Fix this and end your turn again."),
        "{reasons:?}"
    );
    let session = session_of(&calls[0]);
    assert_eq!(session_of(&calls[1]), session, "one session, one turn");
    assert_eq!(
        standing(&codex.state_dir(), &session)["standing"],
        "failing"
    );

    // The agent "fixes" the workspace while its call is held; the next stop
    // passes and Codex ends.
    std::fs::write(s.ws.join("DONE"), "").expect("DONE");
    std::fs::write(&release, "").expect("release");
    // What `hook install` wrote is within what Codex accepts for each event
    // (it warns on every run when it clamps a SessionEnd timeout above 3 s:
    // `ended` asserts no warning; gatehost writes no SessionEnd for Codex).
    ended(
        child,
        "Now DONE exists.\n",
        &["Blocked", "Completed"],
        String::new,
    );
    let hooks: Value = serde_json::from_str(
        &std::fs::read_to_string(codex.home.join("hooks.json")).expect("hooks.json"),
    )
    .expect("JSON");
    assert!(hooks["hooks"].get("SessionEnd").is_none(), "{hooks}");
    assert_eq!(
        api.model_calls(RESPONSES).len(),
        2,
        "no call after the pass"
    );
    assert_eq!(standing(&codex.state_dir(), &session)["standing"], "clear");
    codex.assert_nothing_left(&m);
}

#[test]
fn a_gate_never_fixed_blocks_exactly_max_retries_times_then_codex_stops() {
    let s = Scratch::new();
    let m = marker("codex-exhaust");
    let api = FakeApi::start(&s.out, "I am done.");
    let max_retries = 3; // not the default (2): the option is what counts
    let (args, nudge) = standalone_args(&s, &m, max_retries);
    let codex = CodexEnv::new(&s, &m, &api, &hook_command(&args));

    let child = codex.spawn(&s.ws, &format!("gatehost-test-{m}: create the file DONE"));
    // What the user sees of it in `codex exec`: the blocks, then a stop the
    // hook made (not "Completed", as after a pass). Codex prints no hook
    // message; gatehost's record says why.
    let mut want = vec!["Blocked"; max_retries as usize];
    want.push("Stopped");
    let stderr = ended(child, "I am done.\n", &want, String::new);

    // One call for the prompt, one per block; each block's reason is the
    // nudge, and the last call carries all of them.
    let calls = api.model_calls(RESPONSES);
    assert_eq!(calls.len(), max_retries as usize + 1, "{stderr}");
    let carrying = calls
        .iter()
        .filter(|c| hook_prompts(c).iter().any(|r| r.contains(&nudge)))
        .count();
    assert_eq!(carrying, max_retries as usize);
    let last = hook_prompts(calls.last().expect("calls"));
    assert_eq!(last.len(), max_retries as usize, "{last:?}");
    assert!(last.iter().all(|r| r.contains(&nudge)), "{last:?}");
    let session = session_of(&calls[0]);
    assert_eq!(
        standing(&codex.state_dir(), &session)["standing"],
        "exhausted"
    );
    codex.assert_nothing_left(&m);
}

#[test]
fn through_the_daemon_a_commit_policy_on_the_codex_session_nudges_then_awaits_the_ack() {
    let (s, m) = scratch_repo("codex-daemon");
    let d = daemon_allowing_test(&s, "daemon.toml");
    let attached = s.out.join("attached");
    let fixed = s.out.join("fixed");
    let api = FakeApi::start_script(
        &s.out,
        &json!([
            {"text": "I am done.", "hold_until": attached},
            {"text": "Now DONE exists.", "hold_until": fixed},
        ]),
    );
    let args = vec![
        "--state-dir".to_string(),
        state_dir(&run_dir(&s, &m)).display().to_string(),
        "--budget".into(),
        "60s".into(),
    ];
    let mut codex = CodexEnv::new(&s, &m, &api, &hook_command(&args));
    codex.env.push(("GATEHOST_SERVER".into(), d.url.clone()));
    codex.env.push(("GATEHOST_TOKEN".into(), d.agent.clone()));
    codex.env.push((
        "GATEHOST_SESSION_KEYS".into(),
        d.keyring().dir().display().to_string(),
    ));

    let child = codex.spawn(&s.ws, &format!("gatehost-test-{m}: create the file DONE"));
    // The first model call comes after SessionStart and UserPromptSubmit:
    // the session is registered by then, under Codex's own id.
    let calls = api.wait_for_calls(RESPONSES, 1, T);
    let session = format!("codex:{}", session_of(&calls[0]));
    let registered = d.agent_ok("GET", &format!("/v1/sessions/{session}"), None);
    assert_eq!(
        registered["cwd"].as_str().map(PathBuf::from),
        Some(s.ws.clone()),
        "{registered}"
    );
    let nudge = format!("DONE is missing ({m}): create it.");
    let pid = d.attach(json!({
        "sessionId": session,
        "gate": {"command": "test", "args": ["-f", "DONE"], "timeoutMs": 20000},
        "then": "commit",
        "commit": {"paths": ["DONE"], "message": "Add DONE"},
        "onFail": {"nudge": nudge, "maxRetries": 2},
    }));
    std::fs::write(&attached, "").expect("attached");

    // The turn-end gates the snapshot (no DONE): the policy nudges, the hook
    // blocks with the nudge, and Codex sends it to the model.
    let calls = api.wait_for_calls(RESPONSES, 2, T);
    let reasons = hook_prompts(&calls[1]);
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].contains(&nudge), "{reasons:?}");
    std::fs::write(s.ws.join("DONE"), "done\n").expect("DONE");
    std::fs::write(&fixed, "").expect("fixed");

    let daemon_log = || format!("\ndaemon:\n{}", d.log());
    ended(
        child,
        "Now DONE exists.\n",
        &["Blocked", "Completed"],
        daemon_log,
    );
    assert_eq!(api.model_calls(RESPONSES).len(), 2);
    d.wait_status(&pid, "awaiting-ack", T);
    assert_nudged_once_then_commit_ready(&d, &pid);
    // gatehost installs no SessionEnd for Codex (0.169 runs a trusted one
    // after a Stop's block, mid-session), so nothing reports the exit of a
    // `codex exec`: the session stays idle.
    let after = d.agent_ok("GET", &format!("/v1/sessions/{session}"), None);
    assert_eq!(after["state"], "idle", "{after}");
    codex.assert_nothing_left(&m);
    assert!(survivors(&m).is_empty());
}
