//! Where gatehost's hooks are registered, for `gatehost doctor`: the
//! entries of each CLI's files of the user and project scopes, and of its
//! managed (system) settings where it has them, that run `gatehost hook`
//! (gatehost's OpenCode plugin, the command written in it), and what is
//! wrong across them (one event registered twice, Cursor running Claude
//! Code's project hooks beside its own). It reads files; it must never run
//! a command or change a file.

use super::super::error::CliResult;
use super::{AgentReport, Finding, Registration};
use crate::hook::AgentCli;
use crate::hook::install::{gatehost_hooks, is_gatehost_plugin, plugin_command};
use crate::hook::plan::{Dirs, Scope};
use std::path::{Path, PathBuf};

/// gatehost's hooks in `agent`'s files of both scopes.
pub(super) fn registrations(
    agent: AgentCli,
    project: &Path,
    findings: &mut Vec<Finding>,
) -> CliResult<Vec<Registration>> {
    let adapter = crate::hook::adapter(agent);
    let layout = adapter.layout();
    let dirs = Dirs::new(project);
    let mut scoped: Vec<(&'static str, PathBuf)> = Vec::new();
    for (scope, name) in [(Scope::User, "user"), (Scope::Project, "project")] {
        for file in adapter.registered_files(scope, &dirs)? {
            scoped.push((name, file));
        }
    }
    let env = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty());
    scoped.extend(
        adapter
            .managed_files(&env, &list_json)
            .into_iter()
            .map(|f| ("managed", f)),
    );
    // One file read from two scopes (the project is the home directory:
    // `~/.claude/settings.json` is both) is one file: counted once, under
    // the first scope, compared by its device and inode.
    let mut seen: Vec<(u64, u64)> = Vec::new();
    scoped.retain(|(_, file)| {
        use std::os::unix::fs::MetadataExt;
        let Ok(m) = std::fs::metadata(file) else {
            return true;
        };
        let id = (m.dev(), m.ino());
        if seen.contains(&id) {
            return false;
        }
        seen.push(id);
        true
    });
    let mut out = Vec::new();
    for (name, file) in scoped {
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
        if adapter.hooks_in_plugin() {
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

/// An event with more than one gatehost registration that runs: across
/// files, except for a CLI that runs one file's hooks only
/// ([`crate::hook::Adapter::runs_one_file`]: Kiro CLI runs one agent's), so
/// only one file's own doubles count there.
pub(super) fn duplicates(agent: AgentCli, registrations: &[Registration]) -> Vec<Finding> {
    let per_file = crate::hook::adapter(agent).runs_one_file();
    let key = |r: &Registration| (r.event.clone(), per_file.then(|| r.file.clone()));
    let mut keys: Vec<(String, Option<PathBuf>)> = registrations.iter().map(key).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .filter_map(|(event, file)| {
            let files: Vec<PathBuf> = registrations
                .iter()
                .filter(|r| r.event == event && file.as_ref().is_none_or(|f| &r.file == f))
                .map(|r| r.file.clone())
                .collect();
            (files.len() > 1).then(|| Finding::Duplicate {
                agent: agent.name().to_string(),
                event: event.clone(),
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

/// The `.json` files of `dir` (not hidden ones), sorted by name, as Claude
/// Code reads its drop-ins; none if it cannot be listed.
fn list_json(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".json") && !n.starts_with('.'))
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    /// The managed files of `agent`, as its adapter names them.
    fn managed_files(
        agent: AgentCli,
        env: &dyn Fn(&str) -> Option<OsString>,
        list: &dyn Fn(&Path) -> Vec<PathBuf>,
    ) -> Vec<PathBuf> {
        crate::hook::adapter(agent).managed_files(env, list)
    }

    fn no_env(_: &str) -> Option<OsString> {
        None
    }

    #[test]
    fn managed_settings_are_the_system_places_or_what_the_clis_own_variables_name() {
        let drop_ins = |d: &Path| vec![d.join("10-gatehost.json")];
        assert_eq!(
            managed_files(AgentCli::Claude, &no_env, &drop_ins),
            [
                PathBuf::from("/etc/claude-code/managed-settings.json"),
                PathBuf::from("/etc/claude-code/managed-settings.d/10-gatehost.json"),
            ]
        );
        let env = |v: &str| match v {
            "CLAUDE_CODE_MANAGED_SETTINGS_PATH" => Some(OsString::from("/srv/policy")),
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH" => Some(OsString::from("/srv/gemini.json")),
            "QWEN_CODE_SYSTEM_SETTINGS_PATH" => Some(OsString::from("/srv/qwen.json")),
            _ => None,
        };
        let none = |_: &Path| Vec::new();
        assert_eq!(
            managed_files(AgentCli::Claude, &env, &none),
            [PathBuf::from("/srv/policy/managed-settings.json")]
        );
        assert_eq!(
            managed_files(AgentCli::Gemini, &env, &none),
            [PathBuf::from("/srv/gemini.json")]
        );
        assert_eq!(
            managed_files(AgentCli::Qwen, &no_env, &none),
            [PathBuf::from("/etc/qwen-code/settings.json")]
        );
        assert_eq!(
            managed_files(AgentCli::Cursor, &no_env, &none),
            [PathBuf::from("/etc/cursor/hooks.json")]
        );
        for agent in [
            AgentCli::Codex,
            AgentCli::Copilot,
            AgentCli::Opencode,
            AgentCli::Kiro,
        ] {
            assert!(
                managed_files(agent, &env, &drop_ins).is_empty(),
                "{agent:?}"
            );
        }
    }

    #[test]
    fn drop_ins_are_the_visible_json_files_in_name_order() {
        let d = tempfile::tempdir().expect("tempdir");
        for n in ["20-b.json", "10-a.json", ".hidden.json", "notes.txt"] {
            std::fs::write(d.path().join(n), "{}").expect("write");
        }
        let names: Vec<String> = list_json(d.path())
            .iter()
            .filter_map(|p| p.file_name()?.to_str().map(String::from))
            .collect();
        assert_eq!(names, ["10-a.json", "20-b.json"]);
        assert!(list_json(&d.path().join("absent")).is_empty());
    }
}
