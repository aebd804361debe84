//! The judge gate: an LLM CLI (an adapter) asked to judge the work.
//!
//! The judge holds a slot of the host-wide judge limit (FIFO) for as long
//! as its process lives; the wait for a slot is reported and does not eat
//! its timeout. Fail closed: a timeout or no verdict is `fail`; an adapter
//! that is not configured, not found, fails to start or exits non-zero is
//! `error`. Only the judge's own stdout is parsed, never the prompt.

pub mod prompt;

use super::GateKind;
use super::run::{BoxFuture, Measured, Named, RunGate};
use super::spec::JudgeGate;
use super::{GateContext, GateRunner, base_env, fill_process_details, signal_name};
use crate::anchor::WorkspaceAnchor;
use crate::config::Trust;
use crate::sandbox::{Grants, Lookup, Place};
use crate::supervise::{Limits, ProcessSpec, Termination, find_on_path};
use crate::verdict::{Durations, Outcome, Verdict};
use prompt::Decision;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Instant;

impl RunGate for JudgeGate {
    fn reach(&self, runner: &GateRunner, _trust: Trust) -> Option<String> {
        reach(runner, &self.adapter, self.model.as_deref())
    }

    fn preflight(
        &self,
        runner: &GateRunner,
        _anchor: &WorkspaceAnchor,
        _trust: Trust,
    ) -> Result<(), String> {
        preflight(runner, &self.adapter, self.model.as_deref())
    }

    fn run<'a>(
        &'a self,
        runner: &'a GateRunner,
        gate: Named<'a>,
        _anchor: &'a WorkspaceAnchor,
        ctx: &'a GateContext,
    ) -> BoxFuture<'a, Measured> {
        Box::pin(async move {
            let material = super::judge_material(ctx);
            (run(runner, gate, self, material.as_deref()).await, None)
        })
    }
}

/// One judge run: the adapter to use and the rubric or prompt to send.
#[derive(Debug, Clone)]
pub(crate) struct JudgeRequest<'a> {
    pub label: String,
    pub adapter: &'a str,
    pub model: Option<&'a str>,
    pub rubric: &'a str,
    pub context: Option<&'a str>,
    pub timeout: std::time::Duration,
    pub nonce: bool,
}

/// The environment an adapter starts from: the base one and the host
/// variables its configuration passes.
fn adapter_env(
    adapter: &crate::config::Adapter,
    host_path: Option<&std::ffi::OsStr>,
) -> Vec<(OsString, OsString)> {
    let mut env = base_env(host_path);
    for var in &adapter.env {
        if let Some(v) = std::env::var_os(var) {
            env.push((OsString::from(var), v));
        }
    }
    env
}

/// What an adapter may read: its configured grants, the directory of its
/// program (a script's package), every absolute path its
/// (operator-written) command names, and the directories its
/// passed-through environment names (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`
/// …). Host-private paths are carved out of all of them by the sandbox.
fn adapter_read(
    adapter: &crate::config::Adapter,
    program: &std::path::Path,
    argv: &[String],
    env: &[(OsString, OsString)],
) -> Vec<PathBuf> {
    let mut read = adapter.read.clone();
    if let Some(dir) = std::fs::canonicalize(program)
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
    {
        read.push(dir);
    }
    read.extend(
        argv.iter()
            .skip(1)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.exists()),
    );
    read.extend(
        env.iter()
            .filter(|(k, _)| {
                let k = k.to_string_lossy();
                k.ends_with("_DIR") || k.ends_with("_HOME") || k.ends_with("_PATH")
            })
            .map(|(_, v)| PathBuf::from(v))
            .filter(|p| p.is_absolute() && p.exists()),
    );
    read
}

/// Why the sandbox would keep the adapter's program (or what it runs)
/// from running, with its grants `read`.
fn unreached(
    runner: &GateRunner,
    name: &str,
    program: &std::path::Path,
    read: &[PathBuf],
) -> Option<String> {
    let config = runner.config();
    let lookup = Lookup::host(config.host_path.as_deref());
    let u =
        runner
            .sandbox()
            .unreached(&format!("judge adapter '{name}'"), program, read, &lookup)?;
    let why = format!(
        "judge adapter '{name}': {}",
        u.message(&super::config_shown(config))
    );
    // Debug only: the refusal is the gate's `error` verdict, reported by
    // its caller.
    tracing::debug!(adapter = name, program = %program.display(), reason = %why, "a judge adapter is out of the sandbox's reach");
    Some(why)
}

/// The sandbox's part of `preflight`, for the check that runs before any
/// gate does: `None` when the adapter is not usable anyway (its run says
/// why).
pub(super) fn reach(runner: &GateRunner, name: &str, model: Option<&str>) -> Option<String> {
    let config = runner.config();
    let adapter = config.adapters.get(name)?;
    let argv = adapter.argv(name, model).ok()?;
    let program = resolve_program(argv.first()?, config.host_path.as_deref())?;
    let env = adapter_env(adapter, config.host_path.as_deref());
    let read = adapter_read(adapter, &program, &argv, &env);
    unreached(runner, name, &program, &read)
}

/// Runs one judge gate. `context` is the material to judge, if any.
pub(super) fn preflight(
    runner: &GateRunner,
    name: &str,
    model: Option<&str>,
) -> Result<(), String> {
    let config = runner.config();
    let Some(adapter) = config.adapters.get(name) else {
        let known: Vec<&str> = config.adapters.keys().map(String::as_str).collect();
        return Err(format!(
            "judge adapter '{name}' is not configured (configured: {})",
            known.join(", ")
        ));
    };
    let argv = adapter.argv(name, model)?;
    let program = argv
        .first()
        .ok_or_else(|| format!("judge adapter '{name}' has an empty command"))?;
    let Some(found) = resolve_program(program, config.host_path.as_deref()) else {
        return Err(format!(
            "judge adapter '{name}': program '{program}' was not found on the host PATH"
        ));
    };
    let env = adapter_env(adapter, config.host_path.as_deref());
    if let Some(why) = unreached(
        runner,
        name,
        &found,
        &adapter_read(adapter, &found, &argv, &env),
    ) {
        return Err(why);
    }
    Ok(())
}

async fn run(
    runner: &GateRunner,
    named: Named<'_>,
    judge: &JudgeGate,
    context: Option<&str>,
) -> Verdict {
    let request = JudgeRequest {
        label: named.label.to_string(),
        adapter: &judge.adapter,
        model: judge.model.as_deref(),
        rubric: &judge.prompt,
        context,
        timeout: GateKind::timeout(judge),
        nonce: judge.nonce,
    };
    run_request(runner, request).await.verdict
}

/// A judge's verdict and, when it gave one, its decision.
#[derive(Debug, Clone)]
pub(crate) struct JudgedVerdict {
    pub verdict: Verdict,
    pub decision: Option<Decision>,
}

impl From<Verdict> for JudgedVerdict {
    fn from(verdict: Verdict) -> Self {
        JudgedVerdict {
            verdict,
            decision: None,
        }
    }
}

/// Runs a judge: builds the prompt, waits for a slot, runs the adapter
/// under supervision and reads the verdict. Shared by judge gates and the
/// `judge` import of WASM plugins.
pub(crate) async fn run_request(runner: &GateRunner, req: JudgeRequest<'_>) -> JudgedVerdict {
    let label = req.label.clone();
    let config = runner.config();
    let name = req.adapter;
    let Some(adapter) = config.adapters.get(name) else {
        let known: Vec<&str> = config.adapters.keys().map(String::as_str).collect();
        return Verdict::error(
            label,
            format!(
                "judge adapter '{name}' is not configured (configured: {})",
                known.join(", ")
            ),
        )
        .into();
    };
    let argv = match adapter.argv(name, req.model) {
        Ok(a) => a,
        Err(reason) => return Verdict::error(label, reason).into(),
    };
    let Some(program) = resolve_program(&argv[0], config.host_path.as_deref()) else {
        return Verdict::error(
            label,
            format!(
                "judge adapter '{name}': program '{}' was not found on the host PATH",
                argv[0]
            ),
        )
        .into();
    };
    let nonce = req.nonce.then(random_token);
    let context = req
        .context
        .map(|c| cap_context(c, config.max_context_bytes));
    let prompt_text = prompt::build(
        req.rubric,
        context.as_deref(),
        nonce.as_deref(),
        &random_token(),
    );

    let env = adapter_env(adapter, config.host_path.as_deref());
    let args: Vec<OsString> = argv[1..].iter().map(OsString::from).collect();
    let read = adapter_read(adapter, &program, &argv, &env);
    let mut env = env;
    if let Some(why) = unreached(runner, name, &program, &read) {
        return Verdict::error(label, why).into();
    }
    let grants = Grants {
        read,
        write: adapter.write.clone(),
        network: adapter.network,
    };
    // Never in the workspace: an LLM CLI reads instructions, settings and
    // hooks from its working directory (CLAUDE.md, .claude/, AGENTS.md …),
    // which the agent could write. The judge starts in an empty private
    // directory; the workspace reaches it only through the prompt.
    let prepared = match runner.sandbox().prepare(&program, Place::Judge, &grants) {
        Ok(p) => p,
        Err(e) => return Verdict::error(label, e.to_string()).into(),
    };
    let Some(cwd) = prepared.scratch.as_ref().map(|s| s.cwd()) else {
        return Verdict::error(label, "no private directory for the judge").into();
    };
    env.extend(prepared.env.iter().cloned());
    // What the adapter may reach besides the base grants, for telling a
    // refusal of the sandbox from the adapter's own failure.
    let mut reached = grants.read.clone();
    reached.extend(grants.write.iter().cloned());
    reached.push(program.clone());
    reached.extend(prepared.scratch.as_ref().map(|s| s.dir_path()));
    let timeout = req.timeout;
    let scratch_tmp = prepared.scratch.as_ref().map(|s| s.tmp());
    let queued_at = Instant::now();
    let Ok(permit) = runner.acquire_judge_slot().await else {
        return Verdict::error(label, "the judge slots are closed; no judge can start").into();
    };
    let queued = queued_at.elapsed();
    let run = runner
        .supervisor()
        .run(ProcessSpec {
            program: &program,
            args: &args,
            cwd: &cwd,
            env: &env,
            stdin: Some(prompt_text.into_bytes()),
            limits: Limits {
                timeout,
                grace: config.kill_grace,
                output_cap: config.output_cap,
                gate: config.gate_limits,
            },
            confine: prepared.plan.as_ref(),
            scratch: scratch_tmp.as_deref(),
            overlay: None,
        })
        .await;
    // The process is reaped and its tree killed: the slot is free again.
    drop(permit);
    drop(prepared);

    let run = match run {
        Ok(r) => r,
        Err(e) => {
            let mut v = Verdict::error(
                label,
                format!(
                    "judge adapter '{name}' failed to start: {}",
                    super::shell::spawn_refusal(runner, &program, &e, || {
                        unreached(runner, name, &program, &grants.read)
                    })
                ),
            );
            v.durations = Durations::new(queued, std::time::Duration::ZERO);
            return v.into();
        }
    };
    let stdout_text = String::from_utf8_lossy(&run.stdout.clone().into_bytes()).into_owned();
    let mut decision = None;
    // A limit the adapter's tree hit makes the run an error whatever it
    // printed: its answer may come from a cut-short run.
    let hit = run.limits.describe();
    let also = hit.as_ref().map(|h| format!("; {h}")).unwrap_or_default();
    let (outcome, reason) = if run.timed_out {
        (
            Outcome::Fail,
            format!(
                "judge timed out after {} (its process tree was killed){also}",
                super::human_duration(timeout)
            ),
        )
    } else {
        match run.termination {
            Termination::Exited(0) if hit.is_some() => (
                Outcome::Error,
                format!(
                    "judge adapter '{name}' exited with code 0, but {}",
                    hit.unwrap_or_default()
                ),
            ),
            Termination::Exited(0) => {
                let parsed = prompt::parse(&stdout_text, nonce.as_deref());
                decision = parsed.decision;
                match parsed.decision {
                    Some(Decision::Pass) => (Outcome::Pass, "judge said PASS".to_string()),
                    Some(Decision::Fail) => (Outcome::Fail, "judge said FAIL".to_string()),
                    None if parsed.without_nonce > 0 => (
                        Outcome::Fail,
                        format!(
                            "judge gave no verdict ({} verdict line(s) without this run's nonce were ignored)",
                            parsed.without_nonce
                        ),
                    ),
                    None if run.stdout.truncated() => (
                        Outcome::Fail,
                        "judge gave no verdict in the kept tail of its output (output was cut)"
                            .to_string(),
                    ),
                    None => (Outcome::Fail, "judge gave no verdict".to_string()),
                }
            }
            Termination::Exited(code) => {
                let refused = matches!(code, 126 | 127)
                    .then(|| super::shell::refused_at_run(runner, &run.stderr, &reached))
                    .flatten()
                    .map(|p| {
                        format!(
                            ": {}",
                            crate::sandbox::reach::denied_message(&p, &super::config_shown(config))
                        )
                    })
                    .unwrap_or_default();
                (
                    Outcome::Error,
                    format!("judge adapter '{name}' exited with code {code}{also}{refused}"),
                )
            }
            Termination::Signaled(sig) => (
                Outcome::Error,
                format!(
                    "judge adapter '{name}' was killed by signal {sig} ({}){also}",
                    signal_name(sig)
                ),
            ),
            Termination::Unreaped => (
                Outcome::Error,
                format!("judge adapter '{name}' could not be reaped after SIGKILL"),
            ),
        }
    };
    let mut v = Verdict::new(outcome, label, reason);
    fill_process_details(&mut v, run, queued);
    JudgedVerdict {
        verdict: v,
        decision,
    }
}

fn resolve_program(program: &str, host_path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return (p.is_absolute() && p.is_file()).then_some(p);
    }
    find_on_path(program, host_path)
}

/// A fresh random token (128 bits, hex) for nonces and boundaries.
fn random_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Keeps the head of an over-long context, on a char boundary, and says so.
fn cap_context(context: &str, max: usize) -> String {
    if context.len() <= max {
        return context.to_string();
    }
    let mut end = max;
    while !context.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[... {} more bytes of material were cut by gatehost ...]\n",
        &context[..end],
        context.len() - end
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_is_capped_on_a_char_boundary() {
        let s = "é".repeat(10); // 20 bytes
        let c = cap_context(&s, 5);
        assert!(c.starts_with("éé"));
        assert!(c.contains("16 more bytes"), "{c}");
        assert_eq!(cap_context("short", 100), "short");
    }

    #[test]
    fn tokens_are_random_and_hex() {
        let (a, b) = (random_token(), random_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
