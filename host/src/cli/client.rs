//! The client commands: `session`, `policy`, `events`, `wait`. Each is one
//! or more calls to the daemon's API, printed for a person or, with
//! `--json`, as the API's JSON. The daemon is found through `--server` or
//! `GATEHOST_SERVER`, else the `server.url` a daemon wrote in the default
//! data directory; the token through `--token` or `GATEHOST_TOKEN`.
//!
//! Exit codes: 0 done, 2 error (the daemon refused, or cannot be reached);
//! `wait` adds 1 for a policy that was blocked or cancelled.

use super::serve::{SERVER_URL_FILE, default_data_dir};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use super::client_args::*;

struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
    json: bool,
}

#[derive(Debug)]
enum CallError {
    /// The daemon answered with an error.
    Api {
        status: u16,
        code: String,
        message: String,
    },
    /// The daemon could not be reached or answered garbage.
    Transport(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Api {
                status,
                code,
                message,
            } => write!(f, "{message} (HTTP {status}, {code})"),
            CallError::Transport(m) => f.write_str(m),
        }
    }
}

fn find_server(args: &ClientArgs) -> Result<String, String> {
    if let Some(s) = &args.server {
        return Ok(s.trim_end_matches('/').to_string());
    }
    if let Some(dir) = default_data_dir()
        && let Ok(text) = std::fs::read_to_string(dir.join(SERVER_URL_FILE))
    {
        return Ok(text.trim().trim_end_matches('/').to_string());
    }
    Err(
        "no daemon: pass --server URL or set GATEHOST_SERVER (gatehost serve prints its URL)"
            .into(),
    )
}

impl Client {
    fn new(args: &ClientArgs) -> Result<Client, String> {
        let base = find_server(args)?;
        let token = args.token.clone().ok_or(
            "no token: pass --token or set GATEHOST_TOKEN (the daemon keeps agent.token and operator.token in its data directory)",
        )?;
        let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(90));
        let base = match base.strip_prefix("unix:") {
            Some(path) => {
                builder = builder.unix_socket(PathBuf::from(path));
                "http://localhost".to_string()
            }
            None => base,
        };
        let http = builder
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Client {
            http,
            base,
            token,
            json: args.json,
        })
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, CallError> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.map_err(|e| {
            CallError::Transport(format!("cannot reach the daemon at {}: {e}", self.base))
        })?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| CallError::Transport(format!("cannot read the daemon's answer: {e}")))?;
        let value: Value = serde_json::from_str(&text).map_err(|_| {
            CallError::Transport(format!(
                "the daemon answered HTTP {status} with non-JSON: {}",
                text.chars().take(200).collect::<String>()
            ))
        })?;
        if status.is_success() {
            Ok(value)
        } else {
            let err = &value["error"];
            Err(CallError::Api {
                status: status.as_u16(),
                code: err["code"].as_str().unwrap_or("error").to_string(),
                message: err["message"]
                    .as_str()
                    .unwrap_or("unknown error")
                    .to_string(),
            })
        }
    }

    fn print(&self, v: &Value, human: impl FnOnce(&Value) -> String) {
        if self.json {
            println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
        } else {
            println!("{}", human(v));
        }
    }
}

/// Lists `key` from `base` (a path ending in `?` or `&`) a page at a time:
/// one page, its `nextCursor` said on stderr, or with `--all` every page
/// (with --json: one array of all the items).
async fn list_pages(
    client: &Client,
    base: &str,
    key: &str,
    page: &PageArgs,
    line: impl Fn(&Value) -> String,
) -> Result<(), CallError> {
    let limit = page.limit.unwrap_or(50);
    let mut cursor = page.cursor.unwrap_or(0);
    let mut items = Vec::new();
    loop {
        let v = client
            .call(
                reqwest::Method::GET,
                &format!("{base}limit={limit}&cursor={cursor}"),
                None,
            )
            .await?;
        if let Some(list) = v[key].as_array() {
            items.extend(list.iter().cloned());
        }
        match v["nextCursor"].as_i64() {
            Some(next) if page.all => cursor = next,
            Some(next) => {
                eprintln!("more: --cursor {next}");
                break;
            }
            None => break,
        }
    }
    let all = json!({ key: items });
    client.print(&all, |v| {
        v[key]
            .as_array()
            .map(|l| l.iter().map(&line).collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    });
    Ok(())
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// Builds the client and a runtime, then runs `body` to its exit code.
fn run_client<F, Fut>(args: &ClientArgs, body: F) -> i32
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = i32>,
{
    let client = match Client::new(args) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    match runtime() {
        Ok(rt) => rt.block_on(body(client)),
        Err(e) => fail(e),
    }
}

fn fail(e: impl std::fmt::Display) -> i32 {
    eprintln!("gatehost: error: {e}");
    2
}

fn absolute(p: &std::path::Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~:".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn policy_line(p: &Value) -> String {
    let mut line = format!(
        "{}  {}",
        p["id"].as_str().unwrap_or("?"),
        p["status"].as_str().unwrap_or("?")
    );
    if let Some(pending) = p["pending"].as_array()
        && !pending.is_empty()
        && p["status"] == "watching"
    {
        let names: Vec<&str> = pending.iter().filter_map(Value::as_str).collect();
        line.push_str(&format!(" (waiting for {})", names.join(", ")));
    }
    if let Some(r) = p["reason"].as_str() {
        line.push_str(&format!(": {r}"));
    }
    if let Some(changed) = p["plan"]["changedAfterSnapshot"].as_array()
        && !changed.is_empty()
    {
        let names: Vec<&str> = changed.iter().filter_map(Value::as_str).collect();
        line.push_str(&format!(
            "\n  changed since the gate's snapshot (not in the commit): {}",
            names.join(", ")
        ));
    }
    line
}

/// One readable line for an event.
pub fn event_line(e: &Value) -> String {
    let p = &e["payload"];
    let mut line = format!("#{} {}", e["cursor"], e["type"].as_str().unwrap_or("?"));
    if let Some(pid) = e["policyId"].as_str() {
        line.push_str(&format!(" {pid}"));
    } else if let Some(sid) = e["sessionId"].as_str() {
        line.push_str(&format!(" {sid}"));
    }
    for key in ["outcome", "reason", "sha", "message", "by"] {
        if let Some(v) = p[key].as_str() {
            let v: String = v.chars().take(160).collect::<String>().replace('\n', " ");
            line.push_str(&format!(" {key}={v:?}"));
        }
    }
    line
}

pub fn session(cmd: SessionCommand, args: ClientArgs) -> i32 {
    run_client(&args, |client| async move {
        let result = match cmd {
            SessionCommand::Register {
                id,
                cwd,
                label,
                workspace,
                notify_url,
            } => {
                let body = json!({"id": id, "cwd": absolute(&cwd), "label": label,
                    "workspace": workspace.as_deref().map(absolute), "notifyUrl": notify_url});
                client
                    .call(reqwest::Method::POST, "/v1/sessions", Some(body))
                    .await
                    .map(|v| {
                        client.print(&v, |v| v["id"].as_str().unwrap_or("").to_string());
                    })
            }
            SessionCommand::Report { id, kind, message } => client
                .call(
                    reqwest::Method::POST,
                    &format!("/v1/sessions/{}/report", enc(&id)),
                    Some(json!({"kind": kind, "message": message})),
                )
                .await
                .map(|v| {
                    client.print(&v, |v| match v["cursor"].as_i64() {
                        Some(c) => format!("{id}: {kind} recorded (event #{c})"),
                        None => format!("{id}: {kind} recorded"),
                    })
                }),
            SessionCommand::Start {
                id,
                cwd,
                label,
                turn_end_pattern,
                quiet_ms,
                command,
            } => {
                let body = json!({"id": id, "cwd": absolute(&cwd), "label": label, "command": command,
                    "turnEndPattern": turn_end_pattern, "quietMs": quiet_ms});
                client
                    .call(reqwest::Method::POST, "/v1/sessions/start", Some(body))
                    .await
                    .map(|v| {
                        client.print(&v, |v| v["id"].as_str().unwrap_or("").to_string());
                    })
            }
            SessionCommand::List { page } => {
                list_pages(&client, "/v1/sessions?", "sessions", &page, |s| {
                    format!(
                        "{}  {}  {}",
                        s["id"].as_str().unwrap_or("?"),
                        s["state"].as_str().unwrap_or("?"),
                        s["cwd"].as_str().unwrap_or("?")
                    )
                })
                .await
            }
            SessionCommand::Show { id } => client
                .call(
                    reqwest::Method::GET,
                    &format!("/v1/sessions/{}", enc(&id)),
                    None,
                )
                .await
                .map(|v| client.print(&v, |v| serde_json::to_string_pretty(v).unwrap_or_default())),
        };
        match result {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

pub fn policy(cmd: PolicyCommand, args: ClientArgs) -> i32 {
    run_client(&args, |client| async move {
        let result = match cmd {
            PolicyCommand::Attach {
                file,
                idempotency_key,
            } => {
                let text = if file.as_os_str() == "-" {
                    let mut s = String::new();
                    match std::io::Read::read_to_string(&mut std::io::stdin(), &mut s) {
                        Ok(_) => s,
                        Err(e) => return fail(format!("cannot read stdin: {e}")),
                    }
                } else {
                    match std::fs::read_to_string(&file) {
                        Ok(s) => s,
                        Err(e) => return fail(format!("{}: {e}", file.display())),
                    }
                };
                let mut body: Value = match serde_json::from_str(&text) {
                    Ok(v) => v,
                    Err(e) => return fail(format!("{}: not valid JSON: {e}", file.display())),
                };
                if let (Some(k), Some(m)) = (idempotency_key, body.as_object_mut()) {
                    m.insert("idempotencyKey".into(), Value::String(k));
                }
                client
                    .call(reqwest::Method::POST, "/v1/policies", Some(body))
                    .await
                    .map(|v| client.print(&v, |v| v["policyId"].as_str().unwrap_or("").to_string()))
            }
            PolicyCommand::Status { id } => client
                .call(
                    reqwest::Method::GET,
                    &format!("/v1/policies/{}", enc(&id)),
                    None,
                )
                .await
                .map(|v| client.print(&v, policy_line)),
            PolicyCommand::List {
                status,
                newest,
                page,
            } => {
                let mut base = String::from("/v1/policies?");
                if let Some(s) = status {
                    base.push_str(&format!("status={}&", enc(&s)));
                }
                if newest {
                    base.push_str("order=newest&");
                }
                list_pages(&client, &base, "policies", &page, policy_line).await
            }
            PolicyCommand::Cancel { id } => client
                .call(
                    reqwest::Method::POST,
                    &format!("/v1/policies/{}/cancel", enc(&id)),
                    Some(json!({})),
                )
                .await
                .map(|v| client.print(&v, policy_line)),
            PolicyCommand::Ack {
                id,
                approve,
                reject,
            } => {
                let approve = approve && !reject;
                client
                    .call(
                        reqwest::Method::POST,
                        &format!("/v1/policies/{}/ack", enc(&id)),
                        Some(json!({"approve": approve})),
                    )
                    .await
                    .map(|v| client.print(&v, policy_line))
            }
        };
        match result {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

fn filter_query(f: &EventFilterArgs, since: i64) -> String {
    let mut q = format!("since={since}");
    for (k, v) in [
        ("types", &f.types),
        ("session", &f.session),
        ("policy", &f.policy),
    ] {
        if let Some(v) = v {
            q.push_str(&format!("&{k}={}", enc(v)));
        }
    }
    q
}

pub fn events(cmd: EventsCommand, args: ClientArgs) -> i32 {
    run_client(&args, |client| async move {
        match cmd {
            EventsCommand::Poll { filter, limit } => {
                let q = filter_query(&filter, filter.since.unwrap_or(0));
                match client
                    .call(
                        reqwest::Method::GET,
                        &format!("/v1/events?{q}&limit={limit}"),
                        None,
                    )
                    .await
                {
                    Ok(v) => {
                        client.print(&v, |v| {
                            let mut lines: Vec<String> = v["events"]
                                .as_array()
                                .map(|l| l.iter().map(event_line).collect())
                                .unwrap_or_default();
                            lines.push(format!("next cursor: {}", v["nextCursor"]));
                            lines.join("\n")
                        });
                        0
                    }
                    Err(e) => fail(e),
                }
            }
            EventsCommand::Tail { filter } => {
                let mut since = match filter.since {
                    Some(s) => s,
                    None => match client.call(reqwest::Method::GET, "/v1/health", None).await {
                        Ok(v) => v["cursor"].as_i64().unwrap_or(0),
                        Err(e) => return fail(e),
                    },
                };
                loop {
                    let q = filter_query(&filter, since);
                    match client
                        .call(
                            reqwest::Method::GET,
                            &format!("/v1/events?{q}&limit=200&wait=25s"),
                            None,
                        )
                        .await
                    {
                        Ok(v) => {
                            for e in v["events"].as_array().into_iter().flatten() {
                                if client.json {
                                    println!("{e}");
                                } else {
                                    println!("{}", event_line(e));
                                }
                            }
                            since = v["nextCursor"].as_i64().unwrap_or(since);
                        }
                        Err(CallError::Transport(m)) => {
                            eprintln!("gatehost: {m}; retrying");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                        Err(e) => return fail(e),
                    }
                }
            }
        }
    })
}

/// Waits for a policy across long-poll slices and daemon restarts.
/// Exit 0: passed (done, or awaiting-ack: its gate is green); 1: blocked
/// or cancelled; 2: timeout or error.
pub fn wait(w: WaitArgs, args: ClientArgs) -> i32 {
    run_client(&args, |client| async move {
        let deadline = Instant::now() + w.timeout;
        let mut last_transport: Option<String> = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let why = last_transport
                    .map(|m| format!(" (last error: {m})"))
                    .unwrap_or_default();
                eprintln!("gatehost: timed out waiting for policy {}{why}", w.policy);
                return 2;
            }
            let slice = left.min(Duration::from_secs(25));
            let path = format!(
                "/v1/policies/{}/wait?timeout={}",
                enc(&w.policy),
                slice.as_millis()
            );
            match client.call(reqwest::Method::GET, &path, None).await {
                Ok(v) => {
                    last_transport = None;
                    if v["settled"] != Value::Bool(true) {
                        continue;
                    }
                    client.print(&v, policy_line);
                    return match v["status"].as_str() {
                        Some("done") | Some("awaiting-ack") => 0,
                        Some("blocked") | Some("cancelled") => 1,
                        _ => 2,
                    };
                }
                Err(CallError::Transport(m)) => {
                    // The daemon may be restarting: try again until the deadline.
                    last_transport = Some(m);
                    tokio::time::sleep(Duration::from_millis(250).min(left)).await;
                }
                Err(e) => return fail(e),
            }
        }
    })
}
