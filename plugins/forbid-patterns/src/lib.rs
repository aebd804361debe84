//! forbid-patterns: fails when a file matches a forbidden regex.
//!
//! Config (the wasm gate's `config`):
//! ```json
//! {
//!   "scope": "changed",            // or "all": every file of the workspace
//!   "addedLinesOnly": false,       // with "changed": only lines the diff adds
//!   "failOn": "error",             // the least severity that fails the gate
//!   "maxFileBytes": 1048576,       // larger files are skipped (and reported)
//!   "rules": [
//!     {"id": "no-dbg", "pattern": "dbg!\\(", "paths": ["**/*.rs"],
//!      "exclude": ["tests/**"], "message": "remove dbg!", "severity": "error"}
//!   ]
//! }
//! ```
//!
//! Patterns use the regex crate's syntax with `^`/`$` at line boundaries.
//! Files are searched as bytes (an invalid UTF-8 sequence matches no
//! character); they are listed and read through the host's
//! `workspace-files` and `read-files`, a batch at a time.

use gatehost_plugin::{ChangeKind, Context, Finding, Plugin, Severity, Verdict};
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

mod scan;
use scan::Matcher;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Config {
    #[serde(default = "default_scope")]
    scope: String,
    #[serde(default)]
    added_lines_only: bool,
    #[serde(default = "default_fail_on")]
    fail_on: String,
    #[serde(default = "default_max_file_bytes")]
    max_file_bytes: u64,
    rules: Vec<RuleConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleConfig {
    id: String,
    pattern: String,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
    message: Option<String>,
    #[serde(default = "default_fail_on")]
    severity: String,
}

fn default_scope() -> String {
    "changed".into()
}
fn default_fail_on() -> String {
    "error".into()
}
fn default_max_file_bytes() -> u64 {
    1024 * 1024
}

struct Rule {
    id: String,
    matcher: Matcher,
    paths: Option<GlobSet>,
    exclude: Option<GlobSet>,
    message: String,
    severity: Severity,
}

fn severity(s: &str) -> Result<Severity, String> {
    match s {
        "error" => Ok(Severity::Error),
        "warning" => Ok(Severity::Warning),
        "info" => Ok(Severity::Info),
        other => Err(format!("unknown severity '{other}' (error, warning, info)")),
    }
}

fn rank(s: Severity) -> u8 {
    match s {
        Severity::Info => 0,
        Severity::Warning => 1,
        Severity::Error => 2,
    }
}

fn globs(patterns: &[String], rule: &str) -> Result<Option<GlobSet>, String> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        b.add(Glob::new(p).map_err(|e| format!("rule {rule}: bad glob '{p}': {e}"))?);
    }
    b.build().map(Some).map_err(|e| format!("rule {rule}: {e}"))
}

fn compile(config: &Config) -> Result<Vec<Rule>, String> {
    if config.rules.is_empty() {
        return Err("config: rules is empty".into());
    }
    config
        .rules
        .iter()
        .map(|r| {
            Ok(Rule {
                id: r.id.clone(),
                matcher: Matcher::new(&r.pattern)
                    .map_err(|e| format!("rule {}: bad pattern: {e}", r.id))?,
                paths: globs(&r.paths, &r.id)?,
                exclude: globs(&r.exclude, &r.id)?,
                message: r
                    .message
                    .clone()
                    .unwrap_or_else(|| format!("matches forbidden pattern {}", r.pattern)),
                severity: severity(&r.severity)?,
            })
        })
        .collect()
}

/// A file's bytes, unless it was larger than maxFileBytes (then a finding
/// says it was skipped) or unreadable (a warning).
fn readable(
    path: &str,
    read: std::io::Result<Vec<u8>>,
    findings: &mut Vec<Finding>,
) -> Option<Vec<u8>> {
    match read {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
            findings.push(gatehost_plugin::finding(
                path,
                None,
                Severity::Info,
                format!("skipped: {e} (maxFileBytes)"),
            ));
            None
        }
        Err(_) => {
            findings.push(gatehost_plugin::finding(
                path,
                None,
                Severity::Warning,
                "cannot be read",
            ));
            None
        }
    }
}

/// Runs the applicable rules over one file's bytes.
fn scan_file(
    path: &str,
    applicable: &[&Rule],
    read: std::io::Result<Vec<u8>>,
    config: &Config,
    findings: &mut Vec<Finding>,
    scanned: &mut usize,
) {
    let Some(text) = readable(path, read, findings) else {
        return;
    };
    *scanned += 1;
    let only: Option<Vec<u32>> = if config.added_lines_only && config.scope == "changed" {
        Some(
            gatehost_plugin::file_diff(path)
                .map(|d| gatehost_plugin::added_lines(&d))
                .unwrap_or_default(),
        )
    } else {
        None
    };
    // Each rule runs once over the whole file (with `^`/`$` at line
    // boundaries); a finding names the line where the match starts.
    let mut line_starts: Option<Vec<usize>> = None;
    let first_new = findings.len();
    for r in applicable {
        for start in r.matcher.match_starts(&text) {
            let starts = line_starts.get_or_insert_with(|| {
                std::iter::once(0)
                    .chain(memchr::memchr_iter(b'\n', &text).map(|i| i + 1))
                    .collect()
            });
            let n = starts.partition_point(|&s| s <= start) as u32;
            if only.as_ref().is_some_and(|o| !o.contains(&n)) {
                continue;
            }
            findings.push(gatehost_plugin::finding(
                path,
                Some(n),
                r.severity,
                format!("[{}] {}", r.id, r.message),
            ));
        }
    }
    findings[first_new..].sort_by_key(|f| f.line);
}

struct ForbidPatterns;

impl Plugin for ForbidPatterns {
    fn evaluate(ctx: Context) -> Result<Verdict, String> {
        let config: Config = gatehost_plugin::config(&ctx)?;
        let rules = compile(&config)?;
        let fail_on = severity(&config.fail_on)?;
        let files: Vec<String> = match config.scope.as_str() {
            "all" => gatehost_plugin::all_files(),
            "changed" => {
                if ctx.changed_files.is_empty() {
                    return Err("scope is \"changed\" but the host gave no changed files (pass --diff, or use \"scope\": \"all\")".into());
                }
                ctx.changed_files
                    .iter()
                    .filter(|f| f.kind != ChangeKind::Deleted)
                    .map(|f| f.path.clone())
                    .collect()
            }
            other => return Err(format!("unknown scope '{other}' (changed, all)")),
        };
        let mut findings: Vec<Finding> = Vec::new();
        let mut scanned = 0usize;
        // The files some rule applies to, with those rules.
        let targets: Vec<(&String, Vec<&Rule>)> = files
            .iter()
            .filter_map(|path| {
                let applicable: Vec<&Rule> = rules
                    .iter()
                    .filter(|r| r.paths.as_ref().is_none_or(|g| g.is_match(path)))
                    .filter(|r| r.exclude.as_ref().is_none_or(|g| !g.is_match(path)))
                    .collect();
                (!applicable.is_empty()).then_some((path, applicable))
            })
            .collect();
        // Read a batch at a time (the host reads a batch in parallel), so
        // that at most one batch of files is in memory.
        for batch in targets.chunks(gatehost_plugin::READ_BATCH) {
            let paths: Vec<String> = batch.iter().map(|(p, _)| (*p).clone()).collect();
            let contents = gatehost_plugin::read_files(&paths, config.max_file_bytes);
            for ((path, applicable), read) in batch.iter().zip(contents) {
                scan_file(path, applicable, read, &config, &mut findings, &mut scanned);
            }
        }
        let blocking = findings
            .iter()
            .filter(|f| rank(f.severity) >= rank(fail_on))
            .count();
        Ok(if blocking > 0 {
            gatehost_plugin::fail(
                format!("{blocking} forbidden pattern match(es) in {scanned} file(s)"),
                findings,
            )
        } else {
            let mut v = gatehost_plugin::pass(format!("no forbidden pattern in {scanned} file(s)"));
            v.findings = findings;
            v
        })
    }
}

gatehost_plugin::export_gate!(ForbidPatterns);
