//! diff-budget: fails when a change is too large or touches protected paths
//! (for example the tests or the gate configuration: an agent must not pass
//! by editing its gate).
//!
//! Config:
//! ```json
//! {"maxFiles": 20, "maxLines": 500, "protected": ["tests/**", ".gatehost/**"]}
//! ```
//! Lines are added plus removed lines, counted from each file's diff.

use gatehost_plugin::{ChangeKind, Context, Finding, Plugin, Severity, Verdict};
use globset::{Glob, GlobSetBuilder};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Config {
    max_files: Option<usize>,
    max_lines: Option<usize>,
    #[serde(default)]
    protected: Vec<String>,
}

fn changed_lines(diff: &str) -> usize {
    diff.lines()
        .filter(|l| {
            (l.starts_with('+') && !l.starts_with("+++"))
                || (l.starts_with('-') && !l.starts_with("---"))
        })
        .count()
}

struct DiffBudget;

impl Plugin for DiffBudget {
    fn evaluate(ctx: Context) -> Result<Verdict, String> {
        let config: Config = gatehost_plugin::config(&ctx)?;
        if config.max_files.is_none() && config.max_lines.is_none() && config.protected.is_empty() {
            return Err("config: set maxFiles, maxLines or protected".into());
        }
        if ctx.changed_files.is_empty() {
            return Err("the host gave no changed files (pass the change with --diff)".into());
        }
        let mut builder = GlobSetBuilder::new();
        for p in &config.protected {
            builder.add(Glob::new(p).map_err(|e| format!("bad protected glob '{p}': {e}"))?);
        }
        let protected = builder.build().map_err(|e| e.to_string())?;
        let mut findings: Vec<Finding> = Vec::new();
        let mut lines = 0usize;
        for f in &ctx.changed_files {
            let diff = gatehost_plugin::file_diff(&f.path).unwrap_or_default();
            let n = changed_lines(&diff);
            lines += n;
            if protected.is_match(&f.path) {
                let how = match f.kind {
                    ChangeKind::Added => "added",
                    ChangeKind::Modified => "modified",
                    ChangeKind::Deleted => "deleted",
                    ChangeKind::Renamed => "renamed",
                };
                findings.push(gatehost_plugin::finding(
                    &f.path,
                    None,
                    Severity::Error,
                    format!("protected path {how}"),
                ));
            }
        }
        let files = ctx.changed_files.len();
        let mut over = Vec::new();
        if let Some(max) = config.max_files
            && files > max
        {
            over.push(format!("{files} files changed (budget {max})"));
        }
        if let Some(max) = config.max_lines
            && lines > max
        {
            over.push(format!("{lines} lines changed (budget {max})"));
        }
        for o in &over {
            findings.push(Finding {
                path: None,
                line: None,
                severity: Severity::Error,
                message: o.clone(),
            });
        }
        let protected_hits = findings.iter().filter(|f| f.path.is_some()).count();
        Ok(if findings.is_empty() {
            gatehost_plugin::pass(format!(
                "{files} file(s), {lines} line(s) changed: within budget"
            ))
        } else {
            let mut parts = over;
            if protected_hits > 0 {
                parts.push(format!("{protected_hits} protected path(s) touched"));
            }
            gatehost_plugin::fail(parts.join("; "), findings)
        })
    }
}

gatehost_plugin::export_gate!(DiffBudget);
