//! The client commands: `session`, `policy`, `events`, `wait`. Each is one
//! or more calls through the typed [`crate::client::Client`], printed for
//! a person ([`super::render`]) or, with `--json`, as the API's JSON. The
//! daemon is found through `--server` or `GATEHOST_SERVER`, else the
//! `server.url` a daemon wrote in the default data directory; the token
//! through `--token` or `GATEHOST_TOKEN`, else, for that daemon, the
//! agent token in its data directory.
//!
//! Exit codes: 0 done, 2 error (returned as a [`CliError`]: the daemon
//! refused, or cannot be reached); `wait` adds 1 for a policy that was
//! blocked or cancelled. It must never print an error itself.

use super::error::{CliError, CliResult};
use super::render::{event_line, policy_detail, policy_line, session_line};
use super::serve::{SERVER_URL_FILE, default_data_dir};
use super::server_args::{ServerArgs, discover};
use crate::client::{Client, ClientError};
use crate::wire::{
    DiffSide, EventQuery, LineComment, PageQuery, PolicyStatus, RegisterRequest, ReportKind,
    ReportRequest, StartRequest,
};
use serde::Serialize;
use serde_json::Value;
use std::time::{Duration, Instant};

pub use super::client_args::*;

/// The daemon: `--server`, else the `server.url` in the default data
/// directory ([`discover`]).
pub(super) fn find_server(args: &ServerArgs) -> CliResult<String> {
    discover(args.server.as_deref(), default_data_dir().as_deref()).map_err(|_| {
        CliError::new("no-daemon", "no daemon to talk to")
            .field("--server")
            .hint("pass --server URL or set GATEHOST_SERVER (gatehost serve prints its URL and writes it to server.url in its data directory)")
    })
}

/// The token: `--token` or `GATEHOST_TOKEN`; else, for the daemon of the
/// default data directory (the one its `server.url` names), that
/// directory's `agent.token`. Never the operator token unless given: an
/// ack or a cancel is asked for by name. Never a local token for another
/// server.
fn find_token(args: &ClientArgs, server: &str) -> CliResult<String> {
    if let Some(t) = &args.daemon.token {
        return Ok(t.clone());
    }
    if let Some(t) = local_token(server, crate::wire::AGENT_TOKEN_FILE) {
        return Ok(t);
    }
    Err(CliError::new("no-token", "no token")
        .field("--token")
        .hint("pass --token or set GATEHOST_TOKEN (the daemon keeps agent.token and operator.token in its data directory; the agent token of the default data directory's daemon is used by default)"))
}

/// The token file `name` of the daemon of the default data directory, if
/// that daemon is `server` (its `server.url`); never one for another server.
pub(super) fn local_token(server: &str, name: &str) -> Option<String> {
    let dir = default_data_dir().filter(|dir| {
        std::fs::read_to_string(dir.join(SERVER_URL_FILE)).is_ok_and(|u| u.trim() == server)
    })?;
    std::fs::read_to_string(dir.join(name))
        .ok()
        .map(|t| t.trim().to_string())
}

fn connect(args: &ClientArgs) -> CliResult<Client> {
    let server = find_server(&args.daemon)?;
    let token = find_token(args, &server)?;
    Ok(Client::new(&server, token)?
        .with_keyring(crate::keyring::Keyring::default_for_user())
        .with_session_keys(split_keys(args.session_key.as_deref())))
}

/// `--session-key a,b`: the keys, trimmed, none empty.
pub(super) fn split_keys(given: Option<&str>) -> Vec<String> {
    given
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .collect()
}

/// Builds the client and a runtime, then runs `body` to its exit code.
pub(super) fn run_client<F, Fut>(args: &ClientArgs, body: F) -> CliResult<i32>
where
    F: FnOnce(Client) -> Fut,
    Fut: std::future::Future<Output = CliResult<i32>>,
{
    let client = connect(args)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new("runtime", format!("cannot start the runtime: {e}")))?;
    rt.block_on(body(client))
}

/// Prints `v` as pretty JSON with `--json`, else `human(v)`.
pub(super) fn show<T: Serialize>(
    json: bool,
    v: &T,
    human: impl FnOnce(&T) -> String,
) -> CliResult<i32> {
    if json {
        return print_json(v);
    }
    println!("{}", human(v));
    Ok(0)
}

/// Prints `v` as indented JSON.
fn print_json<T: Serialize>(v: &T) -> CliResult<i32> {
    println!("{}", encode(serde_json::to_string_pretty(v))?);
    Ok(0)
}

/// An answer's JSON text, or the error that it cannot be encoded.
fn encode(text: serde_json::Result<String>) -> CliResult<String> {
    text.map_err(|e| CliError::new("encode", format!("cannot encode the answer: {e}")))
}

fn absolute(p: &std::path::Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

pub fn session(cmd: SessionCommand, args: ClientArgs) -> CliResult<i32> {
    let json = args.json;
    run_client(&args, |client| async move {
        match cmd {
            SessionCommand::Register {
                id,
                cwd,
                label,
                workspace,
                notify_url,
            } => {
                let input = RegisterRequest {
                    id,
                    label,
                    cwd: absolute(&cwd),
                    workspace: workspace.as_deref().map(absolute),
                    notify_url,
                    session_key: None,
                };
                let s = client.register(&input).await?;
                show(json, &s, |s| s.session.id.clone())
            }
            SessionCommand::Report { id, kind, message } => {
                let kind: ReportKind = serde_json::from_value(Value::String(kind.clone()))
                    .map_err(|e| CliError::input(format!("{kind}: {e}")).field("KIND"))?;
                let r = client.report(&id, &ReportRequest { kind, message }).await?;
                let name = kind.as_str();
                show(json, &r, |r| match r.cursor {
                    Some(c) => format!("{id}: {name} recorded (event #{c})"),
                    None => format!("{id}: {name} recorded"),
                })
            }
            SessionCommand::Start {
                id,
                cwd,
                label,
                turn_end_pattern,
                quiet_ms,
                notify_url,
                acp,
                prompt,
                permission_rule,
                command,
            } => {
                let permission = match permission_rule {
                    Some(file) => {
                        let text = std::fs::read_to_string(&file).map_err(|e| {
                            CliError::input(format!("{}: {e}", file.display()))
                                .field("--permission-rule")
                        })?;
                        Some(serde_json::from_str(&text).map_err(|e| {
                            CliError::input(format!("{}: {e}", file.display()))
                                .field("--permission-rule")
                        })?)
                    }
                    None => None,
                };
                let input = StartRequest {
                    id,
                    label,
                    cwd: absolute(&cwd),
                    command,
                    turn_end_pattern,
                    quiet_ms,
                    notify_url,
                    acp,
                    prompt,
                    permission,
                    ..StartRequest::default()
                };
                let s = client.start_session(&input).await?;
                show(json, &s, |s| s.session.id.clone())
            }
            SessionCommand::Permission {
                id,
                request,
                allow,
                deny: _,
            } => {
                let r = client.answer_permission(&id, &request, allow).await?;
                show(json, &r, |_| {
                    format!(
                        "{id}: {request} {}",
                        if allow { "allowed" } else { "denied" }
                    )
                })
            }
            SessionCommand::List { page } => {
                let mut q = page_query(&page);
                let mut all = Vec::new();
                loop {
                    let p = client.sessions(&q).await?;
                    all.extend(p.sessions);
                    if !next_page(&mut q, p.next_cursor, &page) {
                        break;
                    }
                }
                show(json, &serde_json::json!({ "sessions": all }), |_| {
                    lines(all.iter().map(session_line))
                })
            }
            SessionCommand::Show { id } => {
                // A session is shown as its JSON, with --json or not.
                print_json(&client.session(&id).await?)
            }
        }
    })
}

fn page_query(page: &PageArgs) -> PageQuery {
    PageQuery {
        limit: Some(page.limit.unwrap_or(50) as usize),
        cursor: page.cursor,
        ..PageQuery::default()
    }
}

/// Moves `q` to the next page with `--all`; without it, says where the
/// next page starts on stderr. False when there is none to fetch.
fn next_page(q: &mut PageQuery, next: Option<i64>, page: &PageArgs) -> bool {
    match next {
        Some(n) if page.all => {
            q.cursor = Some(n);
            true
        }
        Some(n) => {
            eprintln!("more: --cursor {n}");
            false
        }
        None => false,
    }
}

fn lines(items: impl Iterator<Item = String>) -> String {
    items.collect::<Vec<_>>().join("\n")
}

pub fn policy(cmd: PolicyCommand, args: ClientArgs) -> CliResult<i32> {
    let json = args.json;
    // The file is read before any connection: bad input is reported as such.
    let attach_body = match &cmd {
        PolicyCommand::Attach {
            file: Some(file),
            idempotency_key,
            ..
        } => Some(attach_body(file, idempotency_key.as_deref())?),
        _ => None,
    };
    run_client(&args, |client| async move {
        match cmd {
            PolicyCommand::Attach { .. } => {
                let body = attach_body.unwrap_or_default();
                let p = client.attach(&body).await?;
                show(json, &p, |p| p.policy_id.clone())
            }
            PolicyCommand::Status { id } => show(json, &client.policy(&id).await?, policy_detail),
            PolicyCommand::List {
                status,
                newest,
                page,
            } => {
                let mut q = PageQuery {
                    status,
                    order: newest.then(|| "newest".to_string()),
                    ..page_query(&page)
                };
                let mut all = Vec::new();
                loop {
                    let p = client.policies(&q).await?;
                    all.extend(p.policies);
                    if !next_page(&mut q, p.next_cursor, &page) {
                        break;
                    }
                }
                show(json, &serde_json::json!({ "policies": all }), |_| {
                    lines(all.iter().map(policy_line))
                })
            }
            PolicyCommand::Cancel { id } => show(json, &client.cancel(&id).await?, policy_detail),
            PolicyCommand::Ack {
                id,
                approve,
                reject,
                tree,
                comment,
            } => show(
                json,
                &client
                    .ack(&id, approve && !reject, tree.as_deref(), comment.as_deref())
                    .await?,
                policy_detail,
            ),
            PolicyCommand::Show { id } => show(
                json,
                &super::review::gather(&client, &id).await?,
                super::review::show_text,
            ),
            PolicyCommand::Diff { id, stat } => {
                let d = super::review::whole_diff(&client, &id).await?;
                if json {
                    return show(true, &d, |_| String::new());
                }
                if stat {
                    println!("{}", super::review::stat(&d.files));
                } else {
                    print!("{}", d.patch);
                }
                if let Some(note) = &d.note {
                    eprintln!("note: {note}");
                }
                Ok(0)
            }
            PolicyCommand::RequestChanges {
                id,
                comments,
                on_old,
                tree,
            } => {
                let mut all = Vec::new();
                for (texts, side) in [(comments, DiffSide::New), (on_old, DiffSide::Old)] {
                    for t in &texts {
                        all.push(line_comment(t, side)?);
                    }
                }
                let tree = match tree {
                    Some(t) => t,
                    None => client.policy_diff(&id, 0).await?.tree,
                };
                let p = client.request_changes(&id, &tree, all).await?;
                show(json, &p, policy_detail)
            }
            // Dispatched to `standing` by the caller.
            PolicyCommand::Standing { .. } => Ok(0),
        }
    })
}

/// `PATH:LINE:TEXT` as a comment on `side` (the path is everything
/// before the first `:LINE:`).
fn line_comment(text: &str, side: DiffSide) -> CliResult<LineComment> {
    let bad = || {
        CliError::input(format!(
            "{text:?}: a comment is PATH:LINE:TEXT (LINE from 1)"
        ))
        .field("--comment")
    };
    let mut at = 0;
    while let Some(i) = text[at..].find(':').map(|i| i + at) {
        let rest = &text[i + 1..];
        if let Some((line, body)) = rest.split_once(':')
            && i > 0
            && !line.is_empty()
            && line.bytes().all(|b| b.is_ascii_digit())
        {
            let line: u32 = line.parse().map_err(|_| bad())?;
            if line == 0 || body.trim().is_empty() {
                return Err(bad());
            }
            return Ok(LineComment {
                path: text[..i].to_string(),
                line,
                side,
                body: body.trim().to_string(),
            });
        }
        at = i + 1;
    }
    Err(bad())
}

/// The attach body from `file` (`-`: stdin), with `idempotencyKey` set.
pub(super) fn attach_body(file: &std::path::Path, key: Option<&str>) -> CliResult<Value> {
    let shown = file.display().to_string();
    let text = if file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| CliError::input(format!("cannot read stdin: {e}")).field("FILE.json"))?;
        s
    } else {
        std::fs::read_to_string(file)
            .map_err(|e| CliError::input(format!("cannot read {shown}: {e}")).field(&shown))?
    };
    let mut body: Value = serde_json::from_str(&text)
        .map_err(|e| CliError::input(format!("{shown}: not valid JSON: {e}")).field(&shown))?;
    if let (Some(k), Some(m)) = (key, body.as_object_mut()) {
        m.insert("idempotencyKey".into(), Value::String(k.to_string()));
    }
    Ok(body)
}

fn event_query(f: &EventFilterArgs, since: i64, limit: usize, wait: Option<&str>) -> EventQuery {
    EventQuery {
        since: Some(since),
        types: f.types.clone(),
        session: f.session.clone(),
        policy: f.policy.clone(),
        host: f.host.clone(),
        limit: Some(limit),
        wait: wait.map(str::to_string),
    }
}

pub fn events(cmd: EventsCommand, args: ClientArgs) -> CliResult<i32> {
    let json = args.json;
    run_client(&args, |client| async move {
        match cmd {
            EventsCommand::Poll { filter, limit } => {
                let q = event_query(&filter, filter.since.unwrap_or(0), limit, None);
                let page = client.events(&q).await?;
                show(json, &page, |p| {
                    let mut out: Vec<String> = p.events.iter().map(event_line).collect();
                    out.push(format!("next cursor: {}", p.next_cursor));
                    out.join("\n")
                })
            }
            EventsCommand::Tail { filter } => {
                let mut since = match filter.since {
                    Some(s) => s,
                    None => client.health().await?.cursor,
                };
                loop {
                    let q = event_query(&filter, since, 200, Some("25s"));
                    match client.events(&q).await {
                        Ok(page) => {
                            for e in &page.events {
                                if json {
                                    println!("{}", encode(serde_json::to_string(e))?);
                                } else {
                                    println!("{}", event_line(e));
                                }
                            }
                            since = page.next_cursor;
                        }
                        Err(ClientError::Unreachable { message, .. }) => {
                            tracing::warn!(%message, "the daemon is unreachable; retrying");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                        Err(e) if e.is_too_many_waiters() => {
                            tracing::warn!(error = %e, "the daemon has too many long-polls; retrying");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
    })
}

/// Waits for a policy across long-poll slices and daemon restarts.
/// Exit 0: passed (done, or awaiting-ack: its gate is green); 1: blocked
/// or cancelled; 2: timeout or error.
pub fn wait(w: WaitArgs, args: ClientArgs) -> CliResult<i32> {
    let json = args.json;
    run_client(&args, |client| async move {
        let deadline = Instant::now() + w.timeout;
        let mut last_unreachable: Option<String> = None;
        let progress =
            super::progress::Progress::start(json, format!("waiting for policy {}", w.policy));
        // On a terminal, shorter slices keep the status shown fresh.
        let most = if progress.is_drawn() {
            Duration::from_secs(2)
        } else {
            Duration::from_secs(25)
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let why = last_unreachable
                    .map(|m| format!(" (last error: {m})"))
                    .unwrap_or_default();
                return Err(CliError::new(
                    "timeout",
                    format!("timed out waiting for policy {}{why}", w.policy),
                )
                .field("--timeout"));
            }
            let slice = left.min(most);
            match client.wait_policy(&w.policy, slice).await {
                Ok(v) => {
                    last_unreachable = None;
                    if !v.settled {
                        progress.set(format!("policy {}: {}", w.policy, v.policy.status.as_str()));
                        continue;
                    }
                    drop(progress);
                    show(json, &v, |v| policy_detail(&v.policy))?;
                    return Ok(match v.policy.status {
                        PolicyStatus::Done | PolicyStatus::AwaitingAck => 0,
                        PolicyStatus::Blocked | PolicyStatus::Cancelled => 1,
                        _ => 2,
                    });
                }
                Err(ClientError::Unreachable { message, .. }) => {
                    // The daemon may be restarting: try again until the deadline.
                    last_unreachable = Some(message);
                    tokio::time::sleep(Duration::from_millis(250).min(left)).await;
                }
                Err(e) if e.is_too_many_waiters() => {
                    // Too many long-polls wait: its Retry-After is a second.
                    last_unreachable = Some(e.to_string());
                    tokio::time::sleep(Duration::from_secs(1).min(left)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comment_is_path_line_text_with_colons_in_path_and_text() {
        let c = line_comment("src/a.rs:12: Use a loop: not a map.", DiffSide::New).expect("ok");
        assert_eq!(
            (c.path.as_str(), c.line, c.body.as_str()),
            ("src/a.rs", 12, "Use a loop: not a map.")
        );
        let c = line_comment("dir:x/b.rs:3:why", DiffSide::Old).expect("ok");
        assert_eq!(
            (c.path.as_str(), c.line, c.side),
            ("dir:x/b.rs", 3, DiffSide::Old)
        );
        for bad in [
            "",
            "a.rs",
            "a.rs:3",
            "a.rs:0:x",
            ":3:x",
            "a.rs:3:  ",
            "a.rs:x:y",
            "a.rs:99999999999:x",
        ] {
            assert!(line_comment(bad, DiffSide::New).is_err(), "{bad:?}");
        }
    }
}
