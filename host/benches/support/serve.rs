//! A real `gatehost serve` for the benches: started on a data directory
//! and a configuration, its URL and agent token read back, and called
//! through the library's typed client. It measures nothing itself.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) struct Daemon {
    pub child: Child,
    pub url: String,
    pub agent: String,
    pub operator: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A configuration allowing `true` for workspaces under `roots`, on the
/// PostgreSQL database `db` when given (its password in a file beside it,
/// `store` appended to its `[store]` section): written as `dir/name.toml`.
pub(crate) fn config(
    dir: &Path,
    name: &str,
    roots: &Path,
    db: Option<&gatehost::store::pg_testdb::TestDb>,
    store: &str,
) -> std::path::PathBuf {
    let mut text = format!(
        "[shell]\nallow = [\"true\"]\n[daemon]\nworkspace_roots = [{:?}]\n",
        roots.display().to_string()
    );
    if let Some(db) = db {
        let opts = db.options();
        let pw = dir.join(format!("{name}.password"));
        std::fs::write(&pw, opts.password.clone().unwrap_or_default()).expect("password");
        text.push_str(&format!(
            "[store]\nurl = \"{}\"\npassword_file = \"{}\"\n{store}",
            opts.url,
            pw.display()
        ));
    }
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).expect("config");
    path
}

pub(crate) fn start(data: &Path, config: &Path, listen: &str) -> (Daemon, Duration) {
    start_program(
        Path::new(env!("CARGO_BIN_EXE_gatehost")),
        data,
        config,
        listen,
    )
}

/// [`start`] with another `gatehost` binary (`program`): until it says
/// where it listens.
pub(crate) fn start_program(
    program: &Path,
    data: &Path,
    config: &Path,
    listen: &str,
) -> (Daemon, Duration) {
    start_program_env(program, data, config, listen, &[])
}

/// [`start`] with `env` added to the daemon's environment.
pub(crate) fn start_env(
    data: &Path,
    config: &Path,
    listen: &str,
    env: &[(&str, &str)],
) -> (Daemon, Duration) {
    start_program_env(
        Path::new(env!("CARGO_BIN_EXE_gatehost")),
        data,
        config,
        listen,
        env,
    )
}

fn start_program_env(
    program: &Path,
    data: &Path,
    config: &Path,
    listen: &str,
    env: &[(&str, &str)],
) -> (Daemon, Duration) {
    let t0 = Instant::now();
    let mut child = Command::new(program)
        .envs(env.iter().copied())
        .args(["serve", "--listen", listen, "--data-dir"])
        .arg(data)
        .arg("--config")
        .arg(config)
        .stdout(Stdio::piped())
        // Its log, when asked for (`GATEHOST_LOG=gatehost=debug` prints
        // each step's phases).
        .stderr(if std::env::var_os("GATEHOST_LOG").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()
        .expect("spawn serve");
    let out = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(out).lines();
    let url = loop {
        let line = lines.next().expect("serve output").expect("line");
        if let Some(u) = line.strip_prefix("gatehost serve: listening on ") {
            break u.to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let agent = std::fs::read_to_string(data.join("agent.token"))
        .expect("token")
        .trim()
        .to_string();
    let operator = std::fs::read_to_string(data.join("operator.token"))
        .expect("token")
        .trim()
        .to_string();
    (
        Daemon {
            child,
            url,
            agent,
            operator,
        },
        t0.elapsed(),
    )
}

/// Calls through the library's typed client (`gatehost::client`), one per
/// daemon URL so that its connections are reused as a real client's are.
pub(crate) struct Http {
    rt: tokio::runtime::Runtime,
    clients: std::cell::RefCell<std::collections::HashMap<String, gatehost::client::Client>>,
}

impl Default for Http {
    fn default() -> Self {
        Http::new()
    }
}

impl Http {
    pub(crate) fn new() -> Self {
        gatehost::webhook::install_tls_provider();
        Http {
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("rt"),
            clients: Default::default(),
        }
    }

    /// A call with the operator token (a bench acts for the operator and
    /// for its agents' sessions alike; the agent token would need each
    /// session's key).
    pub(crate) fn call(
        &self,
        d: &Daemon,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Value {
        self.call_as(d, &d.operator, method, path, body)
    }

    /// A call with `token` (the agent's or the operator's).
    pub(crate) fn call_as(
        &self,
        d: &Daemon,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Value {
        let client = self
            .clients
            .borrow_mut()
            .entry(format!("{} {token}", d.url))
            .or_insert_with(|| {
                gatehost::client::Client::new(&d.url, token.to_string()).expect("client")
            })
            .clone();
        self.rt
            .block_on(client.call::<Value>(method, path, body.as_ref()))
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    }
}
