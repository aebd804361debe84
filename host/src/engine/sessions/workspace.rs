//! Where a session may work: its cwd and workspace resolved and opened
//! once (following no symlink), the workspace clear of the host's own
//! places and, for the agent token, under the configured roots; and a
//! registered workspace opened again for a run only while it is still the
//! directory pinned at registration.
//!
//! It must never hand a run a workspace other than the one registered,
//! nor admit one that holds or lies inside the host's own places.

use super::invalid;
use crate::anchor::{Places, WorkspaceAnchor};
use crate::engine::{EngineError, EngineResult};
use crate::store::SessionRow;
use std::path::{Path, PathBuf};

/// A registration's cwd and workspace: canonical paths, the cwd inside
/// the workspace, and the workspace opened once, following no symlink
/// (what the checks look at and what is pinned).
pub(in crate::engine) struct Located {
    pub cwd: PathBuf,
    pub ws: PathBuf,
    pub anchor: WorkspaceAnchor,
}

/// Resolves cwd and workspace to canonical paths, cwd inside workspace,
/// and opens the workspace (see [`Located`]).
pub(in crate::engine) fn locate(cwd: &str, workspace: Option<&str>) -> EngineResult<Located> {
    let cwd_path = Path::new(cwd);
    if !cwd_path.is_absolute() {
        return Err(invalid("cwd", "must be an absolute path"));
    }
    let cwd_real =
        std::fs::canonicalize(cwd_path).map_err(|e| invalid("cwd", format!("{cwd}: {e}")))?;
    if !cwd_real.is_dir() {
        return Err(invalid("cwd", format!("{cwd} is not a directory")));
    }
    let ws = match workspace {
        Some(w) => {
            if !Path::new(w).is_absolute() {
                return Err(invalid("workspace", "must be an absolute path"));
            }
            std::fs::canonicalize(w).map_err(|e| invalid("workspace", format!("{w}: {e}")))?
        }
        None => cwd_real
            .ancestors()
            .find(|a| a.join(".git").exists())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| cwd_real.clone()),
    };
    if !cwd_real.starts_with(&ws) {
        return Err(invalid(
            "cwd",
            format!(
                "{} is not inside the workspace {}",
                cwd_real.display(),
                ws.display()
            ),
        ));
    }
    let anchor = WorkspaceAnchor::open(&ws).map_err(|e| invalid("workspace", e.to_string()))?;
    Ok(Located {
        cwd: cwd_real,
        ws,
        anchor,
    })
}

/// Opens `workspace` for a run (a gate, a plugin, a judge): refused unless
/// it is still the directory that each of `sessions` working there
/// registered (its pinned identity), so that a directory swapped in since
/// (or a symlink at any component) is never what the run is given.
pub(in crate::engine) fn open_registered(
    workspace: &str,
    sessions: &[SessionRow],
) -> Result<WorkspaceAnchor, crate::anchor::AnchorError> {
    let members: Vec<&SessionRow> = sessions
        .iter()
        .filter(|s| s.workspace == workspace)
        .collect();
    // A registered workspace is canonical: opened as stored, never
    // resolved again (a symlink there since is an error). A path no
    // member registered (a snapshot's worktree, the host's own) is
    // resolved first.
    let anchor = if members.is_empty() {
        WorkspaceAnchor::open(Path::new(workspace))?
    } else {
        WorkspaceAnchor::open_exact(Path::new(workspace), None)?
    };
    let found = anchor.identity();
    for s in members {
        if let Some(pinned) = s.workspace_pin
            && pinned != found
        {
            tracing::error!(session = %s.id, workspace, %pinned, %found, "the workspace is not the directory registered: nothing runs in it");
            return Err(crate::anchor::AnchorError::Replaced {
                path: workspace.to_string(),
                pinned,
                found,
            });
        }
    }
    Ok(anchor)
}

/// No workspace, whoever registers it, holds or lies inside the host's own
/// places (data directory, tokens, configuration, cache, scratch,
/// worktrees): the agent writes its workspace and its gates read it.
/// Judged by the opened workspace's identity and the directories above it.
pub(super) fn check_clear_of_host(located: &Located, places: &[PathBuf]) -> EngineResult<()> {
    let places = Places::of(places);
    let Some(place) = located.anchor.overlapping(&places) else {
        return Ok(());
    };
    let ws = &located.ws;
    // Which way round says what to move: a place inside the workspace is
    // the daemon's to move out; a workspace inside a place, the caller's.
    let shown = std::fs::canonicalize(place).unwrap_or_else(|_| place.to_path_buf());
    let fix = if shown.starts_with(ws) && shown != *ws {
        "the agent writes its workspace and its gates read it: restart `gatehost serve` with its data directory (and [daemon] worktree_dir, [sandbox] scratch_dir, the configuration and token files) outside every workspace, for example the default data directory, ~/.local/share/gatehost"
    } else {
        "register the project directory itself"
    };
    Err(EngineError::Forbidden {
        code: "workspace-overlaps-host",
        message: format!(
            "the workspace {} overlaps gatehost's own {} (its data directory, tokens, configuration, cache, scratch or worktrees); {fix}",
            ws.display(),
            place.display()
        ),
    })
}

/// The agent token registers workspaces only under the configured roots
/// (by identity: a root is the opened workspace or a directory above
/// it); a refusal names the configuration file (`source`, `None` for the
/// defaults) and the `workspace_roots` line that would admit it.
pub(super) fn check_root(
    located: &Located,
    roots: &[PathBuf],
    source: Option<&Path>,
) -> EngineResult<()> {
    if roots.iter().any(|r| located.anchor.is_at_or_below(r)) {
        return Ok(());
    }
    let ws = &located.ws;
    let listed: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""));
    let line = format!(
        "workspace_roots = [{}]",
        listed
            .iter()
            .map(String::as_str)
            .chain([ws.display().to_string().as_str()])
            .map(quote)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let fix = match source {
        Some(file) => format!(
            "to let the agent token register it, put `{line}` under [daemon] in {} (the daemon reloads it)",
            std::fs::canonicalize(file)
                .unwrap_or_else(|_| file.to_path_buf())
                .display()
        ),
        None => format!(
            "the daemon runs without a configuration file: to let the agent token register it, restart `gatehost serve` with --config FILE, FILE holding [daemon] and `{line}`"
        ),
    };
    Err(EngineError::Forbidden {
        code: "workspace-not-allowed",
        message: format!(
            "the agent token may register workspaces only under [daemon] workspace_roots ({}); {} is not; {fix}; or register it with the operator token",
            if listed.is_empty() {
                "none configured".to_string()
            } else {
                listed.join(", ")
            },
            ws.display()
        ),
    })
}
