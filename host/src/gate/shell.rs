//! The shell gate: an allowlisted program run by argv in the workspace.
//!
//! The command must resolve to exactly a program of the host's allowlist
//! and must not live inside the workspace; the cwd is resolved through the
//! workspace anchor. Exit 0 is `pass`; any other exit, a signal or the
//! timeout is `fail`; a refused command or cwd is `error` before anything
//! runs.

use super::{GateRunner, base_env, fill_process_details, human_duration, signal_name};
use crate::anchor::WorkspaceAnchor;
use crate::gate::spec::{GateEnv, GateSpec, ShellGate};
use crate::supervise::{Limits, ProcessSpec, Termination};
use crate::verdict::{Outcome, Verdict};
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

pub(super) fn preflight(
    runner: &GateRunner,
    gate: &ShellGate,
    anchor: &WorkspaceAnchor,
) -> Result<(), String> {
    let program = runner
        .config()
        .allow
        .admit(&gate.command)
        .map_err(|e| e.to_string())?;
    if anchor.contains_host_path(&program) {
        return Err(format!(
            "command '{}' resolves to {}, inside the workspace, where the agent can change it",
            gate.command,
            program.display()
        ));
    }
    anchor
        .open_dir(Path::new(gate.cwd.as_deref().unwrap_or(".")))
        .map_err(|e| format!("cwd: {e}"))?;
    Ok(())
}

pub(super) async fn run(
    runner: &GateRunner,
    spec: &GateSpec,
    gate: &ShellGate,
    anchor: &WorkspaceAnchor,
) -> Verdict {
    let label = spec.label();
    let config = runner.config();
    let program = match config.allow.admit(&gate.command) {
        Ok(p) => p,
        Err(e) => return Verdict::error(label, e.to_string()),
    };
    if anchor.contains_host_path(&program) {
        return Verdict::error(
            label,
            format!(
                "command '{}' resolves to {}, inside the workspace, where the agent can change it",
                gate.command,
                program.display()
            ),
        );
    }
    let cwd = match anchor.open_dir(Path::new(gate.cwd.as_deref().unwrap_or("."))) {
        Ok(d) => d,
        Err(e) => return Verdict::error(label, format!("cwd: {e}")),
    };
    let mut env = base_env(config.host_path.as_deref());
    match &gate.env {
        GateEnv::PassThrough(names) => {
            for n in names {
                if let Some(v) = std::env::var_os(n) {
                    env.push((OsString::from(n), v));
                }
            }
        }
        GateEnv::Set(values) => {
            for (k, v) in values {
                env.retain(|(name, _)| name != k.as_str());
                env.push((OsString::from(k), OsString::from(v)));
            }
        }
    }
    let args: Vec<OsString> = gate.args.iter().map(OsString::from).collect();
    let timeout = spec.timeout();
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
            },
        })
        .await;
    let run = match run {
        Ok(r) => r,
        Err(e) => return Verdict::error(label, e.to_string()),
    };
    let strays = if run.strays_killed > 0 {
        format!(" ({} leftover process(es) killed)", run.strays_killed)
    } else {
        String::new()
    };
    let (outcome, reason) = if run.timed_out {
        (
            Outcome::Fail,
            format!(
                "timed out after {} (the process tree was killed)",
                human_duration(timeout)
            ),
        )
    } else {
        match run.termination {
            Termination::Exited(0) => (Outcome::Pass, format!("exited with code 0{strays}")),
            Termination::Exited(code) => {
                (Outcome::Fail, format!("exited with code {code}{strays}"))
            }
            Termination::Signaled(sig) => (
                Outcome::Fail,
                format!("killed by signal {sig} ({}){strays}", signal_name(sig)),
            ),
            Termination::Unreaped => (
                Outcome::Error,
                "the process could not be reaped after SIGKILL".to_string(),
            ),
        }
    };
    let mut v = Verdict::new(outcome, label, reason);
    fill_process_details(&mut v, run, Duration::ZERO);
    v
}
