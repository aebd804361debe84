//! The WASM gate: a third-party plugin run by the WASM host, confined to
//! the workspace and bounded.
//!
//! Resolves the plugin (a name in the host's plugin directories, or a path,
//! which must be pinned by sha256: anywhere outside the host's plugin
//! directories, such as the workspace or /tmp, the agent may write), checks
//! the gate's bounds against the host's maxima, and maps the plugin's answer
//! to a verdict: its decision is `pass` or `fail`; anything that stops it
//! from deciding (a trap, a bound, a refused import) is `error`.

use super::run::{BoxFuture, Measured, Named, RunGate};
use super::spec::{DEFAULT_JUDGE_TIMEOUT, WasmGate};
use super::{GateContext, GateRunner, diff};
use crate::anchor::WorkspaceAnchor;
use crate::config::{PluginBounds, Trust};
use crate::verdict::{Durations, Outcome, OutputTail, Verdict};
use crate::wasm::{
    Evaluation, JudgeBridge, LoadedPlugin, NamedPlugin, PluginContext, PluginError, PluginUsage,
    WasmHost,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl RunGate for WasmGate {
    fn preflight(
        &self,
        runner: &GateRunner,
        anchor: &WorkspaceAnchor,
        trust: Trust,
    ) -> Result<(), String> {
        preflight(runner, self, anchor, trust)
    }

    fn run<'a>(
        &'a self,
        runner: &'a GateRunner,
        gate: Named<'a>,
        anchor: &'a WorkspaceAnchor,
        ctx: &'a GateContext,
    ) -> BoxFuture<'a, Measured> {
        Box::pin(run(runner, gate, self, anchor, ctx))
    }
}

fn preflight(
    runner: &GateRunner,
    gate: &WasmGate,
    anchor: &WorkspaceAnchor,
    trust: Trust,
) -> Result<(), String> {
    let host = runner.wasm_host()?;
    let (name, _) = find_and_load(host, gate, anchor, trust).map_err(|e| e.to_string())?;
    bounds_for(gate, &name, host.config().defaults, host.config().maxima)
        .map_err(|e| e.to_string())?;
    if let Some(j) = &gate.judge {
        super::judge::preflight(runner, &j.adapter, j.model.as_deref())?;
    }
    Ok(())
}

/// Runs the gate: its verdict, and what the evaluation used when it got
/// as far as one (`gatehost plugin run` reports it; gates drop it).
async fn run(
    runner: &GateRunner,
    named: Named<'_>,
    gate: &WasmGate,
    anchor: &WorkspaceAnchor,
    ctx: &GateContext,
) -> (Verdict, Option<PluginUsage>) {
    let label = named.label.to_string();
    let started = Instant::now();
    let host = match runner.wasm_host() {
        Ok(h) => h,
        Err(e) => return (Verdict::error(label, e), None),
    };
    // Reading, hashing and compiling a plugin takes a thread for up to
    // seconds: never one of the runtime's, which serve the API too.
    let loading = {
        let (runner, gate, trust) = (runner.clone(), gate.clone(), ctx.trust);
        let anchor = match anchor.try_clone() {
            Ok(a) => a,
            Err(e) => {
                return (
                    Verdict::error(label, format!("cannot reopen the workspace: {e}")),
                    None,
                );
            }
        };
        tokio::task::spawn_blocking(move || {
            let host = runner.wasm_host()?;
            find_and_load(host, &gate, &anchor, trust).map_err(|e| e.to_string())
        })
    };
    let (name, plugin) = match loading.await {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => return (Verdict::error(label, e), None),
        Err(e) => {
            return (
                Verdict::error(label, format!("the plugin's loading stopped: {e}")),
                None,
            );
        }
    };
    let bounds = match bounds_for(gate, &name, host.config().defaults, host.config().maxima) {
        Ok(b) => b,
        Err(e) => return (Verdict::error(label, e.to_string()), None),
    };
    let mut files = match &ctx.changes {
        Some(files) => files.clone(),
        None => ctx.diff.as_deref().map(diff::split).unwrap_or_default(),
    };
    // A gate that names the paths it needs is shown the changes under
    // them: its worktree may hold nothing else.
    if let Some(paths) = named.paths {
        files.retain(|f| {
            paths.iter().any(|p| {
                let p = p.trim_end_matches('/').as_bytes();
                f.path.as_slice() == p
                    || (f.path.len() > p.len() && f.path.starts_with(p) && f.path[p.len()] == b'/')
            })
        });
    }
    // The plugin interface's paths are strings: a changed path that is not
    // UTF-8 cannot be named to the plugin, and is never left out silently.
    let mut named = Vec::with_capacity(files.len());
    for f in files {
        match f.path_str() {
            Some(p) => named.push((p.to_string(), f.kind, f.hunks)),
            None => {
                return (
                    Verdict::error(
                        label,
                        format!(
                            "the changed path {:?} is not UTF-8: it cannot be given to a plugin (the plugin interface's paths are strings)",
                            f.path_lossy()
                        ),
                    ),
                    None,
                );
            }
        }
    }
    let config = gate.config.clone().unwrap_or_default();
    let context = PluginContext {
        session_id: ctx.session_id.clone(),
        policy_id: ctx.policy_id.clone(),
        config: config
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), text)
            })
            .collect(),
        config_json: serde_json::Value::Object(config).to_string(),
        last_message: ctx.text.clone(),
        changed_files: named.iter().map(|(p, k, _)| (p.clone(), *k)).collect(),
    };
    let diffs = Arc::new(named.into_iter().map(|(p, _, h)| (p, h)).collect());
    let judge = JudgeBridge {
        host: Arc::new(runner.clone()),
        adapter: gate.judge.as_ref().map(|j| j.adapter.clone()),
        model: gate.judge.as_ref().and_then(|j| j.model.clone()),
        timeout: gate
            .judge
            .as_ref()
            .and_then(|j| j.timeout_ms)
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_JUDGE_TIMEOUT),
        nonce: gate.judge.as_ref().is_some_and(|j| j.nonce),
        max_calls: bounds.judge_calls,
    };
    // A handle of its own on the workspace the anchor opened, for the
    // host's `workspace-files` and `read-files` (only if it imports them).
    let workspace_dir = if plugin.uses.host {
        match anchor.dir().try_clone() {
            Ok(d) => Some(d),
            Err(e) => {
                return (
                    Verdict::error(label, format!("cannot hand the workspace over: {e}")),
                    None,
                );
            }
        }
    } else {
        None
    };
    let evaluation = Evaluation {
        context,
        bounds,
        workspace_root: anchor.root().to_path_buf(),
        workspace_dir,
        diffs,
        judge,
    };
    let result = host.evaluate(&plugin, evaluation).await;
    let tail = |bytes: Vec<u8>, cap: u64| OutputTail {
        truncated: bytes.len() as u64 >= cap,
        total_bytes: bytes.len() as u64,
        text: String::from_utf8_lossy(&bytes).into_owned(),
    };
    let (mut v, usage) = match result {
        Ok(pv) => {
            let outcome = if pv.passed {
                Outcome::Pass
            } else {
                Outcome::Fail
            };
            let reason = if pv.summary.is_empty() {
                format!(
                    "plugin '{}' said {}",
                    plugin.name,
                    if pv.passed { "pass" } else { "fail" }
                )
            } else {
                pv.summary.clone()
            };
            let mut v = Verdict::new(outcome, label, reason);
            v.findings = pv.findings;
            v.stdout = Some(tail(pv.stdout, bounds.output_bytes));
            v.stderr = Some(tail(pv.stderr, bounds.output_bytes));
            (v, Some(pv.usage))
        }
        Err((e, captured)) => {
            tracing::warn!(plugin = %plugin.name, error = %e, "plugin could not decide");
            let mut v = Verdict::error(label, e.to_string());
            v.timed_out = matches!(e, PluginError::Timeout { .. });
            v.stdout = Some(tail(captured.stdout, bounds.output_bytes));
            v.stderr = Some(tail(captured.stderr, bounds.output_bytes));
            (v, captured.usage)
        }
    };
    v.durations = Durations::new(Duration::ZERO, started.elapsed());
    (v, usage)
}

/// Finds the gate's plugin and loads it. A named plugin is found once and
/// remembered; when its file has changed since (replaced, re-pointed,
/// removed), it is found afresh, so the pinning rule below always judges
/// the file that is loaded.
fn find_and_load(
    host: &WasmHost,
    gate: &WasmGate,
    anchor: &WorkspaceAnchor,
    trust: Trust,
) -> Result<(String, Arc<LoadedPlugin>), PluginError> {
    let pinned = gate.sha256.as_deref();
    let (name, found) = resolve_plugin(host, gate, anchor, trust)?;
    let named = match found {
        Found::Path(path) => {
            let plugin = host.load_path(&name, &path, pinned)?;
            return Ok((name, plugin));
        }
        Found::Named(named) => named,
    };
    if let Some(plugin) = host.load_named(&name, &named, pinned)? {
        return Ok((name, plugin));
    }
    host.forget_named(&name);
    let (name, found) = resolve_plugin(host, gate, anchor, trust)?;
    let plugin = match found {
        Found::Path(path) => host.load_path(&name, &path, pinned)?,
        // Found afresh (not remembered): `load_named` answers `Some`.
        Found::Named(named) => {
            host.load_named(&name, &named, pinned)?
                .ok_or_else(|| PluginError::Unreadable {
                    plugin: name.clone(),
                    message: format!("{} keeps changing", named.describe()),
                })?
        }
    };
    Ok((name, plugin))
}

/// Where a gate's plugin is.
enum Found {
    Named(NamedPlugin),
    Path(PathBuf),
}

/// Finds the plugin file, enforcing that a plugin given by path, and a
/// named plugin that resolves into the workspace, is pinned by digest, and
/// that an agent's gate names a path only inside the workspace or the
/// plugin directories. Returns its name and where it is.
fn resolve_plugin(
    host: &WasmHost,
    gate: &WasmGate,
    anchor: &WorkspaceAnchor,
    trust: Trust,
) -> Result<(String, Found), PluginError> {
    let spelled = gate.plugin.as_str();
    let is_path = spelled.contains('/') || spelled.ends_with(".wasm");
    let (name, found, in_workspace) = if !is_path {
        let named = host.find_named_cached(spelled)?;
        let inside = named.inside(anchor.root());
        (spelled.to_string(), Found::Named(named), inside)
    } else if Path::new(spelled).is_absolute() {
        let path = PathBuf::from(spelled);
        let inside = anchor.contains_host_path(&path);
        if trust == Trust::Agent && !inside && !in_plugin_dirs(host, &path) {
            return Err(PluginError::OutsidePath {
                plugin: file_stem(&path),
                path: spelled.to_string(),
            });
        }
        (file_stem(&path), Found::Path(path), inside)
    } else {
        let rel = anchor
            .resolve(Path::new(spelled))
            .map_err(|e| PluginError::Unreadable {
                plugin: spelled.to_string(),
                message: e.to_string(),
            })?;
        let path = anchor.root().join(rel);
        (file_stem(&path), Found::Path(path), true)
    };
    if gate.sha256.is_none() {
        if in_workspace {
            return Err(PluginError::UnpinnedInWorkspace { plugin: name });
        }
        if is_path {
            return Err(PluginError::UnpinnedPath { plugin: name });
        }
    }
    Ok((name, found))
}

/// True when `path` (symlinks resolved) lies in one of the configured
/// plugin directories.
fn in_plugin_dirs(host: &WasmHost, path: &Path) -> bool {
    let Ok(canonical) = std::fs::canonicalize(path) else {
        return false;
    };
    host.config()
        .plugin_dirs
        .iter()
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .any(|d| canonical.starts_with(d))
}

fn file_stem(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// The gate's bounds: its own within the host's maxima, else the defaults.
pub fn bounds_for(
    gate: &WasmGate,
    plugin: &str,
    defaults: PluginBounds,
    maxima: PluginBounds,
) -> Result<PluginBounds, PluginError> {
    const MIB: u64 = 1024 * 1024;
    let over = |bound: &'static str, asked: u64, max: u64| PluginError::OverMaximum {
        plugin: plugin.to_string(),
        bound,
        asked,
        max,
    };
    let mut b = defaults;
    if let Some(ms) = gate.timeout_ms {
        let max = maxima.timeout.as_millis() as u64;
        if ms > max {
            return Err(over("timeoutMs", ms, max));
        }
        b.timeout = Duration::from_millis(ms);
    }
    if let Some(f) = gate.fuel {
        if f > maxima.fuel {
            return Err(over("fuel", f, maxima.fuel));
        }
        b.fuel = f;
    }
    if let Some(m) = gate.memory_mib {
        if m.saturating_mul(MIB) > maxima.memory_bytes {
            return Err(over("memoryMiB", m, maxima.memory_bytes / MIB));
        }
        b.memory_bytes = m * MIB;
    }
    if let Some(o) = gate.max_output_bytes {
        if o > maxima.output_bytes {
            return Err(over("maxOutputBytes", o, maxima.output_bytes));
        }
        b.output_bytes = o;
    }
    if let Some(j) = gate.max_judge_calls {
        if j > maxima.judge_calls {
            return Err(over("maxJudgeCalls", j as u64, maxima.judge_calls as u64));
        }
        b.judge_calls = j;
    }
    Ok(b)
}

/// Plugins' `judge` and `judge-with-context` calls run as judge gates: the
/// same adapters, slots, bounds, verdict rule, and prompt (the rubric, then
/// the context as untrusted data).
impl crate::wasm::JudgeHost for GateRunner {
    fn judge<'a>(
        &'a self,
        call: crate::wasm::JudgeCall<'a>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = crate::wasm::JudgeAnswer> + Send + 'a>>
    {
        use crate::wasm::JudgeAnswer;
        Box::pin(async move {
            let request = super::judge::JudgeRequest {
                label: call.label,
                adapter: call.adapter,
                model: call.model,
                rubric: call.rubric,
                // Capped to `[judge] max_context_bytes` by `run_request`.
                context: call.context,
                timeout: call.timeout,
                nonce: call.nonce,
            };
            let judged = super::judge::run_request(self, request).await;
            let verdict = judged.verdict;
            let output = verdict
                .stdout
                .as_ref()
                .map(|t| t.text.clone())
                .unwrap_or_default();
            match (verdict.outcome, judged.decision) {
                (crate::verdict::Outcome::Error, _) => JudgeAnswer::CouldNotRun(verdict.reason),
                (_, Some(super::prompt::Decision::Pass)) => {
                    JudgeAnswer::Decided { pass: true, output }
                }
                (_, Some(super::prompt::Decision::Fail)) => JudgeAnswer::Decided {
                    pass: false,
                    output,
                },
                (_, None) => JudgeAnswer::Undecided {
                    reason: verdict.reason,
                    output,
                },
            }
        })
    }
}
