//! The shell gate: an allowlisted program run by argv in the workspace.
//!
//! The command must resolve to exactly a program of the host's allowlist,
//! with arguments its entry's rule admits and setting only variables its
//! entry lists (for gates the agent wrote), and
//! must not live inside the workspace; the cwd is resolved through the
//! workspace anchor; the process runs confined by the sandbox. Exit 0 is `pass`; any other exit, a signal or the
//! timeout is `fail`; a refused command or cwd, or a program the sandbox
//! would not let run (`sandbox::reach`), is `error` before anything runs;
//! an exit of 126 or 127 whose stderr says a path outside the gate's
//! grants was "Permission denied" is `error` (the gate could not run),
//! never `fail`.

use super::GateKind;
use super::run::{BoxFuture, Measured, Named, RunGate};
use super::spec::{GateEnv, ShellGate};
use super::{GateContext, GateRunner, base_env, fill_process_details, human_duration, signal_name};
use crate::anchor::WorkspaceAnchor;
use crate::config::{AllowEntry, Trust};
use crate::sandbox::{Grants, Lookup, Place};
use crate::supervise::{Limits, ProcessSpec, Termination};
use crate::verdict::{Outcome, Verdict};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

impl RunGate for ShellGate {
    fn reach(&self, runner: &GateRunner, trust: Trust) -> Option<String> {
        reach(runner, self, trust)
    }

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
        Box::pin(async move { (run(runner, gate, self, anchor, ctx.trust).await, None) })
    }
}

/// What a shell gate may run: the program, the allowlist entry that
/// admitted it (its grants) and the complete environment.
struct Admitted<'r> {
    program: PathBuf,
    entry: &'r AllowEntry,
    env: Vec<(OsString, OsString)>,
}

/// Admits a gate, or says why it may not run. Shared by `preflight` and
/// `run`, so attach refuses exactly what a run would.
fn admit<'r>(
    runner: &'r GateRunner,
    gate: &ShellGate,
    anchor: &WorkspaceAnchor,
    trust: Trust,
) -> Result<Admitted<'r>, String> {
    let config = runner.config();
    // The names the gate sets (not those it passes through from the host:
    // `[shell] pass_env` is the operator's list, and the values the host's).
    let set_env: Vec<&str> = match &gate.env {
        GateEnv::Set(values) => values.keys().map(String::as_str).collect(),
        GateEnv::PassThrough(_) => Vec::new(),
    };
    let (program, entry) = config
        .allow
        .admit_with_args(&gate.command, &gate.args, &set_env, trust)
        .map_err(|e| e.to_string())?;
    match anchor.holds_host_path(&program) {
        Ok(false) => {}
        Ok(true) => {
            return Err(format!(
                "command '{}' resolves to {}, inside the workspace, where the agent can change it",
                gate.command,
                program.display()
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "command '{}' resolves to {}, which does not exist: install it, or correct its [shell] allow entry in {}",
                gate.command,
                program.display(),
                super::config_shown(config)
            ));
        }
        Err(e) => {
            return Err(format!(
                "command '{}' resolves to {}, which cannot be read ({e}): a gate runs only a program it can check is outside the workspace",
                gate.command,
                program.display()
            ));
        }
    }
    if let Some(why) = unreached(runner, &gate.command, &program) {
        return Err(why);
    }
    let mut env = base_env(config.host_path.as_deref());
    match &gate.env {
        GateEnv::PassThrough(names) => {
            for n in names {
                if !config.pass_env.iter().any(|p| p == n) {
                    return Err(format!(
                        "env: '{n}' is not a variable the host passes to gates ([shell] pass_env)"
                    ));
                }
                if let Some(v) = std::env::var_os(n) {
                    env.push((OsString::from(n), v));
                }
            }
        }
        GateEnv::Set(values) => {
            for (k, v) in values {
                if !crate::sandbox::settable_env_name(std::ffi::OsStr::new(k)) {
                    return Err(format!(
                        "env: '{k}' is set by gatehost and cannot be set by a gate"
                    ));
                }
                env.retain(|(name, _)| name != k.as_str());
                env.push((OsString::from(k), OsString::from(v)));
            }
        }
    }
    Ok(Admitted {
        program,
        entry,
        env,
    })
}

/// Why the sandbox would keep `program` (or what it runs: its `#!`
/// interpreter, a version manager's tree) from running, if it would.
fn unreached(runner: &GateRunner, command: &str, program: &Path) -> Option<String> {
    let config = runner.config();
    let lookup = Lookup::host(config.host_path.as_deref());
    let u = runner.sandbox().unreached(command, program, &[], &lookup)?;
    let why = u.message(&super::config_shown(config));
    // Debug only: the refusal is the gate's `error` verdict, which its
    // caller reports (check's line, the daemon's policy log and event).
    tracing::debug!(command, program = %program.display(), reason = %why, "a gate's program is out of the sandbox's reach");
    Some(why)
}

/// The sandbox's part of `admit`, for the check that runs before any gate
/// does: `None` when the gate's command is not admitted (its run says why).
fn reach(runner: &GateRunner, gate: &ShellGate, trust: Trust) -> Option<String> {
    let set_env: Vec<&str> = match &gate.env {
        GateEnv::Set(values) => values.keys().map(String::as_str).collect(),
        GateEnv::PassThrough(_) => Vec::new(),
    };
    let (program, _) = runner
        .config()
        .allow
        .admit_with_args(&gate.command, &gate.args, &set_env, trust)
        .ok()?;
    unreached(runner, &gate.command, &program)
}

fn preflight(
    runner: &GateRunner,
    gate: &ShellGate,
    anchor: &WorkspaceAnchor,
    trust: Trust,
) -> Result<(), String> {
    admit(runner, gate, anchor, trust)?;
    anchor
        .open_dir(Path::new(gate.cwd.as_deref().unwrap_or(".")))
        .map_err(|e| format!("cwd: {e}"))?;
    Ok(())
}

async fn run(
    runner: &GateRunner,
    named: Named<'_>,
    gate: &ShellGate,
    anchor: &WorkspaceAnchor,
    trust: Trust,
) -> Verdict {
    let label = named.label.to_string();
    let config = runner.config();
    let Admitted {
        program,
        entry,
        mut env,
    } = match admit(runner, gate, anchor, trust) {
        Ok(a) => a,
        Err(e) => return Verdict::error(label, e),
    };
    let cwd = match anchor.open_dir(Path::new(gate.cwd.as_deref().unwrap_or("."))) {
        Ok(d) => d,
        Err(e) => return Verdict::error(label, format!("cwd: {e}")),
    };
    let args: Vec<OsString> = gate.args.iter().map(OsString::from).collect();
    let prepared = match runner.sandbox().prepare(
        &program,
        Place::Workspace(anchor),
        &Grants {
            network: entry.network,
            ..Grants::default()
        },
    ) {
        Ok(p) => p,
        Err(e) => return Verdict::error(label, e.to_string()),
    };
    env.extend(prepared.env.iter().cloned());
    // What the gate may reach besides the base grants, for telling a
    // refusal of the sandbox from the gate's own failure.
    let mut reached = vec![program.clone(), anchor.root().to_path_buf()];
    reached.extend(prepared.scratch.as_ref().map(|s| s.tmp()));
    let timeout = GateKind::timeout(gate);
    let scratch_tmp = prepared.scratch.as_ref().map(|s| s.tmp());
    let run = runner
        .supervisor()
        .run(ProcessSpec {
            program: &program,
            args: &args,
            cwd: &cwd.proc_path(),
            env: &env,
            stdin: None,
            limits: Limits {
                timeout,
                grace: config.kill_grace,
                output_cap: config.output_cap,
                gate: config.gate_limits,
            },
            confine: prepared.plan.as_ref(),
            scratch: scratch_tmp.as_deref(),
            overlay: anchor.overlay().map(|o| (o, cwd.relative())),
        })
        .await;
    drop(prepared);
    let run = match run {
        Ok(r) => r,
        Err(e) => {
            let why = || unreached(runner, &gate.command, &program);
            return Verdict::error(label, spawn_refusal(runner, &program, &e, why));
        }
    };
    let strays = if run.strays_killed > 0 {
        format!(" ({} leftover process(es) killed)", run.strays_killed)
    } else {
        String::new()
    };
    // A limit the tree hit (memory, processes, a file's size) is named,
    // and makes even a clean exit a fail: the gate ran and what it checked
    // may have been cut short.
    let hit = run.limits.describe();
    let refused = match run.termination {
        Termination::Exited(126 | 127) => refused_at_run(runner, &run.stderr, &reached),
        _ => None,
    };
    // A write that failed for space in a bounded scratch: the bound is
    // named (a hint only: it comes from the gate's own output, so it never
    // changes the outcome).
    let scratch_full = run
        .scratch_bytes
        .filter(|_| says_no_space(&run.stdout) || says_no_space(&run.stderr))
        .map(crate::supervise::scratch_hint);
    let also: String = hit
        .iter()
        .chain(scratch_full.iter())
        .map(|h| format!("; {h}"))
        .collect();
    let (outcome, reason) = if run.timed_out {
        (
            Outcome::Fail,
            format!(
                "timed out after {} (the process tree was killed){also}",
                human_duration(timeout)
            ),
        )
    } else {
        match run.termination {
            Termination::Exited(0) if hit.is_some() => (
                Outcome::Fail,
                format!(
                    "exited with code 0{strays}, but {}",
                    hit.unwrap_or_default()
                ),
            ),
            Termination::Exited(0) => (Outcome::Pass, format!("exited with code 0{strays}")),
            // A program the sandbox would not let it run is not a red
            // test: the gate could not run (see docs/security.md).
            Termination::Exited(code @ (126 | 127)) if refused.is_some() => (
                Outcome::Error,
                format!(
                    "exited with code {code}{strays}: {}",
                    refused.as_deref().map_or_else(String::new, |p| {
                        crate::sandbox::reach::denied_message(p, &super::config_shown(config))
                    })
                ),
            ),
            Termination::Exited(code) => (
                Outcome::Fail,
                format!("exited with code {code}{strays}{also}"),
            ),
            Termination::Signaled(sig) => (
                Outcome::Fail,
                format!(
                    "killed by signal {sig} ({}){strays}{also}",
                    signal_name(sig)
                ),
            ),
            Termination::Unreaped => (
                Outcome::Error,
                format!("the process could not be reaped after SIGKILL{also}"),
            ),
        }
    };
    if outcome == Outcome::Error {
        tracing::warn!(gate = %label, reason = %reason, "a shell gate could not run");
    }
    let mut v = Verdict::new(outcome, label, reason);
    fill_process_details(&mut v, run, Duration::ZERO);
    v
}

/// Whether a gate's output says a write failed for want of space
/// (`ENOSPC`, as libc words it).
pub(super) fn says_no_space(out: &crate::supervise::TailBuffer) -> bool {
    out.contains(b"No space left on device")
}

/// The path outside the sandbox's grants a gate's stderr says was
/// "Permission denied", if any.
pub(super) fn refused_at_run(
    runner: &GateRunner,
    stderr: &crate::supervise::TailBuffer,
    reached: &[PathBuf],
) -> Option<PathBuf> {
    let text = String::from_utf8_lossy(&stderr.clone().into_bytes()).into_owned();
    runner.sandbox().denied_outside(&text, reached)
}

/// A spawn that failed: where the kernel said EACCES and gates are
/// confined, what of the program the sandbox does not reach.
/// `why` finds what (with the gate's grants).
pub(super) fn spawn_refusal(
    runner: &GateRunner,
    program: &Path,
    e: &crate::supervise::SpawnError,
    why: impl FnOnce() -> Option<String>,
) -> String {
    let eacces = matches!(e, crate::supervise::SpawnError::Start { source, .. }
        if source.raw_os_error() == Some(libc::EACCES));
    if eacces && runner.sandbox().confines() {
        if let Some(why) = why() {
            return format!("{e}: {why}");
        }
        return format!(
            "{e}: the sandbox may not let gates execute what {} needs (its #! interpreter?): \
             add its directory to [sandbox] read in {}",
            program.display(),
            super::config_shown(runner.config())
        );
    }
    e.to_string()
}
