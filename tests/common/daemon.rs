//! A real `gatehost serve` on a loopback port for the daemon tests, with a
//! small HTTP client and the CLI run against it.

use super::CliRun;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

pub struct Daemon {
    child: Option<Child>,
    pub url: String,
    pub data: PathBuf,
    pub config: PathBuf,
    pub agent: String,
    pub operator: String,
    /// Added to the daemon's environment, at every restart too.
    env: Vec<(String, String)>,
    /// The daemon's RLIMIT_NOFILE (soft and hard), at every restart too.
    nofile: Option<u64>,
}

pub fn rt() -> tokio::runtime::Runtime {
    gatehost::webhook::install_tls_provider();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

impl Daemon {
    /// Starts a daemon on `data` with the config file `config`.
    pub fn start(data: &Path, config: &Path) -> Daemon {
        Daemon::start_at(data, config, "127.0.0.1:0")
    }

    /// As `start`, listening on `listen`.
    pub fn start_at(data: &Path, config: &Path, listen: &str) -> Daemon {
        Daemon::start_full(data, config, listen, &[])
    }

    /// As `start`, with `env` added to the daemon's environment.
    pub fn start_with_env(data: &Path, config: &Path, env: &[(&str, &str)]) -> Daemon {
        Daemon::start_full(data, config, "127.0.0.1:0", env)
    }

    /// As `start`, with RLIMIT_NOFILE set to `nofile`, soft and hard (so
    /// that the daemon cannot raise it).
    pub fn start_with_nofile(data: &Path, config: &Path, nofile: u64) -> Daemon {
        Daemon::start_limited(data, config, "127.0.0.1:0", &[], Some(nofile))
    }

    fn start_full(data: &Path, config: &Path, listen: &str, env: &[(&str, &str)]) -> Daemon {
        Daemon::start_limited(data, config, listen, env, None)
    }

    fn start_limited(
        data: &Path,
        config: &Path,
        listen: &str,
        env: &[(&str, &str)],
        nofile: Option<u64>,
    ) -> Daemon {
        // Made here (serve would make it) so that the log below can open.
        let _ = std::fs::create_dir_all(data);
        let mut command = serve_command(data, config, listen);
        if let Some(n) = nofile {
            use std::os::unix::process::CommandExt;
            let limit = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            // SAFETY: setrlimit(2) is async-signal-safe; `limit` is a
            // plain value copied into the closure.
            unsafe {
                command.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let mut child = command
            .env("GATEHOST_LOG", "gatehost=info")
            .envs(env.iter().copied())
            .spawn()
            .expect("spawn gatehost serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if !sent && let Some(url) = line.strip_prefix("gatehost serve: listening on ") {
                    let _ = tx.send(url.to_string());
                    sent = true;
                }
            }
        });
        let stderr = child.stderr.take().expect("stderr");
        let log = data.join("daemon.log");
        let log_writer = std::thread::spawn(move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .ok();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(f) = f.as_mut() {
                    let _ = writeln!(f, "{line}");
                }
            }
        });
        let Ok(url) = rx.recv_timeout(Duration::from_secs(60)) else {
            // Exited by itself, or still hanging after a minute: say which,
            // with everything it wrote (the log writer drains its stderr).
            let exited = child.try_wait().ok().flatten();
            let _ = child.kill();
            let status = child.wait();
            let _ = log_writer.join();
            let log = std::fs::read_to_string(data.join("daemon.log")).unwrap_or_default();
            panic!(
                "the daemon did not start ({}: {status:?}); its log:\n{log}",
                if exited.is_some() {
                    "it exited"
                } else {
                    "it hung for 60 s"
                }
            );
        };
        let read = |f: &str| {
            std::fs::read_to_string(data.join(f))
                .expect("token file")
                .trim()
                .to_string()
        };
        Daemon {
            child: Some(child),
            url,
            data: data.to_path_buf(),
            config: config.to_path_buf(),
            agent: read("agent.token"),
            operator: read("operator.token"),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            nofile,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// SIGKILL, no chance to clean up.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits for the daemon to exit on its own (up to `timeout`); returns
    /// whether it did (a signal's death included).
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            match self.child.as_mut().map(Child::try_wait) {
                None | Some(Ok(Some(_))) => {
                    self.child = None;
                    return true;
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        false
    }

    /// Waits for the daemon to exit on its own (up to `timeout`): its exit
    /// code (`None`: it did not exit, or a signal ended it).
    pub fn wait_exit_code(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let c = self.child.as_mut()?;
            if let Ok(Some(st)) = c.try_wait() {
                self.child = None;
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Sends `signal` (SIGSTOP, SIGCONT) to the daemon.
    pub fn signal(&self, signal: i32) {
        if let Some(c) = &self.child {
            // SAFETY: kill(2) on our own child, which has not been reaped.
            unsafe { libc::kill(c.id() as i32, signal) };
        }
    }

    /// SIGTERM and wait for a clean exit; returns the exit code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(st)) = c.try_wait() {
                return st.code();
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                panic!("the daemon did not stop on SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, then a new daemon on the same data and the same port.
    pub fn restart(&mut self) {
        self.kill9();
        let listen = self.url.trim_start_matches("http://").to_string();
        let env = std::mem::take(&mut self.env);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let d = Daemon::start_limited(&self.data, &self.config, &listen, &env, self.nofile);
        *self = d;
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data.join("daemon.log")).unwrap_or_default()
    }

    /// One HTTP call; returns the status and the JSON body.
    pub fn http(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.http_raw(method, path, token, json_bytes(body))
    }

    /// `POST path` with `token` and `body`; the status and the JSON body.
    pub fn post(&self, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
        self.http("POST", path, Some(token), body)
    }

    /// `GET path` with `token`; the status and the JSON body.
    pub fn get(&self, path: &str, token: &str) -> (u16, Value) {
        self.http("GET", path, Some(token), None)
    }

    pub fn http_raw(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> (u16, Value) {
        self.http_opt(method, path, token, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// As `http`, but `None` when the daemon cannot be reached.
    pub fn http_try(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Option<(u16, Value)> {
        self.http_opt(method, path, token, json_bytes(body)).ok()
    }

    /// As `http`, presenting no session key whatever the call (to test
    /// that a call about a session without its key is refused).
    pub fn http_keyless(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.http_send(method, path, token, json_bytes(body), false)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    fn http_opt(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Value), String> {
        self.http_send(method, path, token, body, true)
    }

    /// One call. With `keys`, as the typed client does: the keys kept for
    /// the sessions it is about are presented, and a key it is answered
    /// is kept.
    fn http_send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
        keys: bool,
    ) -> Result<(u16, Value), String> {
        let client = self.client();
        let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let json_body = body
            .as_deref()
            .and_then(|b| serde_json::from_slice::<Value>(b).ok());
        let presented = if keys {
            self.keys_for(method, path, json_body.as_ref())
        } else {
            Vec::new()
        };
        let (status, bytes) = rt()
            .block_on(client.send_with_keys(m, path, token, body, &presented))
            .map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        if keys
            && (200..300).contains(&status)
            && let (Some(id), Some(key)) = (v["id"].as_str(), v["sessionKey"].as_str())
        {
            self.keyring().put(id, key).expect("keep the key");
        }
        Ok((status, v))
    }

    /// The keys kept for the sessions a call names.
    fn keys_for(&self, method: &str, path: &str, body: Option<&Value>) -> Vec<String> {
        let mut ids = Vec::new();
        if let Some(rest) = path.strip_prefix("/v1/sessions/")
            && let Some(id) = rest.split('/').next()
        {
            ids.push(
                percent_encoding::percent_decode_str(id)
                    .decode_utf8_lossy()
                    .into_owned(),
            );
        }
        if let Some(b) = body {
            // As the typed client finds them (register's `id` too).
            gatehost::client::named_sessions(b, &mut ids);
            ids.extend(b["id"].as_str().map(str::to_string));
        }
        let ring = self.keyring();
        let mut keys: Vec<String> = ids.iter().flat_map(|id| ring.get(id)).collect();
        if method == "GET" {
            // As the typed client's reads: the keys kept most recently too.
            keys.extend(ring.recent(gatehost::client::READ_KEYS));
            keys.truncate(gatehost::client::READ_KEYS);
        }
        keys
    }

    /// Where this daemon's session keys are kept, for the typed client and
    /// the CLI runs alike (beside the data directory).
    pub fn keyring(&self) -> gatehost::keyring::Keyring {
        gatehost::keyring::Keyring::at(self.data.with_extension("keys"))
    }

    /// The key kept for session `id`.
    pub fn key(&self, id: &str) -> String {
        self.keyring()
            .get(id)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no key kept for session {id}"))
    }

    /// The typed client with the operator token: how the tests observe
    /// (events, policies) whatever session they are about.
    pub fn observer(&self) -> gatehost::client::Client {
        self.client().with_token(self.operator.clone())
    }

    /// The library's typed API client, with the agent token.
    pub fn client(&self) -> gatehost::client::Client {
        gatehost::client::Client::new(&self.url, self.agent.clone())
            .expect("client")
            .with_keyring(Some(self.keyring()))
    }

    /// Runs one call of the typed client to its end.
    pub fn block<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        rt().block_on(f)
    }

    /// As the agent; panics unless 2xx.
    pub fn agent_ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (s, v) = self.http(method, path, Some(&self.agent), body);
        assert!((200..300).contains(&s), "{method} {path}: HTTP {s}: {v}");
        v
    }

    /// As the operator (how a test observes what it does not test the
    /// agent's reach of); panics unless 2xx.
    pub fn operator_ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (s, v) = self.http(method, path, Some(&self.operator), body);
        assert!((200..300).contains(&s), "{method} {path}: HTTP {s}: {v}");
        v
    }

    /// The fastest of three health checks (a client and its connection are
    /// made per call), each asserted to answer `ok`.
    pub fn fastest_health(&self) -> Duration {
        (0..3)
            .map(|_| {
                let started = Instant::now();
                assert_eq!(self.agent_ok("GET", "/v1/health", None)["ok"], true);
                started.elapsed()
            })
            .min()
            .expect("three")
    }

    /// Registers a session through the typed client; its JSON.
    pub fn register(&self, id: &str, cwd: &Path) -> Value {
        let input = gatehost::wire::RegisterRequest {
            id: Some(id.to_string()),
            cwd: cwd.display().to_string(),
            ..Default::default()
        };
        let client = self.client();
        match self.block(client.register(&input)) {
            Ok(s) => serde_json::to_value(s).expect("session json"),
            Err(e) => panic!("register {id}: {e}"),
        }
    }

    /// Reports `kind` ("turn-end", …) through the typed client.
    pub fn report(&self, id: &str, kind: &str) -> Value {
        let request = gatehost::wire::ReportRequest {
            kind: serde_json::from_value(json!(kind)).expect("a report kind"),
            message: Some(format!("{kind} from {id}")),
        };
        let client = self.client();
        match self.block(client.report(id, &request)) {
            Ok(r) => serde_json::to_value(r).expect("report json"),
            Err(e) => panic!("report {id} {kind}: {e}"),
        }
    }

    pub fn attach(&self, spec: Value) -> String {
        let client = self.client();
        match self.block(client.attach(&spec)) {
            Ok(p) => p.policy_id,
            Err(e) => panic!("attach {spec}: {e}"),
        }
    }

    /// Writes `a.txt` into `ws`, attaches a policy of session `s1` that
    /// commits it (with `message`) once the human acks, and ends the turn:
    /// the policy awaits the ack (within `timeout`). Its id.
    pub fn commit_awaiting_ack(&self, ws: &Path, message: &str, timeout: Duration) -> String {
        std::fs::write(ws.join("a.txt"), "a\n").expect("write a.txt");
        let commit = json!({"paths": ["a.txt"], "message": message, "requireHumanAck": true});
        let id = self.attach(json!({
            "sessionId": "s1", "gate": {"command": "true"}, "then": "commit", "commit": commit
        }));
        self.report("s1", "turn-end");
        self.wait_status(&id, "awaiting-ack", timeout);
        id
    }

    /// Attaches `spec` with the operator token (a policy of the
    /// operator's); its id. Panics unless 201.
    pub fn attach_operator(&self, spec: Value) -> String {
        let (code, body) = self.http("POST", "/v1/policies", Some(&self.operator), Some(spec));
        assert_eq!(code, 201, "{body}");
        body["policyId"].as_str().expect("policy id").to_string()
    }

    /// The policy through the typed client (so every policy a test reads
    /// also proves the API's answer decodes as `wire::Policy`); its JSON.
    pub fn policy(&self, id: &str) -> Value {
        let client = self.observer();
        match self.block(client.policy(id)) {
            Ok(p) => serde_json::to_value(p).expect("policy json"),
            Err(e) => panic!("policy {id}: {e}"),
        }
    }

    /// Waits (long-polls) until the policy's status is `want`.
    pub fn wait_status(&self, id: &str, want: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        let mut since = 0;
        loop {
            let p = self.policy(id);
            if p["status"] == want {
                return p;
            }
            if Instant::now() > deadline {
                panic!(
                    "policy {id} is {} after {timeout:?}, expected {want}: {p}\nlog:\n{}",
                    p["status"],
                    self.log()
                );
            }
            let (code, v) = self.http(
                "GET",
                &format!("/v1/events?since={since}&policy={id}&wait=2s&limit=1000"),
                Some(&self.operator),
                None,
            );
            assert_eq!(code, 200, "{v}");
            since = v["nextCursor"].as_i64().unwrap_or(since);
        }
    }

    /// As [`Daemon::wait_status`], and asserts the policy's gate ran `runs`
    /// times; the policy.
    pub fn wait_runs(&self, id: &str, want: &str, runs: u64, timeout: Duration) -> Value {
        let p = self.wait_status(id, want, timeout);
        assert_eq!(p["gateRuns"], runs, "{p}");
        p
    }

    /// Polls the policy until `settled` holds of it (at most `timeout`);
    /// the policy.
    pub fn wait_policy(
        &self,
        id: &str,
        timeout: Duration,
        settled: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let p = self.policy(id);
            if settled(&p) {
                return p;
            }
            assert!(Instant::now() < deadline, "policy {id} never settled: {p}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (at most `timeout`) until the daemon's log holds `needle`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.log().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "{needle:?} never logged:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Every event (all pages).
    pub fn all_events(&self, query: &str) -> Vec<Value> {
        let mut since = 0;
        let mut out = Vec::new();
        // `query` is `&policy=…`-style extra filters, as the API takes them.
        let extra: std::collections::HashMap<String, String> =
            serde_urlencoded::from_str(query.trim_start_matches('&')).expect("query");
        let client = self.observer();
        loop {
            let q = gatehost::wire::EventQuery {
                host: extra.get("host").cloned(),
                since: Some(since),
                limit: Some(1000),
                types: extra.get("types").cloned(),
                session: extra.get("session").cloned(),
                policy: extra.get("policy").cloned(),
                wait: None,
            };
            let page = match self.block(client.events(&q)) {
                Ok(p) => p,
                Err(e) => panic!("events {query}: {e}"),
            };
            if page.events.is_empty() {
                return out;
            }
            since = page.next_cursor;
            out.extend(
                page.events
                    .iter()
                    .map(|e| serde_json::to_value(e).expect("event")),
            );
        }
    }

    /// Event types of one policy, in order.
    pub fn policy_events(&self, id: &str) -> Vec<String> {
        self.all_events(&format!("&policy={id}"))
            .iter()
            .map(|e| e["type"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// As [`Daemon::cli`], and asserts that the CLI exited 0.
    #[track_caller]
    pub fn cli_ok(&self, args: &[&str], token: &str) -> CliRun {
        let run = self.cli(args, token);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        run
    }

    /// `session register --id ID --cwd CWD` with `token`; asserts it
    /// exited 0.
    pub fn register_cli(&self, id: &str, cwd: &Path, token: &str) -> CliRun {
        let cwd = super::arg(cwd);
        self.cli_ok(&["session", "register", "--id", id, "--cwd", &cwd], token)
    }

    /// The messages of the nudges policy `id` sent, in order.
    pub fn nudge_messages(&self, id: &str) -> Vec<String> {
        let nudges = self.all_events(&format!("&policy={id}&types=nudge"));
        let message = |n: &Value| n["payload"]["message"].as_str().map(str::to_string);
        nudges
            .iter()
            .map(|n| message(n).expect("message"))
            .collect()
    }

    /// The message of the one nudge policy `id` sent (asserted to be one).
    pub fn only_nudge(&self, id: &str) -> String {
        let mut nudges = self.nudge_messages(id);
        assert_eq!(nudges.len(), 1, "{nudges:?}");
        nudges.remove(0)
    }

    /// `session start --id ID --cwd CWD ARGS…` as the operator (ARGS: the
    /// start's options, then `--` and the command); asserts it exited 0.
    pub fn start_session(&self, id: &str, cwd: &Path, args: &[&str]) -> CliRun {
        let cwd = super::arg(cwd);
        let start = ["session", "start", "--id", id, "--cwd", &cwd];
        self.cli_ok(&[&start[..], args].concat(), &self.operator)
    }

    /// Runs the CLI against this daemon with `token`.
    pub fn cli(&self, args: &[&str], token: &str) -> CliRun {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let keys = self.keyring().dir().display().to_string();
        super::run_gatehost(
            &args,
            &[
                ("GATEHOST_SERVER", &self.url),
                ("GATEHOST_TOKEN", token),
                ("GATEHOST_SESSION_KEYS", &keys),
            ],
        )
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A request body as bytes.
fn json_bytes(body: Option<Value>) -> Option<Vec<u8>> {
    body.map(|b| b.to_string().into_bytes())
}

pub use super::daemon_git::*;
pub use super::daemon_setup::*;
