//! The sandbox against hostile gates, through a real daemon on loopback:
//! the agent holds only its token and its workspace, and the gate runs
//! code the agent wrote (as `cargo test` runs its `build.rs`). Each test
//! also runs the same attack with `[sandbox] enabled = false` where that
//! is safe to do, to show that the attack is real and the test can see it.

use crate::common;
use crate::common::shorthand::{
    assert_has, assert_lacks, assert_refused, assert_starts, etc_dir, str_of,
};

use common::daemon::Daemon;
use common::{Scratch, allow_config, assert_no_survivors, fixture_str, marker, survivors};
use serde_json::{Value, json};
use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod judges;

const T: Duration = Duration::from_secs(60);

/// Host files the gate must never reach, planted beside the workspace.
struct Secrets {
    home: PathBuf,
    cache: PathBuf,
    secret_env: String,
}

fn plant(s: &Scratch, m: &str) -> Secrets {
    let home = s.etc.join("home");
    std::fs::create_dir_all(home.join(".ssh")).expect("mkdir");
    std::fs::write(home.join(".ssh/id_rsa"), format!("PRIVATE-KEY-{m}\n")).expect("key");
    let cache = etc_dir(s, "cache");
    std::fs::write(cache.join("planted.cwasm"), format!("COMPILED-{m}\n")).expect("cwasm");
    Secrets {
        home,
        cache,
        secret_env: format!("ENV-SECRET-{m}"),
    }
}

fn config(s: &Scratch, sec: &Secrets, sandbox_enabled: bool) -> PathBuf {
    let mut text = allow_config(&[]);
    if !sandbox_enabled {
        text = text.replace("[sandbox]\n", "[sandbox]\nenabled = false\n");
    }
    text.push_str(&format!(
        "[wasm]\ncache_dir = \"{}\"\n",
        sec.cache.display()
    ));
    s.write("config.toml", &text)
}

/// The agent's "test suite": tries everything it must not be able to do
/// and prints what worked. `escape` also tries to outlive the gate.
fn hostile_script(
    d: &Daemon,
    sec: &Secrets,
    s: &Scratch,
    port: u16,
    m: &str,
    escape: bool,
) -> String {
    let data = d.data.display();
    let mut script = format!(
        r#"try_read() {{ if v=$(cat "$2" 2>/dev/null) && [ -n "$v" ]; then echo "READ $1: $v"; else echo "DENIED read $1"; fi; }}
try_write() {{ if (echo pwned > "$2") 2>/dev/null; then echo "WROTE $1"; else echo "DENIED write $1"; fi; }}
try_read operator-token {data}/operator.token
try_read agent-token {data}/agent.token
try_read config {cfg}
try_read ssh-key {home}/.ssh/id_rsa
try_read daemon-environ /proc/{pid}/environ
try_read compiled-cache {cache}/planted.cwasm
try_read store {data}/gatehost.db
try_write data {data}/pwned
try_write home {home}/pwned
try_write config-dir {etc}/pwned
try_write cache {cache}/evil.cwasm
try_write tmp /tmp/gatehost-pwned-{m}
if (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then echo "CONNECTED"; else echo "DENIED connect"; fi
if kill -0 {pid} 2>/dev/null; then echo "SIGNALLED the daemon"; else echo "DENIED signal"; fi
echo "WROTE-OWN" > own-file && echo "WROTE workspace"
grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status
grep -E '^NoNewPrivs:' /proc/self/status
"#,
        cfg = d.config.display(),
        home = sec.home.display(),
        pid = d.pid(),
        cache = sec.cache.display(),
        etc = s.etc.display(),
    );
    if escape {
        // Leave the process group, then try to move into the parent
        // cgroup (and the root one), and live on after the gate.
        script.push_str(&format!(
            r#"setsid -f bash -c 'cg=$(cut -d: -f3 /proc/self/cgroup); for dir in /sys/fs/cgroup$(dirname "$cg") /sys/fs/cgroup; do (echo $$ > "$dir/cgroup.procs") 2>/dev/null && echo "MOVED to $dir"; done; exec -a "gatehost-test-$0" sleep 300' {m}
sleep 0.2
"#
        ));
    }
    script.push_str("exit 0\n");
    script
}

/// Registers `s1` on the workspace, attaches a gate running the agent's
/// script, reports a turn-end and returns the gate's stdout.
fn run_hostile_gate(d: &Daemon, s: &Scratch, script: &str) -> String {
    std::fs::write(s.ws.join("run-tests.sh"), script).expect("script");
    d.register("s1", &s.ws);
    let pid = d.attach(json!({
        "sessionId": "s1",
        "gate": {"command": "bash", "args": ["run-tests.sh"], "timeoutMs": 20000},
    }));
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "done", T);
    let out = str_of(&p["verdict"]["gates"][0]["stdout"]["text"]).to_string();
    eprintln!("the hostile gate printed:\n{out}");
    out
}

/// One run of the hostile gate in a fresh daemon.
struct Attack {
    s: Scratch,
    m: String,
    sec: Secrets,
    d: Daemon,
    listener: TcpListener,
    out: String,
}

fn attack(tag: &str, sandbox: bool, escape: bool) -> Attack {
    let s = Scratch::new();
    let m = marker(tag);
    let sec = plant(&s, &m);
    let cfg = config(&s, &sec, sandbox);
    let d = Daemon::start_with_env(
        &s.etc.join("data"),
        &cfg,
        &[
            ("HOME", &sec.home.display().to_string()),
            ("GATEHOST_TEST_SECRET", &sec.secret_env),
        ],
    );
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let out = run_hostile_gate(&d, &s, &hostile_script(&d, &sec, &s, port, &m, escape));
    let _ = std::fs::remove_file(format!("/tmp/gatehost-pwned-{m}"));
    Attack {
        s,
        m,
        sec,
        d,
        listener,
        out,
    }
}

#[test]
fn a_hostile_gate_reaches_nothing_of_the_host() {
    let Attack {
        s,
        m,
        sec,
        d,
        listener,
        out,
    } = attack("sbx", true, true);
    for what in [
        "operator-token",
        "agent-token",
        "config",
        "ssh-key",
        "daemon-environ",
        "compiled-cache",
        "store",
    ] {
        assert_has(&out, &format!("DENIED read {what}"));
    }
    for what in ["data", "home", "config-dir", "cache", "tmp"] {
        assert_has(&out, &format!("DENIED write {what}"));
    }
    assert_has(&out, "DENIED connect");
    assert_has(&out, "DENIED signal");
    assert_lacks(&out, "MOVED");
    // Nothing secret in the verdict the agent reads.
    for secret in [
        &d.operator,
        &d.agent,
        &sec.secret_env,
        &format!("PRIVATE-KEY-{m}"),
    ] {
        assert!(!out.contains(secret.as_str()), "leaked {secret}:\n{out}");
    }
    // And nothing written, nothing connected, nothing left running.
    for p in [
        d.data.join("pwned"),
        sec.home.join("pwned"),
        s.etc.join("pwned"),
        sec.cache.join("evil.cwasm"),
    ] {
        assert!(!p.exists(), "{} was written", p.display());
    }
    assert_lacks(&out, "WROTE tmp");
    assert_eq!(
        listener.accept().map(|_| ()).map_err(|e| e.kind()),
        Err(ErrorKind::WouldBlock),
        "the gate connected to a loopback listener"
    );
    assert!(survivors(&m).is_empty(), "a gate process outlived its gate");
    assert_no_survivors(&m);
    // Root's capabilities are gone, every set of them, and no_new_privs
    // holds (the daemon runs as root in CI).
    if rustix::process::geteuid().is_root() {
        for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            assert_has(&out, &format!("{set}:\t0000000000000000"));
        }
    }
    assert_has(&out, "NoNewPrivs:\t1");
    // Its own workspace stays writable.
    assert_has(&out, "WROTE workspace");
    assert_eq!(
        std::fs::read_to_string(s.ws.join("own-file")).expect("own file"),
        "WROTE-OWN\n"
    );
    // The daemon is alive.
    assert_eq!(d.agent_ok("GET", "/v1/health", None)["ok"], true);
}

#[test]
fn without_the_sandbox_the_same_gate_reads_the_tokens() {
    // The control: proves the attack above is real and visible to it.
    let Attack {
        s: _scratch,
        m,
        sec,
        d,
        out,
        ..
    } = attack("nosbx", false, false);
    assert_has(&out, &format!("READ operator-token: {}", d.operator));
    assert_has(&out, &format!("PRIVATE-KEY-{m}"));
    assert_has(&out, &sec.secret_env);
    assert_has(&out, "WROTE data");
    assert_has(&out, "CONNECTED");
    assert!(d.data.join("pwned").exists());
    assert_no_survivors(&m);
}

#[test]
fn where_the_sandbox_cannot_be_applied_a_gate_is_an_error_unless_the_operator_opts_out() {
    let s = Scratch::new();
    let gate = r#"{"command": "true"}"#;
    // A gate user that does not exist stands for any host where the
    // confinement asked for cannot be had.
    let missing = "[sandbox]\nuser = \"gatehost-no-such-user\"\n[shell]\nallow = [\"true\"]\n";
    let run = s.check(missing, gate, &[]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    let reason = run.gate0()["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_has(&reason, "the sandbox cannot be applied");
    assert_has(&reason, "'gatehost-no-such-user' does not exist");
    assert_has(&reason, "required = false");
    assert_has(&run.stderr, "sandbox: NOT AVAILABLE");
    // The operator's explicit, documented opt-out runs it unconfined, and
    // says so at start.
    let run = s.check(
        &missing.replace("[sandbox]\n", "[sandbox]\nrequired = false\n"),
        gate,
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_has(&run.stderr, "UNCONFINED");
    // Confined (the default), a check is quiet at the default log level:
    // what is in force is said where a person asks for it (`--log info`).
    let run = s.check("[shell]\nallow = [\"true\"]\n", gate, &[]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        !run.stderr.contains("Landlock"),
        "no banner at the default level: {}",
        run.stderr
    );
    let run = s.check("[shell]\nallow = [\"true\"]\n", gate, &["--log", "info"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_has(&run.stderr, "confined by Landlock ABI");
}

#[test]
fn gates_can_run_as_an_unprivileged_user_that_keeps_its_workspace_writable() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new();
    let top = s.ws.parent().expect("scratch top");
    std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o711)).expect("chmod");
    let gate = r#"{"command": "bash", "args": ["-c", "id -u; echo ok > made-by-gate; grep CapEff /proc/self/status; grep ^0:: /proc/self/cgroup"]}"#;
    let config = format!(
        "[sandbox]\nuser = \"nobody\"\nscratch_dir = \"{}\"\n[shell]\nallow = [\"bash\"]\n",
        s.etc.join("scratch").display()
    );
    // A workspace the user cannot write is refused with the reason.
    let run = s.check(&config, gate, &[]);
    assert_refused(&run, "not writable by the gate user");
    // Given the workspace, the gate runs as that user and writes there.
    let ws = std::ffi::CString::new(s.ws.display().to_string()).expect("path");
    assert_eq!(
        // SAFETY: chown(2) on a path we own, as root (the CI runs as root).
        unsafe { libc::chown(ws.as_ptr(), 65534, 65534) },
        0,
        "chown needs root"
    );
    // (With --log info: the sandbox's banner, which names the uid.)
    let run = s.check(&config, gate, &["--log", "info"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let out = run.gate0()["stdout"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_starts(&out, "65534\n");
    assert_has(&out, "CapEff:\t0000000000000000");
    // Still in a cgroup of its own: the unprivileged user may not clone3
    // into it, so the host moved itself in for that spawn.
    assert_has(&out, &format!("/gatehost-{}-", run.pid));
    assert_has(&run.stderr, "as uid 65534");
    use std::os::unix::fs::MetadataExt;
    let made = std::fs::metadata(s.ws.join("made-by-gate")).expect("the gate wrote its workspace");
    assert_eq!(made.uid(), 65534);
}

/// Variables are code: `GIT_CONFIG_COUNT`/`KEY_0`/`VALUE_0` give an
/// allowlisted `git status` any `core.fsmonitor`. The agent's gate may set
/// only what its allowlist entry lists (nothing here); the operator's may.
#[test]
fn an_agent_gate_setting_git_config_variables_is_refused_at_attach() {
    let s = Scratch::new();
    let git = "allow = [{ program = \"git\", subcommands = [\"status\"] }, ";
    let cfg = s.write("config.toml", &allow_config(&[]).replace("allow = [", git));
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    let gate = json!({
        "command": "git",
        "args": ["status"],
        "env": {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "core.fsmonitor",
            "GIT_CONFIG_VALUE_0": "touch /tmp/gatehost-pwned; false",
        }
    });
    let (status, body) = d.post(
        "/v1/policies",
        &d.agent,
        Some(json!({"sessionId": "s1", "gate": gate})),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "gate", "{body}");
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    for want in [
        "may not set env 'GIT_CONFIG_COUNT'",
        "shell.allow[0]",
        &cfg.display().to_string(),
        "env = [\"GIT_CONFIG_COUNT\"]",
    ] {
        assert!(msg.contains(want), "{want:?} missing from: {msg}");
    }
    // The operator's gate may (still sandboxed).
    let (status, body) = d.post(
        "/v1/policies",
        &d.operator,
        Some(json!({"sessionId": "s1", "gate": gate})),
    );
    assert_eq!(status, 201, "{body}");
}

#[test]
fn hostile_git_and_cargo_arguments_are_refused_at_attach_naming_the_argument() {
    let s = Scratch::new();
    let cfg = s.write(
        "config.toml",
        &format!(
            "{}\n{}\n",
            allow_config(&[]).replace(
                "allow = [",
                "allow = [{ program = \"git\", subcommands = [\"diff\", \"status\", \"log\"], deny = [\"-c\", \"--no-index\", \"--output\", \"--ext-diff\"] }, \
                 { program = \"cargo\", subcommands = [\"test\", \"build\", \"clippy\"], deny = [\"--config\", \"-Z\"] }, "
            ),
            ""
        ),
    );
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    let refused = |gate: Value, arg: &str| {
        let (status, body) = d.post(
            "/v1/policies",
            &d.agent,
            Some(json!({"sessionId": "s1", "gate": gate})),
        );
        assert_eq!(status, 400, "{body}");
        let msg = body["error"]["message"].as_str().unwrap_or_default();
        assert_has(msg, &format!("argument '{arg}'"));
        assert_eq!(body["error"]["field"], "gate");
    };
    refused(
        json!({"command": "git", "args": ["-c", "alias.x=!touch /tmp/pwned", "x"]}),
        "-c",
    );
    refused(
        json!({"command": "git", "args": ["diff", "--no-index", "/dev/null", "/root/.ssh/id_rsa"]}),
        "--no-index",
    );
    refused(
        json!({"command": "git", "args": ["diff", "/etc/shadow"]}),
        "/etc/shadow",
    );
    refused(
        json!({"command": "cargo", "args": ["test", "--config", "build.rustc=\"/tmp/evil\""]}),
        "--config",
    );
    refused(
        json!({"command": "cargo", "args": ["test", "--manifest-path", "/other/Cargo.toml"]}),
        "/other/Cargo.toml",
    );
    refused(json!({"command": "cargo", "args": ["run"]}), "run");
    // An environment variable the host does not pass, and the loader's.
    let (status, body) = d.post("/v1/policies", &d.agent, Some(json!({"sessionId": "s1", "gate": {"command": "bash", "args": ["x"], "env": ["GATEHOST_TEST_SECRET"]}})));
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("pass_env")
    );
    let (status, body) = d.post("/v1/policies", &d.agent, Some(json!({"sessionId": "s1", "gate": {"command": "bash", "args": ["x"], "env": {"LD_PRELOAD": "/tmp/x.so"}}})));
    assert_eq!(status, 400, "{body}");
    // The operator may attach what the agent may not (still sandboxed).
    let (status, body) = d.post("/v1/policies", &d.operator, Some(json!({"sessionId": "s1", "gate": {"command": "git", "args": ["-c", "core.pager=cat", "log"]}})));
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["spec"]["attachedBy"], "operator", "{body}");
    // A client cannot claim to be the operator in the body.
    let (status, body) = d.post("/v1/policies", &d.agent, Some(json!({"sessionId": "s1", "attachedBy": "operator", "gate": {"command": "git", "args": ["-c", "x=y", "log"]}})));
    assert_eq!(status, 400, "{body}");
}

/// `[sandbox] user = "nobody"` without `scratch_dir`: the scratch root is
/// `<temp dir>/gatehost-<uid>-scratch`, 0711, and a gate runs as nobody and
/// passes; the operator's `~/.cache` keeps its mode (before: gatehost made
/// `~/.cache/gatehost/scratch` with 0700 parents, the gate user could not
/// reach it, and every gate was refused while the daemon said it served).
/// A scratch root the gate user cannot reach, or one another user made
/// first, stops `serve` at start, naming the setting.
#[test]
fn a_gate_user_without_scratch_dir_gets_a_reachable_scratch_root_or_serve_refuses_to_start() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let s = Scratch::new();
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").mode() & 0o7777;
    let chmod = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod");
    };
    // The gate user may enter the workspace and the test's temp dirs.
    chmod(s.ws.parent().expect("top"), 0o711);
    chmod(s.etc.parent().expect("top"), 0o711);
    let ws = std::ffi::CString::new(s.ws.display().to_string()).expect("path");
    // SAFETY: chown(2) on a path we own, as root (the CI runs as root).
    let chowned = unsafe { libc::chown(ws.as_ptr(), 65534, 65534) };
    assert_eq!(chowned, 0, "chown needs root");
    let home = s.etc.join("home");
    std::fs::create_dir_all(home.join(".cache")).expect("mkdir");
    chmod(&home, 0o755);
    chmod(&home.join(".cache"), 0o755);
    let tmp = etc_dir(&s, "tmp");
    chmod(&tmp, 0o1777);
    let (home_s, tmp_s) = (home.display().to_string(), tmp.display().to_string());
    let env = [
        ("HOME", home_s.as_str()),
        ("XDG_CACHE_HOME", ""),
        ("TMPDIR", tmp_s.as_str()),
    ];
    let with_user = allow_config(&[]).replace("[sandbox]\n", "[sandbox]\nuser = \"nobody\"\n");
    let cfg = s.write("config.toml", &with_user);
    let d = Daemon::start_with_env(&s.etc.join("data"), &cfg, &env);
    d.register("s1", &s.ws);
    let pid = d.attach(
        json!({"sessionId": "s1", "gate": {"command": "bash", "args": ["-c", "id -u > who"]}}),
    );
    d.report("s1", "turn-end");
    let p = d.wait_status(&pid, "done", T);
    assert_eq!(p["verdict"]["outcome"], "pass", "{p}");
    let who = std::fs::read_to_string(s.ws.join("who")).expect("the gate wrote");
    assert_eq!(who.trim(), "65534");
    // SAFETY: geteuid(2) cannot fail.
    let euid = unsafe { libc::geteuid() };
    let root = tmp.join(format!("gatehost-{euid}-scratch"));
    assert_eq!(mode(&root), 0o711, "{}", root.display());
    assert_eq!(mode(&home.join(".cache")), 0o755);
    assert_eq!(mode(&home), 0o755);
    drop(d);

    let serve = |config: &Path, data: &str, tmp: &str| {
        common::run_gatehost(
            &[
                "serve".into(),
                "--listen".into(),
                "127.0.0.1:0".into(),
                "--data-dir".into(),
                s.etc.join(data).display().to_string(),
                "--config".into(),
                config.display().to_string(),
            ],
            &[("HOME", home_s.as_str()), ("TMPDIR", tmp)],
        )
    };
    // A scratch_dir the gate user cannot reach.
    let closed = etc_dir(&s, "closed");
    chmod(&closed, 0o700);
    let cfg = s.write(
        "closed.toml",
        &with_user.replace(
            "user = \"nobody\"\n",
            &format!(
                "user = \"nobody\"\nscratch_dir = {:?}\n",
                closed.join("scratch").display().to_string()
            ),
        ),
    );
    let run = serve(&cfg, "data2", &tmp_s);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert_has(&run.stderr, "cannot reach the scratch directory");
    assert_has(&run.stderr, "[sandbox] scratch_dir");
    assert_eq!(mode(&closed), 0o700);
    // A default root another user made first, in a temp dir they share.
    let shared = s.etc.join("shared-tmp");
    let planted = shared.join(format!("gatehost-{euid}-scratch"));
    std::fs::create_dir_all(&planted).expect("mkdir");
    chmod(&shared, 0o1777);
    chmod(&planted, 0o777);
    let p = std::ffi::CString::new(planted.display().to_string()).expect("path");
    // SAFETY: chown(2) on a path we made, as root.
    assert_eq!(unsafe { libc::chown(p.as_ptr(), 65534, 65534) }, 0);
    let cfg = s.write("config.toml", &with_user);
    let run = serve(&cfg, "data3", &shared.display().to_string());
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert_has(&run.stderr, "cannot prepare the scratch directory");
    assert_has(&run.stderr, "uid 65534");
}
