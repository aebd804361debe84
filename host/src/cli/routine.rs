//! `gatehost routine`: start a routine from a JSON file, show a run or
//! the list, cancel a run, answer a step's escalation. Each is one call
//! through the typed client, printed for a person or, with `--json`, as
//! the API's JSON. It must never print an error itself.

use super::client::{ClientArgs, run_client, show};
use super::error::{CliError, CliResult};
use crate::wire::{Routine, RoutineRequest};
use std::path::PathBuf;

pub(super) const AFTER_HELP: &str = "\
A routine file is JSON: {\"label\": \"...\", \"steps\": [STEP, ...]}; a step is
  {\"label\": \"build\", \"prompt\": \"...\",
   \"session\": {\"acp\": {\"command\": [\"gemini\", \"--acp\"], \"cwd\": \"/abs/dir\",
                        \"permission\": {\"allow\": [\"read\"], \"otherwise\": \"escalate\"}}}
              | {\"existing\": \"SESSION-ID\"},
   \"waitFor\": \"turn-end\" | \"policy\" | [\"earlier-step-label\" or \"SESSION-ID\", ...],
   \"policy\": {a POST /v1/policies body without sessionId; with waitFor \"policy\"},
   \"onInput\": {\"mode\": \"auto-allow\", \"prompt\": \"...\", \"max\": 10} | {\"mode\": \"escalate\", \"timeoutSecs\": 300} | {\"mode\": \"fail\"}}
A step is finished when its session ends a turn with a line that is only STEP DONE
(its prompt asks for it); a turn-end without it, or a permission request its rule
escalates, is awaiting input and onInput decides (default: escalate, 300 s).
With waitFor \"policy\" its policy is attached to its session before the prompt;
the step finishes when the policy passes (awaiting-ack or done), fails when it is
blocked or cancelled, and its turn-ends are the policy's to gate and nudge.
A list waitFor starts the step once all those steps and sessions finished.
Resolve takes the operator token; start and cancel the operator token, or the
agent token for a run whose every step is an existing session of its own (its key
in the keyring) and has no policy; status and list either.
Exit codes: 0 done, 2 error.";

#[derive(Debug, clap::Subcommand)]
pub enum RoutineCommand {
    /// Start a routine from its JSON file (`-` reads stdin); prints the
    /// run's id (operator token; the agent token for its own sessions).
    Start {
        #[arg(value_name = "FILE.json")]
        file: PathBuf,
        /// The start's idempotency key: a start repeated with the same key
        /// (a script's retry) answers the run the first one started, never
        /// a second run [default: a new key; the client itself resends it
        /// when an answer is lost].
        #[arg(long, value_name = "KEY")]
        idempotency_key: Option<String>,
    },
    /// A run's state and its steps.
    Status { id: String },
    /// The newest runs, one a line.
    List,
    /// Cancel a run; an agent it started is stopped (operator token; the
    /// agent token for a run on its own sessions).
    Cancel { id: String },
    /// Answer a step's escalation: the response is the step session's next
    /// prompt (operator token).
    Resolve {
        id: String,
        /// The step's label.
        step: String,
        #[arg(long, value_name = "TEXT")]
        response: String,
    },
}

fn read_spec(file: &std::path::Path) -> CliResult<RoutineRequest> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    }
    .map_err(|e| CliError::input(format!("{}: {e}", file.display())).field("FILE.json"))?;
    serde_json::from_str(&text)
        .map_err(|e| CliError::input(format!("{}: {e}", file.display())).field("FILE.json"))
}

/// One line: id, state, the step under way.
fn line(r: &Routine) -> String {
    let step = r
        .steps
        .iter()
        .find(|s| {
            !matches!(
                s.status,
                crate::wire::StepStatus::Done | crate::wire::StepStatus::Pending
            )
        })
        .map(|s| format!(" step {} {}", s.label, s.status.as_str()))
        .unwrap_or_default();
    format!(
        "{} {}{}{}",
        r.id,
        r.phase,
        step,
        r.label
            .as_deref()
            .map(|l| format!(" ({l})"))
            .unwrap_or_default()
    )
}

fn detail(r: &Routine) -> String {
    let mut out = line(r);
    if let Some(reason) = &r.reason {
        out.push_str(&format!("\nreason: {}", reason.as_str()));
    }
    for s in &r.steps {
        out.push_str(&format!(
            "\n  {} {}{}{}",
            s.label,
            s.status.as_str(),
            s.session_id
                .as_deref()
                .map(|id| format!(" session {id}"))
                .unwrap_or_default(),
            if s.restarts > 0 {
                format!(" restarts {}", s.restarts)
            } else {
                String::new()
            }
        ));
    }
    out
}

pub(super) fn run(cmd: RoutineCommand, args: ClientArgs) -> CliResult<i32> {
    let json = args.json;
    run_client(&args, |client| async move {
        match cmd {
            RoutineCommand::Start {
                file,
                idempotency_key,
            } => {
                let spec = read_spec(&file)?;
                let started = client
                    .start_routine_keyed(&spec, idempotency_key.as_deref())
                    .await?;
                show(json, &started, |r| r.id.clone())
            }
            RoutineCommand::Status { id } => show(json, &client.routine(&id).await?, detail),
            RoutineCommand::List => show(json, &client.routines().await?, |l| {
                l.routines.iter().map(line).collect::<Vec<_>>().join("\n")
            }),
            RoutineCommand::Cancel { id } => show(json, &client.cancel_routine(&id).await?, detail),
            RoutineCommand::Resolve { id, step, response } => show(
                json,
                &client.resolve_routine(&id, &step, &response).await?,
                detail,
            ),
        }
    })
}
