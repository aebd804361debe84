//! `gatehost mcp` through a real MCP client: the official MCP Python SDK
//! (pinned with its hashes in tests/support/mcp-client/requirements.txt, installed
//! into a venv under target/ by scripts/install-mcp-client.sh) runs
//! tests/support/mcp-client/client.py, which spawns `gatehost mcp` over stdio
//! against a real `gatehost serve` and answers each scripted step (one JSON
//! line in) with one JSON line out.
//!
//! Every process a test starts (the daemon, the client, `gatehost mcp`)
//! carries the test's marker in its environment; each test ends by proving
//! none of them is left.

mod bad_input;
mod routines;

use crate::common::daemon::{Daemon, git_repo};
use crate::common::{Scratch, allow_config, marker, run_gatehost};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

const MARKER_VAR: &str = "GATEHOST_TEST_MARKER";
/// The longest one step of the client may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// The venv's python that scripts/install-mcp-client.sh made.
fn python() -> PathBuf {
    let (var, script) = ("GATEHOST_MCP_CLIENT_DIR", "install-mcp-client.sh");
    crate::common::agents::installed_tool(var, "mcp-client", "venv/bin/python", script)
}

/// Pids of live processes whose environment holds `GATEHOST_TEST_MARKER=marker`.
fn marked(marker: &str) -> Vec<i32> {
    let needle = format!("{MARKER_VAR}={marker}");
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        // A zombie's environ reads empty: only the living count.
        if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ"))
            && env.split(|b| *b == 0).any(|v| v == needle.as_bytes())
        {
            found.push(pid);
        }
    }
    found
}

/// Fails when a process the test marked is still alive (after a moment
/// for the kernel to finish what was killed), killing what is left.
fn assert_none_left(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !marked(marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = marked(marker);
    for pid in &left {
        // SAFETY: kill(2) on a pid this test's marker found.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    assert!(
        left.is_empty(),
        "processes left alive for {marker}: {left:?}"
    );
}

/// A scratch area, a marker named `name`, and a [`daemon`] carrying it
/// (its data in `s.etc/data`).
fn setup(name: &str) -> (Scratch, String, Daemon) {
    let m = marker(name);
    let s = Scratch::new();
    let d = daemon(&s, &s.etc.join("data"), &m);
    (s, m, d)
}

/// The session ends well (the client exits 0), the daemon stops, and
/// nothing the test marked is left.
fn finish(c: McpClient, d: Daemon, m: &str) {
    assert_eq!(c.close(), 0);
    drop(d);
    assert_none_left(m);
}

/// A daemon whose environment carries `marker`, with `true` allowed.
fn daemon(s: &Scratch, data: &Path, marker: &str) -> Daemon {
    let config = s.write("config.toml", &allow_config(&["true"]));
    Daemon::start_with_env(data, &config, &[(MARKER_VAR, marker)])
}

/// The MCP client (client.py) with its `gatehost mcp` server.
struct McpClient {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: PathBuf,
    /// The first line: `{"ready": true, "protocolVersion", "serverInfo"}`
    /// or `{"error": …}`.
    first: Value,
}

impl McpClient {
    /// Starts the client, which spawns `gatehost mcp` with `env` (and the
    /// marker) and initializes the session.
    fn start(dir: &Path, marker: &str, env: &[(&str, &str)]) -> McpClient {
        McpClient::start_args(dir, marker, &["mcp"], env)
    }

    /// [`McpClient::start_in`] for an agent of `d`: the server given the
    /// daemon's URL, the agent token and the keyring (then `more`), and
    /// started in `cwd` (when given).
    fn for_agent(
        s: &Scratch,
        m: &str,
        d: &Daemon,
        cwd: Option<&Path>,
        more: &[(&str, &str)],
    ) -> McpClient {
        let keys = d.keyring().dir().display().to_string();
        let mut env = vec![
            ("GATEHOST_SERVER", d.url.as_str()),
            ("GATEHOST_TOKEN", d.agent.as_str()),
            ("GATEHOST_SESSION_KEYS", keys.as_str()),
        ];
        env.extend_from_slice(more);
        McpClient::start_in(&s.out, m, &["mcp"], &env, cwd)
    }

    /// [`McpClient::start`] with the server's arguments `args`.
    fn start_args(dir: &Path, marker: &str, args: &[&str], env: &[(&str, &str)]) -> McpClient {
        McpClient::start_in(dir, marker, args, env, None)
    }

    /// [`McpClient::start_args`] with the server started in `cwd`.
    fn start_in(
        dir: &Path,
        marker: &str,
        args: &[&str],
        env: &[(&str, &str)],
        cwd: Option<&Path>,
    ) -> McpClient {
        let mut server_env: serde_json::Map<String, Value> =
            env.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        server_env.insert(MARKER_VAR.into(), json!(marker));
        server_env.insert("GATEHOST_LOG".into(), json!("gatehost=info"));
        let config = dir.join("mcp-server.json");
        std::fs::write(
            &config,
            json!({
                "command": env!("CARGO_BIN_EXE_gatehost"),
                "args": args,
                "env": server_env,
                "cwd": cwd,
            })
            .to_string(),
        )
        .expect("write the server config");
        let stderr = dir.join("mcp-client.err");
        let mut child = Command::new(python())
            .arg(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/support/mcp-client/client.py"),
            )
            .arg(&config)
            .env(MARKER_VAR, marker)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawn the MCP client");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut client = McpClient {
            child,
            stdin,
            lines,
            stderr,
            first: Value::Null,
        };
        client.first = client.read();
        client
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn read(&self) -> Value {
        match self.lines.recv_timeout(STEP_TIMEOUT) {
            Ok(line) => serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("the client printed {line:?} ({e})\n{}", self.log())),
            Err(e) => panic!(
                "no answer from the MCP client ({e}); its stderr:\n{}",
                self.log()
            ),
        }
    }

    /// Asserts the session started.
    fn ready(&self) -> &Value {
        assert_eq!(self.first["ready"], true, "{}\n{}", self.first, self.log());
        &self.first
    }

    fn step(&mut self, step: &Value) -> Value {
        let stdin = self.stdin.as_mut().expect("open stdin");
        writeln!(stdin, "{step}").expect("write a step");
        stdin.flush().expect("flush");
        let answer = self.read();
        assert!(
            answer.get("exception").is_none(),
            "{step} raised {answer}\n{}",
            self.log()
        );
        answer
    }

    fn list_tools(&mut self) -> Vec<Value> {
        let v = self.step(&json!({"op": "list_tools"}));
        v["tools"].as_array().cloned().expect("tools")
    }

    /// A tool call's answer: `isError`, `structuredContent`, `text`.
    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.step(&json!({"op": "call", "tool": tool, "arguments": arguments}))
    }

    /// A call that must succeed: its structured content.
    fn ok(&mut self, tool: &str, arguments: Value) -> Value {
        let v = self.call(tool, arguments.clone());
        assert_eq!(v["isError"], false, "{tool} {arguments}: {v}");
        v["structuredContent"].clone()
    }

    /// A call that must fail: its error object (`code`, `message`, `field`?).
    fn err(&mut self, tool: &str, arguments: Value) -> Value {
        let v = self.call(tool, arguments.clone());
        assert_eq!(v["isError"], true, "{tool} {arguments}: {v}");
        // The text the agent reads says the same as the structured error.
        let text: Value = serde_json::from_str(v["text"][0].as_str().expect("text")).expect("json");
        assert_eq!(text, v["structuredContent"], "{v}");
        v["structuredContent"]["error"].clone()
    }

    /// Closes stdin (the session ends) and waits for the client to exit.
    fn close(mut self) -> i32 {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                return st.code().unwrap_or(-1);
            }
            assert!(
                Instant::now() < deadline,
                "the MCP client did not exit\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn types(events: &Value) -> Vec<String> {
    events
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["type"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// What `hook install --mcp --data-dir` (or `--server --token-file`)
/// writes: `gatehost mcp` reaches a daemon on another data directory with
/// nothing in its environment, and refuses a token file others can read.
#[test]
fn mcp_reaches_a_daemon_by_its_data_directory_or_a_token_file() {
    use std::os::unix::fs::PermissionsExt;
    let m = marker("mcp-data-dir");
    let s = Scratch::new();
    let data = s.etc.join("gh-data");
    let d = daemon(&s, &data, &m);
    let keys = d.keyring().dir().display().to_string();
    let env = [("GATEHOST_SESSION_KEYS", keys.as_str())];
    let data_s = data.display().to_string();
    let mut c = McpClient::start_args(&s.out, &m, &["mcp", "--data-dir", &data_s], &env);
    c.ready();
    assert!(c.ok("policy_list", json!({}))["policies"].is_array());
    assert_eq!(c.close(), 0);

    let token = s.write("agent.token", &d.agent);
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let token_s = token.display().to_string();
    let by_file = ["mcp", "--server", &d.url, "--token-file", &token_s];
    let mut c = McpClient::start_args(&s.out, &m, &by_file, &env);
    c.ready();
    assert!(c.ok("policy_list", json!({}))["policies"].is_array());
    assert_eq!(c.close(), 0);

    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let c = McpClient::start_args(&s.out, &m, &by_file, &env);
    assert_ne!(
        c.first["ready"], true,
        "a token file others can read is refused: {}",
        c.first
    );
    assert!(c.log().contains("owner-only"), "{}", c.log());
    drop(c);
    drop(d);
    assert_none_left(&m);
}

/// An agent knows its own session without guessing its id: the live
/// session its hook registered in the workspace the MCP server runs in
/// (or the one GATEHOST_SESSION names); `policy_attach` without a session
/// attaches to it and `session_events_poll` follows it.
#[test]
fn session_current_is_the_hooks_session_of_this_workspace_and_the_default_of_attach() {
    let (s, m, d) = setup("mcp-current");
    // Nothing registered here yet: said, with what to do.
    let mut c = McpClient::for_agent(&s, &m, &d, Some(&s.ws), &[]);
    c.ready();
    let e = c.err("session_current", json!({}));
    assert_eq!(e["code"], "no-current-session", "{e}");
    let e = c.err("policy_attach", json!({"gate": {"command": "true"}}));
    assert_eq!(e["code"], "no-current-session", "{e}");
    // The hook registers the CLI's session (here as the CLI would, with the
    // user's keyring); an older session of the same workspace was heard
    // from earlier, one elsewhere later.
    d.register("claude:older", &s.ws);
    d.report("claude:older", "turn-end");
    let elsewhere = s.out.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    std::thread::sleep(std::time::Duration::from_millis(20));
    d.register("claude:mine", &s.ws);
    d.report("claude:mine", "turn-start");
    let now = c.ok("session_current", json!({}));
    assert_eq!(now["sessionId"], "claude:mine", "{now}");
    assert_eq!(now["how"], "workspace");
    assert_eq!(now["alsoLive"], json!(["claude:older"]), "{now}");
    let p = c.ok("policy_attach", json!({"gate": {"command": "true"}}));
    let pid = p["policyId"].as_str().expect("policy").to_string();
    assert_eq!(d.policy(&pid)["sessions"], json!(["claude:mine"]), "{p}");
    let polled = c.ok("session_events_poll", json!({}));
    assert!(
        polled["events"]
            .as_array()
            .expect("events")
            .iter()
            .all(|e| e["sessionId"] == "claude:mine" || e["policyId"] == json!(pid)),
        "only its own events: {polled}"
    );
    assert_eq!(c.close(), 0);
    // GATEHOST_SESSION names it outright.
    let pinned = [("GATEHOST_SESSION", "claude:older")];
    let mut c = McpClient::for_agent(&s, &m, &d, Some(&elsewhere), &pinned);
    c.ready();
    assert_eq!(
        c.ok("session_current", json!({}))["sessionId"],
        "claude:older"
    );
    finish(c, d, &m);
}

#[test]
fn the_tools_are_exactly_the_ten_and_none_acknowledges() {
    let (s, m, d) = setup("mcp-tools");
    let mut c = McpClient::for_agent(&s, &m, &d, None, &[]);
    assert_eq!(c.ready()["serverInfo"]["name"], "gatehost");
    // The marker reaches all three: the daemon, the client and `gatehost mcp`.
    let alive = marked(&m);
    assert!(
        alive.len() >= 3 && alive.contains(&(d.pid() as i32)),
        "{alive:?}"
    );
    let tools = c.list_tools();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "policy_attach",
            "policy_status",
            "policy_list",
            "session_events_poll",
            "session_monitor",
            "session_current",
            "routine_status",
            "routine_list",
            "routine_start",
            "routine_cancel"
        ]
    );
    // No ack, no policy cancel, no routine resolve: the operator's.
    assert!(
        !names
            .iter()
            .any(|n| n.contains("ack") || n.contains("resolve") || *n == "policy_cancel")
    );
    // The attach schema is the attach body's: its fields, nothing else.
    let attach = &tools[0]["inputSchema"];
    assert_eq!(attach["additionalProperties"], false, "{attach}");
    for field in [
        "sessionId",
        "sessionIds",
        "gate",
        "then",
        "commit",
        "onFail",
        "next",
        "watchFrom",
        "idempotencyKey",
    ] {
        assert!(
            attach["properties"].get(field).is_some(),
            "{field}: {attach}"
        );
    }
    assert!(attach["properties"].get("attachedBy").is_none());
    // Every tool but those that start or cancel something only reads.
    for t in &tools[1..8] {
        assert_eq!(t["annotations"]["readOnlyHint"], true, "{t}");
    }
    for t in &tools[8..] {
        assert_ne!(t["annotations"]["readOnlyHint"], true, "{t}");
    }
    // routine_start's schema is the routine's own type's.
    let start = &tools[8]["inputSchema"];
    assert!(start["properties"].get("steps").is_some(), "{start}");
    assert_eq!(start["additionalProperties"], false, "{start}");
    finish(c, d, &m);
}

#[test]
fn an_attached_policy_gates_at_turn_end_and_its_events_page_without_gaps() {
    let (s, m, d) = setup("mcp-attach");
    d.register("s1", &s.ws);
    let mut c = McpClient::for_agent(&s, &m, &d, None, &[]);
    c.ready();
    let p = c.ok(
        "policy_attach",
        json!({"sessionId": "s1", "gate": {"command": "true"}, "label": "via mcp"}),
    );
    let id = p["policyId"].as_str().expect("policyId").to_string();
    assert_eq!(p["status"], "watching", "{p}");
    assert_eq!(p["spec"]["attachedBy"], "agent", "{p}");
    let monitor = c.ok("session_monitor", json!({"sessionId": "s1"}));
    assert_eq!(monitor["session"]["state"], "running", "{monitor}");
    assert_eq!(monitor["policies"][0]["policyId"], id.as_str(), "{monitor}");
    assert!(
        monitor["policies"][0]["waitingFor"]
            .as_str()
            .is_some_and(|w| w.contains("turn-end")),
        "{monitor}"
    );
    let since = monitor["nextCursor"].as_i64().expect("nextCursor");

    // The agent's turn ends: the gate runs.
    d.report("s1", "turn-end");
    let mut seen = Vec::new();
    let mut cursor = since;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !seen.iter().any(|t| t == "policy:done") {
        assert!(
            Instant::now() < deadline,
            "no policy:done: {seen:?}\n{}",
            d.log()
        );
        let page = c.ok(
            "session_events_poll",
            json!({"since": cursor, "sessionIds": ["s1"], "waitMs": 5000}),
        );
        seen.extend(types(&page["events"]));
        cursor = page["nextCursor"].as_i64().expect("nextCursor");
    }
    let status = c.ok("policy_status", json!({"policyId": id}));
    assert_eq!(status["status"], "done", "{status}");
    assert_eq!(status["verdict"]["outcome"], "pass", "{status}");

    // The policy's events, a page of one at a time, each page continuing
    // from the last one's nextCursor: exactly the daemon's list, in order.
    let mut paged = Vec::new();
    let mut cursor = 0;
    loop {
        let page = c.ok(
            "session_events_poll",
            json!({"since": cursor, "policyIds": [id], "limit": 1}),
        );
        let events = page["events"].as_array().cloned().expect("events");
        if events.is_empty() {
            assert_eq!(page["nextCursor"], cursor, "{page}");
            break;
        }
        assert_eq!(events.len(), 1, "{page}");
        assert!(events[0]["cursor"].as_i64().expect("cursor") > cursor);
        cursor = page["nextCursor"].as_i64().expect("nextCursor");
        assert_eq!(events[0]["cursor"], cursor, "{page}");
        paged.push(events[0]["type"].as_str().expect("type").to_string());
    }
    assert_eq!(paged, d.policy_events(&id));
    for t in [
        "policy:attached",
        "policy:gating",
        "policy:passed",
        "policy:done",
    ] {
        assert!(paged.iter().any(|p| p == t), "{t} missing: {paged:?}");
    }
    let order = |t: &str| paged.iter().position(|p| p == t);
    assert!(order("policy:attached") < order("policy:gating"));
    assert!(order("policy:gating") < order("policy:passed"));

    // The monitor sees it settled, its verdict, and the latest events.
    let monitor = c.ok("session_monitor", json!({"sessionId": "s1", "events": 3}));
    let view = &monitor["policies"][0];
    assert_eq!(view["status"], "done", "{monitor}");
    assert_eq!(view["verdict"]["outcome"], "pass", "{monitor}");
    assert!(view["waitingFor"].is_null(), "{monitor}");
    assert_eq!(monitor["session"]["state"], "idle", "{monitor}");
    let latest = types(&monitor["events"]);
    assert_eq!(latest.len(), 3, "{monitor}");
    assert_eq!(latest.last().map(String::as_str), Some("policy:done"));
    assert!(monitor["nextCursor"].as_i64() >= Some(cursor), "{monitor}");
    let list = c.ok(
        "policy_list",
        json!({"status": ["done"], "order": "newest"}),
    );
    assert_eq!(list["policies"][0]["policyId"], id.as_str(), "{list}");
    assert!(list["nextCursor"].is_null(), "{list}");

    finish(c, d, &m);
}

#[test]
fn the_operator_token_is_refused_and_the_agent_token_found_by_default() {
    let m = marker("mcp-operator");
    let s = Scratch::new();
    // The daemon's data directory is the default one of `gatehost mcp`
    // below (XDG_DATA_HOME/gatehost), so it finds server.url, agent.token
    // and operator.token there.
    let xdg = s.etc.join("xdg");
    let d = daemon(&s, &xdg.join("gatehost"), &m);
    let xdg = xdg.display().to_string();

    // Given the operator token with the daemon's URL and no default data
    // directory to compare with: the daemon's answer refuses it.
    let run = run_gatehost(
        &["mcp".into()],
        &[
            ("GATEHOST_SERVER", &d.url),
            ("GATEHOST_TOKEN", &d.operator),
            (MARKER_VAR, &m),
        ],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stdout.is_empty(),
        "stdout is the MCP channel: {}",
        run.stdout
    );
    assert!(
        run.stderr.contains("is the operator's") && run.stderr.contains("hint:"),
        "{}",
        run.stderr
    );
    // With the default data directory: refused by its operator.token.
    let run = run_gatehost(
        &["mcp".into()],
        &[
            ("XDG_DATA_HOME", &xdg),
            ("GATEHOST_TOKEN", &d.operator),
            (MARKER_VAR, &m),
        ],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("operator.token") && run.stderr.contains("is the operator's"),
        "{}",
        run.stderr
    );
    // A token the daemon does not know is refused too.
    let run = run_gatehost(
        &[
            "mcp".into(),
            "--token".into(),
            "not-a-token-0123456789".into(),
        ],
        &[("GATEHOST_SERVER", &d.url), (MARKER_VAR, &m)],
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("401"), "{}", run.stderr);

    // The MCP client sees the server refuse to start.
    let c = McpClient::start(
        &s.out,
        &m,
        &[("GATEHOST_SERVER", &d.url), ("GATEHOST_TOKEN", &d.operator)],
    );
    assert!(c.first.get("error").is_some(), "{}", c.first);
    assert!(c.log().contains("is the operator's"), "{}", c.log());
    assert_eq!(c.close(), 1);

    // Nothing given: the default data directory's server.url and
    // agent.token, and the session works.
    let mut c = McpClient::start(&s.out, &m, &[("XDG_DATA_HOME", &xdg)]);
    c.ready();
    let page = c.ok("policy_list", json!({"limit": 5}));
    assert_eq!(page["policies"], json!([]), "{page}");
    finish(c, d, &m);
}
