//! The sandbox of the agents the daemon starts (`session start`, ACP or
//! not): the native gates' sandbox (`crate::sandbox`) with the agents' own
//! grants (`[agents]`: `read`, `write`, `network`, on by default, and `pty`,
//! the pseudo-terminal devices, off by default). The
//! agent may write its workspace and a private temporary directory, read
//! the system and what `[agents] read` names; it never reaches the data
//! directory, the tokens or the configuration (they are the sandbox's
//! protected paths, granted around, never through).
//!
//! This module prepares; `agent_process` applies the prepared rules in
//! the agent's process, between fork and exec. It must never start an
//! agent unconfined unless `[agents] confine = false` or the sandbox is
//! off (`[sandbox] enabled = false` or `required = false` on a kernel
//! without Landlock), and then it says so in the log.

use super::sessions::invalid;
use super::{EngineResult, services::Agents};
use crate::anchor::WorkspaceAnchor;
use crate::sandbox::{Grants, Place, Scratch};
use std::ffi::OsString;
use std::path::Path;

/// What `[agents] pty = true` grants (read, write, ioctl): the
/// multiplexer and the terminals it makes.
const PTY_DEVICES: &[&str] = &["/dev/ptmx", "/dev/pts"];

/// One agent's confinement, ready to apply.
#[derive(Debug, Default)]
pub(super) struct Confinement {
    /// `None`: unconfined (said in the log).
    pub rules: Option<crate::sandbox::confine::Prepared>,
    /// What the sandbox adds to the agent's environment (`TMPDIR`).
    pub env: Vec<(OsString, OsString)>,
    /// The agent's private directory: kept as long as the agent runs.
    pub scratch: Option<Scratch>,
}

impl Agents {
    /// The confinement of `program` started in the workspace `anchor`
    /// opened (granted by that handle, checked by its identity).
    pub(super) fn agent_confinement(
        &self,
        program: &Path,
        anchor: &WorkspaceAnchor,
    ) -> EngineResult<Confinement> {
        let runner = self.engine().runner();
        let agents = &runner.config().agents;
        if !agents.confine {
            tracing::warn!(program = %program.display(), "[agents] confine = false: the agent runs UNCONFINED, with the daemon's rights");
            return Ok(Confinement::default());
        }
        let mut write = agents.write.clone();
        if agents.pty {
            write.extend(PTY_DEVICES.iter().map(std::path::PathBuf::from));
        }
        let grants = Grants {
            read: agents.read.clone(),
            write,
            network: agents.network,
        };
        let prepared = runner
            .sandbox()
            .prepare(program, Place::Workspace(anchor), &grants)
            .map_err(|e| invalid("command", format!("the agent cannot be confined: {e}")))?;
        let crate::sandbox::Prepared { plan, env, scratch } = prepared;
        let rules = match plan {
            Some(plan) => {
                Some(plan.prepare().map_err(|e| {
                    invalid("command", format!("the agent cannot be confined: {e}"))
                })?)
            }
            None => {
                tracing::warn!(program = %program.display(), "the sandbox is off: the agent runs UNCONFINED");
                None
            }
        };
        Ok(Confinement {
            rules,
            env,
            scratch,
        })
    }
}
