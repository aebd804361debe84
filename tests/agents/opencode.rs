//! The real OpenCode (opencode-ai, pinned 1.18.33, tests/support/agent-clis) gated
//! by gatehost's plugin and `gatehost hook opencode`, against the fake model
//! API on loopback (tests/support/fake-model-api/openai_chat.py, as an
//! `@ai-sdk/openai-compatible` provider in OpenCode's own config).
//!
//! OpenCode has no stop hook: `gatehost hook install opencode` writes the
//! plugin (host/assets/opencode/gatehost.js) into a private
//! `$XDG_CONFIG_HOME/opencode/plugin/`, and the test drives `opencode serve`
//! over its HTTP API (plain `opencode run` exits when the session is idle,
//! so there an agent cannot be sent back: docs/compatibility.md). A
//! refused stop is the next model request's last user message.

use crate::common::agents::{DONE_GATES, FakeApi, agent_cli, chat_last_user_text};
use crate::common::{Scratch, assert_no_survivors, marker};
use serde_json::{Value, json};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ROUTE: &str = "/v1/chat/completions";
const T: Duration = Duration::from_secs(120);
const PASSWORD: &str = "gatehost-test-password";

/// `opencode serve` on a free loopback port, killed (with its process
/// group) when dropped.
struct Serve {
    child: Child,
    url: String,
    stderr: PathBuf,
    rt: tokio::runtime::Runtime,
    client: reqwest::Client,
}

impl Drop for Serve {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group of our own child.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The private directories OpenCode reads and writes.
struct Dirs {
    home: PathBuf,
    config: PathBuf,
    data: PathBuf,
    cache: PathBuf,
    state: PathBuf,
}

impl Dirs {
    fn under(root: &Path) -> Dirs {
        let d = Dirs {
            home: root.join("home"),
            config: root.join("xdg/config"),
            data: root.join("xdg/data"),
            cache: root.join("xdg/cache"),
            state: root.join("xdg/state"),
        };
        for p in [&d.home, &d.config, &d.data, &d.cache, &d.state] {
            std::fs::create_dir_all(p).expect("mkdir");
        }
        d
    }

    fn env(&self, cmd: &mut Command) {
        cmd.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.config)
            .env("XDG_DATA_HOME", &self.data)
            .env("XDG_CACHE_HOME", &self.cache)
            .env("XDG_STATE_HOME", &self.state)
            .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1");
    }
}

impl Serve {
    fn start(dirs: &Dirs, api: &FakeApi, cwd: &Path, log_dir: &Path) -> Serve {
        std::fs::write(
            dirs.config.join("opencode/opencode.json"),
            json!({"autoupdate": false, "share": "disabled", "model": "fake/fake-model",
                "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                    "options": {"baseURL": format!("{}/v1", api.url()), "apiKey": "sk-fake"},
                    "models": {"fake-model": {"name": "Fake Model"}}}}})
            .to_string(),
        )
        .expect("opencode.json");
        gatehost::webhook::install_tls_provider();
        let port = free_port();
        let stdout = log_dir.join("serve.out");
        let stderr = log_dir.join("serve.err");
        let mut cmd = Command::new(agent_cli("opencode"));
        dirs.env(&mut cmd);
        let child = cmd
            .args([
                "serve",
                "--hostname",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .env("OPENCODE_SERVER_PASSWORD", PASSWORD)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).expect("serve.out"))
            .stderr(std::fs::File::create(&stderr).expect("serve.err"))
            .process_group(0)
            .spawn()
            .expect("opencode serve runs");
        let serve = Serve {
            child,
            url: format!("http://127.0.0.1:{port}"),
            stderr,
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime"),
            client: reqwest::Client::new(),
        };
        let started = Instant::now();
        while !std::fs::read_to_string(&stdout).is_ok_and(|t| t.contains("listening")) {
            assert!(
                started.elapsed() < T,
                "opencode serve did not start; stderr:\n{}",
                serve.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        serve
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.url);
        let mut req = self
            .client
            .request(method, &url)
            .basic_auth("opencode", Some(PASSWORD))
            .timeout(T);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let (status, text) = self
            .rt
            .block_on(async {
                let resp = req.send().await?;
                let status = resp.status();
                Ok::<_, reqwest::Error>((status, resp.text().await?))
            })
            .unwrap_or_else(|e| panic!("{url}: {e}; stderr:\n{}", self.stderr()));
        assert!(status.is_success(), "{url}: {status}: {text}");
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    }

    /// A new session in `dir`, prompted once (the call returns when the
    /// first turn has ended).
    fn prompt_new(&self, dir: &Path, text: &str) -> String {
        let q = format!("?directory={}", dir.display());
        let s = self.call(
            reqwest::Method::POST,
            &format!("/session{q}"),
            Some(json!({"title": "gatehost-test"})),
        );
        let id = s["id"].as_str().expect("a session id").to_string();
        self.call(
            reqwest::Method::POST,
            &format!("/session/{id}/message{q}"),
            Some(json!({"parts": [{"type": "text", "text": text}]})),
        );
        id
    }
}

/// `gatehost hook status opencode:ID --json`, once it has `stops` stops.
fn status_after(state: &Path, id: &str, stops: u64, serve: &Serve) -> Value {
    let started = Instant::now();
    loop {
        let out = Command::new(env!("CARGO_BIN_EXE_gatehost"))
            .args([
                "hook",
                "status",
                &format!("opencode:{id}"),
                "--json",
                "--state-dir",
            ])
            .arg(state)
            .output()
            .expect("gatehost hook status");
        if let Ok(v) = serde_json::from_slice::<Value>(&out.stdout)
            && v["stops"].as_u64() >= Some(stops)
        {
            return v;
        }
        assert!(
            started.elapsed() < T,
            "no {stops} stops of opencode:{id} on record; serve's stderr:\n{}",
            serve.stderr()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn git_init(dir: &Path) {
    let ok = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .status()
        .expect("git");
    assert!(ok.success());
}

#[test]
fn a_failing_gate_sends_opencode_back_a_fix_passes_and_a_never_fixed_one_stops_after_max_retries() {
    let s = Scratch::new();
    let never = Scratch::new();
    let m = marker("opencode");
    git_init(&s.ws);
    git_init(&never.ws);
    let release = s.out.join("release");
    // Session A: ends its turn, is sent back (held until the test fixed
    // the workspace), ends again. Session B: ends its turn twice, never fixed.
    let api = FakeApi::start_script(
        &s.out,
        &json!([
            {"text": "I am done."},
            {"text": "Fixed it, done now.", "hold_until": release.display().to_string()},
            {"text": "Done with B."},
            {"text": "Still done with B."},
            {"text": "UNEXPECTED third call of B"}
        ]),
    );
    let dirs = Dirs::under(&s.out);
    let gates = s.write("gates.json", DONE_GATES);
    let config = s.write("config.toml", "[shell]\nallow = [\"test\"]\n");
    let state = s.out.join(format!("state-gatehost-test-{m}"));
    let mut install = Command::new(env!("CARGO_BIN_EXE_gatehost"));
    dirs.env(&mut install);
    let out = install
        .args(["hook", "install", "opencode", "--gates"])
        .arg(&gates)
        .arg("--config")
        .arg(&config)
        .args(["--max-retries", "1", "--state-dir"])
        .arg(&state)
        .output()
        .expect("gatehost hook install opencode");
    assert!(out.status.success(), "{out:?}");
    let plugin = dirs.config.join("opencode/plugin/gatehost.js");
    let text = std::fs::read_to_string(&plugin).expect("the plugin is installed");
    assert!(
        text.contains(env!("CARGO_BIN_EXE_gatehost")),
        "its command is written"
    );

    let serve = Serve::start(&dirs, &api, &s.ws, &s.out);

    // A: the first stop is refused; the reason is the next request's
    // last user message.
    let a = serve.prompt_new(&s.ws, "Create the file DONE, then say so.");
    let calls = api.wait_for_calls(ROUTE, 2, T);
    let nudge = chat_last_user_text(&calls[1]);
    assert!(
        nudge.contains("DONE exists"),
        "the reason reached the model: {nudge}"
    );
    s.write_ws("DONE", "done\n");
    std::fs::write(&release, "").expect("release the second answer");
    let st = status_after(&state, &a, 2, &serve);
    assert_eq!(st["outcome"], "passed", "{st}");
    assert_eq!(st["sentBack"].as_u64(), Some(1), "{st}");

    // B: never fixed: refused once (--max-retries 1), then let through
    // with the message, which the plugin shows on the server's stderr.
    let b = serve.prompt_new(&never.ws, "Create the file DONE, then say so.");
    let st = status_after(&state, &b, 2, &serve);
    assert_eq!(st["outcome"], "let-through", "{st}");
    assert_eq!(st["why"], "out-of-retries", "{st}");
    let calls = api.wait_for_calls(ROUTE, 4, T);
    assert!(chat_last_user_text(&calls[3]).contains("DONE exists"));
    let started = Instant::now();
    while !serve.stderr().contains("out of retries") {
        assert!(
            started.elapsed() < T,
            "the let-through message is not shown; stderr:\n{}",
            serve.stderr()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(api.model_calls(ROUTE).len(), 4, "B was not sent back again");
    drop(serve);
    assert_no_survivors(&m);
}
