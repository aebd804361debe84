//! Standalone hooks (`gatehost hook AGENT --gates FILE`): the gates run in
//! the hook's process, in the hook's `cwd`, as `gatehost check` runs them;
//! the agent's last message is the context and, for judges and plugins, the
//! workspace's change against `HEAD` (computed in process) is the change.
//!
//! It owns turning a gate run into the decision's [`Input`]. It must never
//! turn anything unclear into a pass: an unreadable file, a gate that could
//! not run or a run past the budget is [`Input::Error`].

use super::super::check::{gate_runtime, load_operator_files};
use crate::anchor::WorkspaceAnchor;
use crate::engine::render_nudge;
use crate::gate::{GateContext, GateRunner, GateSpec};
use crate::hook::HookInput;
use crate::hook::decide::Input;
use crate::verdict::Outcome;
use std::path::Path;
use std::time::Instant;

/// Runs the gates against the hook's workspace, by `deadline`.
pub(super) fn verdict(
    args: &super::HookArgs,
    gates: &Path,
    input: &HookInput,
    deadline: Instant,
) -> Input {
    let anchor = match WorkspaceAnchor::open(&input.cwd) {
        Ok(a) => a,
        Err(e) => return Input::Error(format!("the hook's cwd {}: {e}", input.cwd.display())),
    };
    let (config, specs) =
        match load_operator_files(args.config.as_deref(), gates, "--gates", &anchor, false) {
            Ok(loaded) => loaded,
            Err(e) => return Input::Error(e.message),
        };
    let text = input.last_message.clone().or_else(|| {
        input
            .transcript_path
            .as_deref()
            .and_then(crate::hook::transcript::last_assistant_message)
    });
    // Shell gates see the workspace itself; only judges and plugins are
    // given the change, so a shell-only hook never opens the repository.
    let changes = if specs.iter().all(|g| matches!(g, GateSpec::Shell(_)))
        || !anchor.root().join(".git").exists()
    {
        None
    } else {
        match crate::commit::workspace_changes(anchor.root()) {
            Ok(c) => Some(c),
            Err(e) => {
                return Input::Error(format!(
                    "cannot compute the workspace's change against HEAD: {e}"
                ));
            }
        }
    };
    let context = GateContext {
        text,
        changes,
        trust: crate::config::Trust::Operator,
        session_id: Some(input.session_id.clone()),
        ..GateContext::default()
    };
    let runtime = match gate_runtime(&specs) {
        Ok(r) => r,
        Err(e) => return Input::Error(e.message),
    };
    let template = config.daemon.default_nudge.clone();
    let budget = deadline.saturating_duration_since(Instant::now());
    let report = runtime.block_on(async {
        let runner = GateRunner::one_shot(config);
        if specs.iter().any(GateSpec::is_native) {
            runner.sandbox().log_state();
        }
        tokio::time::timeout(budget, runner.run_gates(&specs, &anchor, &context)).await
    });
    // Dropping the runtime drops a gate cut short by the budget, and its
    // supervisor kills its process tree.
    drop(runtime);
    match report {
        Err(_) => Input::Error(format!(
            "the gates did not finish within the hook's budget of {}",
            crate::gate::human_duration(budget)
        )),
        Ok(report) => match report.outcome {
            Outcome::Pass => Input::Pass,
            Outcome::Fail => Input::Fail(render_nudge(&template, &report)),
            Outcome::Error => Input::Error(render_nudge("{gate}: {reason}\n{output}", &report)),
        },
    }
}
