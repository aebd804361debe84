//! The `[agents]` section: the sandbox of the agents the daemon starts
//! (`session start`, ACP or not) and the default permission rule of ACP
//! sessions. It only reads and checks the section; confining is
//! `engine::confined_agent`'s and answering permissions `engine::acp`'s.

use crate::permission::PermissionRule;
use serde::Deserialize;
use std::path::PathBuf;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AgentsSection {
    confine: Option<bool>,
    #[serde(default)]
    read: Vec<String>,
    #[serde(default)]
    write: Vec<String>,
    network: Option<bool>,
    pty: Option<bool>,
    permission: Option<PermissionRule>,
}

/// What an agent the daemon starts may do beyond its workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentsConfig {
    /// Confine agents (default true). `false` runs them as the daemon's
    /// user with all its rights: unsafe, said at start.
    pub confine: bool,
    /// Read and execute beneath these (beyond the system's and `[sandbox]
    /// read`): the agent CLI's install, say.
    pub read: Vec<PathBuf>,
    /// Read and write beneath these: the CLI's config directory (`~/.gemini`).
    pub write: Vec<PathBuf>,
    /// TCP connect and bind (default true: it calls its model).
    pub network: bool,
    /// Pseudo-terminals (`/dev/ptmx`, `/dev/pts`; default false): an agent
    /// CLI's shell tool runs its commands in one (Gemini CLI's fails with
    /// `forkpty(3) failed` without). Landlock cannot tell the agent's own
    /// terminal from others of its uid beneath `/dev/pts`: with this on,
    /// run agents as `[sandbox] user`, whose uid owns none of yours.
    pub pty: bool,
    /// The permission rule of ACP sessions started without one.
    pub permission: Option<PermissionRule>,
}

impl Default for AgentsConfig {
    fn default() -> Self {
        AgentsConfig {
            confine: true,
            read: Vec::new(),
            write: Vec::new(),
            network: true,
            pty: false,
            permission: None,
        }
    }
}

impl AgentsSection {
    pub(super) fn resolve(self, home: impl Fn(&str) -> PathBuf) -> AgentsConfig {
        AgentsConfig {
            confine: self.confine.unwrap_or(true),
            read: self.read.iter().map(|p| home(p)).collect(),
            write: self.write.iter().map(|p| home(p)).collect(),
            network: self.network.unwrap_or(true),
            pty: self.pty.unwrap_or(false),
            permission: self.permission,
        }
    }
}
