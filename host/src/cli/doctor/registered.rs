//! Where gatehost's hooks are registered, for `gatehost doctor`: the
//! entries of each CLI's files of both scopes that run `gatehost hook`
//! (gatehost's OpenCode plugin, the command written in it), and what is
//! wrong across them (one event registered twice, Cursor running Claude
//! Code's project hooks beside its own). It reads files; it must never run
//! a command or change a file.

use super::super::error::CliResult;
use super::super::hook::Scope;
use super::super::hook::install::files;
use super::{AgentReport, Finding, Registration};
use crate::hook::AgentCli;
use crate::hook::install::{Layout, gatehost_hooks, is_gatehost_plugin, plugin_command};
use std::path::{Path, PathBuf};

/// gatehost's hooks in `agent`'s files of both scopes.
pub(super) fn registrations(
    agent: AgentCli,
    project: &Path,
    findings: &mut Vec<Finding>,
) -> CliResult<Vec<Registration>> {
    let layout = match agent {
        AgentCli::Cursor | AgentCli::Copilot => Layout::Flat,
        _ => Layout::Grouped,
    };
    let mut out = Vec::new();
    for (scope, name) in [(Scope::User, "user"), (Scope::Project, "project")] {
        let Some(file) = files(agent, scope, project)?.into_iter().next() else {
            continue;
        };
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                findings.push(Finding::Unreadable {
                    file,
                    problem: e.to_string(),
                });
                continue;
            }
        };
        if agent == AgentCli::Opencode {
            out.extend(plugin_registration(name, &file, &text, findings));
            continue;
        }
        match gatehost_hooks(&text, layout) {
            Ok(hooks) => out.extend(hooks.into_iter().map(|(event, command)| Registration {
                scope: name,
                file: file.clone(),
                event,
                command,
            })),
            Err(e) => findings.push(Finding::Unreadable {
                file,
                problem: e.to_string(),
            }),
        }
    }
    Ok(out)
}

/// gatehost's OpenCode plugin as a registration of `session.idle`: the
/// command written in it (another program's plugin file of that name is
/// not gatehost's, and none written yet is a finding).
fn plugin_registration(
    scope: &'static str,
    file: &Path,
    text: &str,
    findings: &mut Vec<Finding>,
) -> Option<Registration> {
    if !is_gatehost_plugin(text) {
        return None;
    }
    let event = "session.idle".to_string();
    let Some((program, args)) = plugin_command(text) else {
        findings.push(Finding::BadCommand {
            file: file.to_path_buf(),
            event,
            problem:
                "is not written in the plugin: install it with `gatehost hook install opencode`"
                    .into(),
        });
        return None;
    };
    let words: Vec<&str> = std::iter::once(program.as_str())
        .chain(args.iter().map(String::as_str))
        .collect();
    match shlex::try_join(words) {
        Ok(command) => Some(Registration {
            scope,
            file: file.to_path_buf(),
            event,
            command,
        }),
        Err(e) => {
            findings.push(Finding::BadCommand {
                file: file.to_path_buf(),
                event,
                problem: format!("cannot be written as one command line: {e}"),
            });
            None
        }
    }
}

/// An event with more than one gatehost registration.
pub(super) fn duplicates(agent: AgentCli, registrations: &[Registration]) -> Vec<Finding> {
    let mut events: Vec<&str> = registrations.iter().map(|r| r.event.as_str()).collect();
    events.sort_unstable();
    events.dedup();
    events
        .into_iter()
        .filter_map(|event| {
            let files: Vec<PathBuf> = registrations
                .iter()
                .filter(|r| r.event == event)
                .map(|r| r.file.clone())
                .collect();
            (files.len() > 1).then(|| Finding::Duplicate {
                agent: agent.name().to_string(),
                event: event.to_string(),
                files,
            })
        })
        .collect()
}

/// Claude Code's project Stop hook beside a Cursor stop hook.
pub(super) fn cursor_runs_claude(reports: &[AgentReport]) -> Option<Finding> {
    let of = |agent: &str, event: &str, scope: Option<&str>| {
        reports
            .iter()
            .filter(|a| a.agent == agent)
            .flat_map(|a| &a.registrations)
            .find(|r| r.event == event && scope.is_none_or(|s| r.scope == s))
            .map(|r| r.file.clone())
    };
    Some(Finding::CursorRunsClaudeHooks {
        claude: of("claude", "Stop", Some("project"))?,
        cursor: of("cursor", "stop", None)?,
    })
}
