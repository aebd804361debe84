//! `gatehost doctor [AGENT]`: whether the hooks that are installed are the
//! ones that run, and would answer right. For each agent CLI: its version
//! (when it is on PATH), where gatehost's hooks are registered (user,
//! project and managed scope), and, for each registration: that its command runs this
//! gatehost, that its gate file and configuration load (standalone) or its
//! daemon answers (daemon mode), and a dry run of the command as the CLI
//! would run it, its answer checked against the CLI's contract
//! ([`shape::check`]). Registrations of one event twice, and Cursor running
//! Claude Code's project hooks beside its own, are findings too.
//!
//! It owns the checks and their report ([`Finding`]); exit 0 when there is
//! no finding, 1 with the findings. It must never change a CLI's
//! configuration, never report a stop to a daemon (daemon-mode hooks are
//! pinged with an event they do not answer, which contacts no daemon), and
//! never run gates in a workspace: a standalone dry run's stop is in a
//! fresh, empty repository of its own.

mod registered;
mod shape;

use registered::{cursor_runs_claude, duplicates, registrations};

use super::error::{CliError, CliResult};
use super::hook::HookCommand;
use crate::hook::{AgentCli, HookPoint};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a dry run of a hook, or a CLI's `--version`, may take.
const RUN_LIMIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, clap::Args)]
pub struct DoctorArgs {
    /// Only this agent CLI [default: every one].
    #[arg(value_enum, value_name = "AGENT")]
    pub agent: Option<AgentCli>,
    /// The project whose project-scope settings are checked.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub project: PathBuf,
    /// Check the registrations without running them.
    #[arg(long)]
    pub no_run: bool,
    /// The report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub(super) const AFTER_HELP: &str = "\
Exit status: 0 when nothing is wrong, 1 with findings (each named), 2 when the check itself
could not run. A standalone hook's dry run is a synthetic stop in a fresh empty repository (its
gates run there); a daemon-mode hook is pinged with an event it does not answer, and its daemon
asked for its health: no stop is reported to it. Managed (system) settings read: Claude Code's
/etc/claude-code/managed-settings.json and managed-settings.d/*.json ($CLAUDE_CODE_MANAGED_SETTINGS_PATH),
/etc/gemini-cli/settings.json ($GEMINI_CLI_SYSTEM_SETTINGS_PATH), /etc/qwen-code/settings.json
($QWEN_CODE_SYSTEM_SETTINGS_PATH), /etc/cursor/hooks.json. See `gatehost docs agents`.";

/// Something wrong with the hooks as installed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "finding", rename_all = "kebab-case")]
pub(super) enum Finding {
    /// A CLI's file that cannot be read or is not JSON.
    Unreadable { file: PathBuf, problem: String },
    /// gatehost is registered more than once for one event: each stop
    /// would be gated (and counted) more than once.
    Duplicate {
        agent: String,
        event: String,
        files: Vec<PathBuf>,
    },
    /// Cursor runs Claude Code's project hooks as well as its own: a stop
    /// in this project would be gated twice.
    CursorRunsClaudeHooks { claude: PathBuf, cursor: PathBuf },
    /// The command cannot be split into words, or does not say which CLI.
    BadCommand {
        file: PathBuf,
        event: String,
        problem: String,
    },
    /// The command's program is not there.
    ProgramMissing {
        file: PathBuf,
        event: String,
        program: PathBuf,
    },
    /// The command runs another gatehost than this one.
    OtherBinary {
        file: PathBuf,
        event: String,
        program: PathBuf,
        this: PathBuf,
    },
    /// The command answers another CLI's hooks than the file's.
    WrongAgent {
        file: PathBuf,
        event: String,
        answers: String,
    },
    /// The gate file or the configuration does not load.
    GatesDoNotLoad { file: PathBuf, problem: String },
    /// Daemon mode: no daemon answers (or not with the token the hook has).
    NoDaemon { file: PathBuf, problem: String },
    /// The dry run did not answer as the CLI expects.
    DryRun {
        file: PathBuf,
        event: String,
        problem: String,
    },
}

impl Finding {
    /// One line a person reads.
    pub(super) fn message(&self) -> String {
        match self {
            Finding::Unreadable { file, problem } => {
                format!("{}: cannot be read: {problem}", file.display())
            }
            Finding::Duplicate {
                agent,
                event,
                files,
            } => format!(
                "{agent}: gatehost is registered {} times for {event} ({}): each stop is gated that many times; uninstall one scope",
                files.len(),
                list(files)
            ),
            Finding::CursorRunsClaudeHooks { claude, cursor } => format!(
                "Cursor runs Claude Code's project hooks ({}) as well as its own ({}): each Cursor stop here reaches gatehost twice (gated once when both calls name the stop; see `gatehost docs agents`); keep one",
                claude.display(),
                cursor.display()
            ),
            Finding::BadCommand {
                file,
                event,
                problem,
            } => format!("{} ({event}): the hook command {problem}", file.display()),
            Finding::ProgramMissing {
                file,
                event,
                program,
            } => format!(
                "{} ({event}): the hook runs {}, which is not there: install again",
                file.display(),
                program.display()
            ),
            Finding::OtherBinary {
                file,
                event,
                program,
                this,
            } => format!(
                "{} ({event}): the hook runs {}, not this gatehost ({}): install again to point it here",
                file.display(),
                program.display(),
                this.display()
            ),
            Finding::WrongAgent {
                file,
                event,
                answers,
            } => format!(
                "{} ({event}): the hook answers as `{answers}`, not this CLI",
                file.display()
            ),
            Finding::GatesDoNotLoad { file, problem } => {
                format!("{}: its gates do not load: {problem}", file.display())
            }
            Finding::NoDaemon { file, problem } => format!(
                "{}: daemon mode, but no daemon answers: {problem}",
                file.display()
            ),
            Finding::DryRun {
                file,
                event,
                problem,
            } => format!("{} ({event}): dry run: {problem}", file.display()),
        }
    }
}

fn list(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One gatehost hook registered in a CLI's file.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct Registration {
    scope: &'static str,
    file: PathBuf,
    event: String,
    command: String,
}

/// What doctor found for one CLI.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentReport {
    agent: &'static str,
    /// The CLI's program on PATH, if any.
    program: Option<PathBuf>,
    version: Option<String>,
    registrations: Vec<Registration>,
}

#[derive(Debug, Serialize)]
struct Report {
    ok: bool,
    agents: Vec<AgentReport>,
    findings: Vec<Finding>,
}

pub(super) fn run(args: &DoctorArgs) -> CliResult<i32> {
    let this = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| CliError::new("io", format!("cannot find gatehost's own path: {e}")))?;
    let project = std::path::absolute(&args.project)
        .map_err(|e| CliError::input(format!("--project: {e}")).field("--project"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new("runtime", format!("cannot start the runtime: {e}")))?;
    let agents: Vec<AgentCli> = match args.agent {
        Some(a) => vec![a],
        None => AgentCli::ALL.to_vec(),
    };
    let mut findings = Vec::new();
    let mut reports = Vec::new();
    for agent in agents {
        let (program, version) = rt.block_on(version_of(agent));
        let registrations = registrations(agent, &project, &mut findings)?;
        findings.extend(duplicates(agent, &registrations));
        // One command registered for several events is checked once, and
        // dry-run at its stop event.
        let mut checked: Vec<(&Path, &str)> = Vec::new();
        for r in &registrations {
            if checked.contains(&(r.file.as_path(), r.command.as_str())) {
                continue;
            }
            checked.push((r.file.as_path(), r.command.as_str()));
            let stop = registrations
                .iter()
                .filter(|o| o.file == r.file && o.command == r.command)
                .find(|o| shape::point_of(agent, &o.event) == Some(HookPoint::Stop))
                .unwrap_or(r);
            findings.extend(check_registration(agent, stop, &this, args.no_run, &rt));
        }
        reports.push(AgentReport {
            agent: agent.name(),
            program,
            version,
            registrations,
        });
    }
    if args
        .agent
        .is_none_or(|a| matches!(a, AgentCli::Claude | AgentCli::Cursor))
    {
        findings.extend(cursor_runs_claude(&reports));
    }
    let report = Report {
        ok: findings.is_empty(),
        agents: reports,
        findings,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&report).map_err(|e| CliError::new("json", e.to_string()))?
        );
    } else {
        print_human(&report);
    }
    Ok(if report.ok { 0 } else { 1 })
}

fn print_human(report: &Report) {
    for a in &report.agents {
        let found = match (&a.program, &a.version) {
            (Some(p), Some(v)) => format!("{} ({v})", p.display()),
            (Some(p), None) => format!("{} (no version)", p.display()),
            (None, _) => "not on PATH".to_string(),
        };
        println!("{}: {found}", a.agent);
        if a.registrations.is_empty() {
            println!("  no gatehost hook registered");
        }
        for r in &a.registrations {
            println!(
                "  {} {} ({}): {}",
                r.scope,
                r.event,
                r.file.display(),
                r.command
            );
        }
    }
    if report.ok {
        println!("all well");
    } else {
        for f in &report.findings {
            println!("finding: {}", f.message());
        }
    }
}

/// The CLI's program on PATH and its `--version`.
async fn version_of(agent: AgentCli) -> (Option<PathBuf>, Option<String>) {
    let name = crate::hook::adapter(agent).program();
    let Some(program) = crate::supervise::find_on_path(name, std::env::var_os("PATH").as_deref())
    else {
        return (None, None);
    };
    let out = tokio::time::timeout(
        RUN_LIMIT,
        async_process::Command::new(&program)
            .arg("--version")
            .stdin(async_process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await;
    let version = match out {
        Ok(Ok(o)) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .map(|l| l.trim().to_string()),
        _ => None,
    };
    (Some(program), version)
}

/// One registration's program, gates or daemon, and dry run.
fn check_registration(
    agent: AgentCli,
    r: &Registration,
    this: &Path,
    no_run: bool,
    rt: &tokio::runtime::Runtime,
) -> Vec<Finding> {
    let bad = |problem: String| {
        vec![Finding::BadCommand {
            file: r.file.clone(),
            event: r.event.clone(),
            problem,
        }]
    };
    let Some(words) = shlex::split(&r.command) else {
        return bad("is not a command line (unbalanced quotes)".into());
    };
    let program = PathBuf::from(&words[0]);
    if !program.is_absolute() {
        return bad(format!(
            "runs `{}` by name: the CLI looks it up on its own PATH, which the agent can set",
            program.display()
        ));
    }
    match std::fs::canonicalize(&program) {
        Err(_) => {
            return vec![Finding::ProgramMissing {
                file: r.file.clone(),
                event: r.event.clone(),
                program,
            }];
        }
        Ok(p) if p != this => {
            return vec![Finding::OtherBinary {
                file: r.file.clone(),
                event: r.event.clone(),
                program,
                this: this.to_path_buf(),
            }];
        }
        Ok(_) => {}
    }
    // `PROGRAM hook AGENT OPTIONS`, read as the hook itself reads it.
    #[derive(clap::Parser)]
    struct Hook {
        #[command(subcommand)]
        hook: HookCommand,
    }
    let hook = match <Hook as clap::Parser>::try_parse_from(
        std::iter::once("gatehost".to_string()).chain(words.iter().skip(2).cloned()),
    ) {
        Ok(h) => h.hook,
        Err(e) => return bad(format!("does not parse: {}", e.kind())),
    };
    let Some((answers, hook_args)) = hook.answering() else {
        return bad("is not `hook AGENT`".into());
    };
    if answers != agent {
        return vec![Finding::WrongAgent {
            file: r.file.clone(),
            event: r.event.clone(),
            answers: answers.name().to_string(),
        }];
    }
    let mut out = Vec::new();
    let daemon = hook_args.gates.is_none();
    if let Some(gates) = &hook_args.gates {
        if let Err(e) = gates_load(gates, hook_args.config.as_deref()) {
            out.push(Finding::GatesDoNotLoad {
                file: r.file.clone(),
                problem: e,
            });
            return out;
        }
    } else if let Err(problem) =
        super::hook::daemon::daemon_answers(&hook_args, Instant::now() + Duration::from_secs(10))
    {
        out.push(Finding::NoDaemon {
            file: r.file.clone(),
            problem,
        });
    }
    let point = shape::point_of(agent, &r.event);
    if no_run || point != Some(HookPoint::Stop) {
        return out;
    }
    if let Err(problem) = rt.block_on(dry_run(agent, &r.command, daemon)) {
        out.push(Finding::DryRun {
            file: r.file.clone(),
            event: r.event.clone(),
            problem,
        });
    }
    out
}

/// The gate file (and configuration) load as a standalone hook loads them,
/// against an empty workspace of its own.
fn gates_load(gates: &Path, config: Option<&Path>) -> Result<(), String> {
    let ws = tempfile::tempdir().map_err(|e| e.to_string())?;
    let anchor = crate::anchor::WorkspaceAnchor::open(ws.path()).map_err(|e| e.to_string())?;
    super::check::load_operator_files(config, gates, "--gates", &anchor, false)
        .map(|_| ())
        .map_err(|e| e.message)
}

/// Runs the hook `command` as the CLI would (`sh -c`, the input on stdin):
/// a synthetic stop in a fresh repository (standalone), or an event no
/// hook answers (daemon mode: nothing reaches the daemon); checks the
/// answer's shape.
async fn dry_run(agent: AgentCli, command: &str, daemon: bool) -> Result<(), String> {
    let ws = tempfile::tempdir().map_err(|e| e.to_string())?;
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(ws.path())
        .status();
    if !init.is_ok_and(|s| s.success()) {
        return Err("cannot make a repository for the dry run (git init)".into());
    }
    let id = format!("gatehost-doctor-{}", std::process::id());
    let (input, point) = if daemon {
        (shape::ping(&id, ws.path()), HookPoint::SessionStart)
    } else {
        (
            shape::synthetic_stop(agent, &id, ws.path()),
            HookPoint::Stop,
        )
    };
    let (code, stdout) = run_hook(command, ws.path(), &input).await?;
    shape::check(agent, point, &stdout, code)?;
    if !daemon {
        // Forget the synthetic session's standing again.
        if let Some(end) = shape::session_end(agent, &id, ws.path()) {
            let _ = run_hook(command, ws.path(), &end).await;
        }
    }
    Ok(())
}

async fn run_hook(command: &str, cwd: &Path, input: &str) -> Result<(i32, String), String> {
    use futures_lite::AsyncWriteExt;
    let mut child = async_process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(async_process::Stdio::piped())
        .stdout(async_process::Stdio::piped())
        .stderr(async_process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start it: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .await
            .map_err(|e| format!("cannot write its input: {e}"))?;
        // Closed: the hook reads to the end of its input.
        drop(stdin);
    }
    match tokio::time::timeout(RUN_LIMIT, child.output()).await {
        Ok(Ok(out)) => Ok((
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )),
        Ok(Err(e)) => Err(format!("cannot run it: {e}")),
        Err(_) => Err(format!("no answer within {} s", RUN_LIMIT.as_secs())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(scope: &'static str, file: &str, event: &str) -> Registration {
        Registration {
            scope,
            file: PathBuf::from(file),
            event: event.into(),
            command: "/x/gatehost hook claude".into(),
        }
    }

    #[test]
    fn an_event_registered_twice_is_a_duplicate_and_cursor_beside_claude_is_named() {
        let regs = [
            reg("user", "/h/.claude/settings.json", "Stop"),
            reg("project", "/p/.claude/settings.json", "Stop"),
            reg("user", "/h/.claude/settings.json", "SessionStart"),
        ];
        let d = duplicates(AgentCli::Claude, &regs);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].message().contains("2 times for Stop"),
            "{}",
            d[0].message()
        );
        let report = |agent, regs: Vec<Registration>| AgentReport {
            agent,
            program: None,
            version: None,
            registrations: regs,
        };
        let claude_user = report("claude", vec![reg("user", "/h/c", "Stop")]);
        let claude_project = report("claude", vec![reg("project", "/p/c", "Stop")]);
        let cursor = report("cursor", vec![reg("user", "/h/cur", "stop")]);
        assert!(
            cursor_runs_claude(&[claude_user, cursor.clone()]).is_none(),
            "user scope: Cursor does not run it"
        );
        assert!(cursor_runs_claude(std::slice::from_ref(&claude_project)).is_none());
        assert!(matches!(
            cursor_runs_claude(&[claude_project, cursor]),
            Some(Finding::CursorRunsClaudeHooks { .. })
        ));
    }

    #[test]
    fn findings_serialize_by_their_name() {
        let f = Finding::OtherBinary {
            file: "/f".into(),
            event: "Stop".into(),
            program: "/old/gatehost".into(),
            this: "/new/gatehost".into(),
        };
        let v = serde_json::to_value(&f).expect("json");
        assert_eq!(v["finding"], "other-binary");
        assert!(f.message().contains("/old/gatehost") && f.message().contains("not this gatehost"));
    }
}
