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
use crate::config::HookConfig;
use crate::engine::render_nudge;
use crate::gate::{GateContext, GateRunner, GateSpec};
use crate::hook::AgentCli;
use crate::hook::HookInput;
use crate::hook::decide::Input;
use crate::hook::decide::Notice;
use crate::model::event::{Event, HookEvent, HookNotice};
use crate::store::EventRow;
use crate::verdict::Outcome;
use std::path::Path;
use std::time::{Duration, Instant};

/// Runs the gates against the hook's workspace, by `deadline`; with the
/// `[hook]` settings of the configuration, when it loaded.
pub(super) fn verdict(
    args: &super::HookArgs,
    gates: &Path,
    input: &HookInput,
    deadline: Instant,
) -> (Input, Option<HookConfig>) {
    let mut hook = None;
    let input = run(args, gates, input, deadline, &mut hook);
    (input, hook)
}

fn run(
    args: &super::HookArgs,
    gates: &Path,
    input: &HookInput,
    deadline: Instant,
    hook: &mut Option<HookConfig>,
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
    *hook = Some(config.hook.clone());
    let text = input.last_message.clone().or_else(|| {
        input
            .transcript_path
            .as_deref()
            .and_then(crate::hook::transcript::last_assistant_message)
    });
    // Shell gates see the workspace itself; only judges and plugins are
    // given the change, so a shell-only hook never opens the repository.
    let changes =
        if specs.iter().all(|g| !g.imp().sees_change()) || !anchor.root().join(".git").exists() {
            None
        } else {
            match remembered_changes(args.state_dir.as_deref(), anchor.root(), config.change_caps) {
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

/// The most a notification may hold up the hook's answer.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// Posts `notice` to `[hook] notify_url` (if set), by `deadline` and at
/// most [`NOTIFY_TIMEOUT`]: a notification that cannot be sent is logged,
/// never a change of the answer.
pub(super) fn notify(
    agent: AgentCli,
    hook: &HookConfig,
    input: &HookInput,
    notice: &Notice,
    deadline: Instant,
) {
    let Some(target) = &hook.notify else {
        return;
    };
    let key = match &hook.notify_secret_file {
        Some(p) => match std::fs::read(p) {
            Ok(secret) => Some(crate::webhook::key_of(secret.trim_ascii())),
            Err(e) => {
                tracing::warn!(file = %p.display(), error = %e, "cannot read [hook] notify_secret_file: the notification is not sent");
                return;
            }
        },
        None => None,
    };
    let event = EventRow {
        host: None,
        cursor: 0,
        at: crate::store::now_ms(),
        session_id: Some(input.session_id.clone()),
        policy_id: None,
        event: Event::Hook(hook_event(notice, agent, input)),
        damage: None,
    };
    let left = deadline
        .saturating_duration_since(Instant::now())
        .min(NOTIFY_TIMEOUT);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "cannot start the notification's runtime");
            return;
        }
    };
    crate::webhook::install_tls_provider();
    let client = match reqwest::Client::builder()
        .timeout(left)
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "cannot build the notification's client");
            return;
        }
    };
    let req = crate::webhook::request(
        &client,
        &target.url,
        target.format,
        &event,
        None,
        key.as_deref(),
    );
    match runtime.block_on(async { tokio::time::timeout(left, req.send()).await }) {
        Ok(Ok(resp)) if resp.status().is_success() => {
            tracing::info!(url = %target.url, event = event.kind(), "notified");
        }
        Ok(Ok(resp)) => {
            tracing::warn!(url = %target.url, event = event.kind(), status = %resp.status(), "the notification was refused");
        }
        Ok(Err(e)) => {
            tracing::warn!(url = %target.url, event = event.kind(), error = %e, "cannot send the notification");
        }
        Err(_) => {
            tracing::warn!(url = %target.url, event = event.kind(), "the notification timed out");
        }
    }
}

/// The workspace's change against HEAD, files unchanged since the last
/// stop (by their stat data, remembered in the hook state directory, never
/// in the workspace or `.git`) not read again; the cache saved when it
/// changed. A cache that cannot be kept is logged, never an error.
fn remembered_changes(
    state_dir: Option<&Path>,
    root: &Path,
    caps: crate::change::ChangeCaps,
) -> Result<Vec<crate::change::FileChange>, crate::commit::CommitError> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(state) = crate::hook::state::StateDir::open(state_dir) else {
        return crate::commit::workspace_changes(root, caps);
    };
    let name = blake3::hash(root.as_os_str().as_bytes()).to_hex();
    let file = state
        .path()
        .join("stat-cache")
        .join(format!("{}.bin", &name[..32]));
    let (changes, changed, cache) = crate::commit::workspace_changes_loading(root, caps, || {
        crate::commit::remembered::load(&file, root)
    })?;
    if changed && let Err(e) = crate::commit::remembered::save(&file, root, &cache) {
        tracing::warn!(file = %file.display(), error = %e, "the stat cache could not be saved: the next stop reads every file");
    }
    Ok(changes)
}

/// The notice as the event a receiver reads (`hook:capped`,
/// `hook:gate-error`).
fn hook_event(notice: &Notice, agent: AgentCli, input: &HookInput) -> HookEvent {
    let said = HookNotice {
        agent: agent.name().to_string(),
        session_id: input.session_id.clone(),
        cwd: input.cwd.display().to_string(),
        reason: notice.reason().to_string(),
    };
    match notice {
        Notice::Capped(_) => HookEvent::Capped(said),
        Notice::GateError(_) => HookEvent::GateError(said),
    }
}
