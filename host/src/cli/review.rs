//! `gatehost policy show` and `gatehost policy diff`: what a person
//! reviews before an ack, read from the daemon (the policy, its
//! `policy:passed`/`policy:failed` events, and the patch route, every page
//! of it). It owns their text; it must never change state.

use super::error::{CliError, CliResult};
use super::render::policy_detail;
use crate::client::{Client, ClientError};
use crate::model::event::{Event as TypedEvent, PolicyChange, PolicyEvent};
use crate::wire::{DiffFile, Event, EventQuery, Policy, PolicyDiff};
use serde::Serialize;
use std::fmt::Write;

/// Lines of a gate's output shown by `policy show`.
const TAIL_LINES: usize = 20;
/// The most pages followed (1000 files each): a bound, not a limit met.
const MAX_PAGES: usize = 10_000;

/// The whole patch: every page's files and text, in one answer.
pub(super) async fn whole_diff(client: &Client, id: &str) -> Result<PolicyDiff, ClientError> {
    let mut all = client.policy_diff(id, 0).await?;
    let mut next = all.next_from;
    let mut notes: Vec<String> = all.note.iter().cloned().collect();
    for _ in 0..MAX_PAGES {
        let Some(from) = next else { break };
        let page = client.policy_diff(id, from).await?;
        all.files.extend(page.files);
        all.patch.push_str(&page.patch);
        notes.extend(page.note.filter(|n| n.contains("headers")));
        next = page.next_from;
    }
    all.next_from = None;
    // A page note on where the next page starts is moot once all are read.
    notes.retain(|n| n.contains("headers"));
    all.note = (!notes.is_empty()).then(|| notes.join("; "));
    Ok(all)
}

/// Every `policy:passed` and `policy:failed` event of `id`, oldest first.
async fn verdict_events(client: &Client, id: &str) -> Result<Vec<Event>, ClientError> {
    let mut out = Vec::new();
    let mut since = 0;
    for _ in 0..MAX_PAGES {
        let page = client
            .events(&EventQuery {
                since: Some(since),
                types: Some("policy:passed,policy:failed".into()),
                policy: Some(id.to_string()),
                limit: Some(1000),
                ..Default::default()
            })
            .await?;
        let n = page.events.len();
        out.extend(page.events);
        if n < 1000 {
            break;
        }
        since = page.next_cursor;
    }
    Ok(out)
}

/// `file | +a −r` lines and a total, as `git diff --stat` sums them.
pub(super) fn stat(files: &[DiffFile]) -> String {
    let mut out = String::new();
    let (mut added, mut removed) = (0u64, 0u64);
    for f in files {
        added += f.added;
        removed += f.removed;
        let name = match &f.from {
            Some(from) => format!("{from} => {}", f.path),
            None => f.path.clone(),
        };
        let what = if f.binary {
            "binary".to_string()
        } else {
            format!("+{} −{}", f.added, f.removed)
        };
        let _ = writeln!(out, " {name} | {} {what}", f.kind);
    }
    let noun = if files.len() == 1 { "file" } else { "files" };
    let _ = write!(out, " {} {noun} changed, +{added} −{removed}", files.len());
    out
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(TAIL_LINES);
    lines[from..]
        .iter()
        .map(|l| format!("      {l}\n"))
        .collect()
}

fn compact(v: &serde_json::Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 200 {
        let cut: String = text.chars().take(200).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// What `policy show --json` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Shown {
    pub policy: Policy,
    pub verdicts: Vec<Event>,
    /// The patch's files (null before there is a diff).
    pub diff: Option<Vec<DiffFile>>,
    /// Why there is no diff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_diff: Option<String>,
}

pub(super) async fn gather(client: &Client, id: &str) -> CliResult<Shown> {
    let policy = client.policy(id).await?;
    let verdicts = verdict_events(client, id).await?;
    let (diff, no_diff) = match whole_diff(client, id).await {
        Ok(d) => (Some(d.files), None),
        Err(e) if e.status() == Some(409) => (None, Some(e.to_string())),
        Err(e) => return Err(CliError::from(e)),
    };
    Ok(Shown {
        policy,
        verdicts,
        diff,
        no_diff,
    })
}

/// `policy show`'s text: the status, the plan, every verdict, the last
/// gate run's output, the diff's stat.
pub(super) fn show_text(s: &Shown) -> String {
    let p = &s.policy;
    let row = p;
    let mut out = policy_detail(p);
    let spec = &row.spec;
    out.push_str("\nplan:");
    match &spec.gate {
        Some(g) => {
            let _ = write!(out, "\n  gate: {}", compact(g.json()));
        }
        None => out.push_str("\n  gate: none (passes at turn-end)"),
    }
    let then = match spec.then {
        crate::model::attach::Then::Emit => "emit",
        crate::model::attach::Then::Commit => "commit",
    };
    let _ = write!(out, "\n  then: {then}");
    if let Some(c) = &spec.commit {
        let _ = write!(out, "\n  commit paths: {}", c.paths.join(", "));
    }
    let max = spec.max_retries();
    let _ = write!(out, "\n  retries: {} of {max} used", row.retries_used);
    match (&spec.next, &row.next_id) {
        (_, Some(next)) => {
            let _ = write!(out, "\n  next: policy {next}");
        }
        (Some(n), None) => {
            let shown = match serde_json::to_value(&**n) {
                Ok(v) => compact(&v),
                Err(e) => format!("(does not encode: {e})"),
            };
            let _ = write!(out, "\n  next: {shown} (attached once this one is done)");
        }
        _ => out.push_str("\n  next: none"),
    }
    if let Some(snap) = p.plan_view().and_then(|pl| pl.snapshot) {
        let _ = write!(
            out,
            "\n  snapshot tree: {} (approve it with: gatehost policy ack {} --approve --tree {})",
            snap.tree, row.id, snap.tree
        );
    }
    out.push_str("\nverdicts:");
    if s.verdicts.is_empty() {
        out.push_str(" none yet");
    }
    for (i, e) in s.verdicts.iter().enumerate() {
        let TypedEvent::Policy(PolicyEvent {
            change: PolicyChange::Passed(v) | PolicyChange::Failed(v),
            ..
        }) = &e.event
        else {
            let _ = write!(out, "\n  #{} ?: ", i + 1);
            continue;
        };
        let _ = write!(out, "\n  #{} {}: {}", i + 1, v.outcome.as_str(), v.reason);
        for g in &v.gates {
            let _ = write!(
                out,
                "\n     {}: {}: {}",
                g.gate,
                g.outcome.as_str(),
                g.reason
            );
        }
    }
    // The output tails are kept for the last run only.
    if let Some(report) = &row.verdict {
        for g in &report.gates {
            for (stream, t) in [("stdout", &g.stdout), ("stderr", &g.stderr)] {
                if let Some(t) = t
                    && !t.text.is_empty()
                {
                    let _ = write!(
                        out,
                        "\n  last run, {}: {stream} ({} bytes{}):\n{}",
                        g.gate,
                        t.total_bytes,
                        if t.truncated { ", its tail" } else { "" },
                        tail(&t.text).trim_end_matches('\n')
                    );
                }
            }
        }
    }
    match (&s.diff, &s.no_diff) {
        (Some(files), _) => {
            let _ = write!(
                out,
                "\ndiff (gatehost policy diff {}):\n{}",
                row.id,
                stat(files)
            );
        }
        (None, Some(why)) => {
            let _ = write!(out, "\ndiff: none: {why}");
        }
        (None, None) => {}
    }
    out
}
