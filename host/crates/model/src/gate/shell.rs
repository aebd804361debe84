//! The shell gate's shape: an allowlisted program, its arguments, cwd,
//! timeout and environment, as a gate file writes it, and its checks.
//! Running it is the runner's (gatehost's `gate::shell`).

use super::kind::truncate_label;
use super::kind::{Check, GateKind, MAX_TIMEOUT_MS, SpecError};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The timeout of a gate of this kind that sets none.
pub const DEFAULT_SHELL_TIMEOUT: Duration = Duration::from_secs(60);

/// Extra environment for a shell gate: names passed through from the host,
/// or names with values.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum GateEnv {
    /// Host variables to pass through, by name (each must be in `[shell]
    /// pass_env`).
    PassThrough(Vec<String>),
    /// Variables to set, with their values.
    Set(BTreeMap<String, String>),
}

impl Default for GateEnv {
    fn default() -> Self {
        GateEnv::PassThrough(Vec::new())
    }
}

/// A shell gate: an allowlisted program; exit 0 passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellGate {
    /// A program in the host's allowlist (run by argv, never a shell, sandboxed).
    pub command: String,
    /// Its arguments (held to the allowlist entry's argument rules).
    pub args: Vec<String>,
    /// Workspace-relative working directory (default: the root).
    pub cwd: Option<String>,
    /// Its timeout in ms (default 60000; at most one day).
    pub timeout_ms: Option<u64>,
    /// Variables to set, or host variables to pass through.
    pub env: GateEnv,
}

/// A shell gate object: `{"command", …}`, its fields beside the gate's
/// `name` and `paths`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", rename = "ShellGate")]
pub(crate) struct ShellObject {
    #[serde(default)]
    pub name: Option<String>,
    /// A program in the host's allowlist (run by argv, never a shell, sandboxed).
    pub command: String,
    /// Its arguments (held to the allowlist entry's argument rules).
    #[serde(default)]
    pub args: Vec<String>,
    /// Workspace-relative working directory (default: the root).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Default 60000; at most one day.
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
    /// Variables to set (an object), or host variables to pass through (a
    /// list of names the host's `[shell] pass_env` lists).
    #[serde(default)]
    pub env: GateEnv,
    /// Workspace paths (files or directories) this gate needs: a policy
    /// gated on a snapshot checks out only the union of its gates' paths
    /// when every gate names some (a gate without `paths` needs everything).
    /// Repository-relative, no `..`, no `.git`.
    #[serde(default)]
    pub paths: Option<Vec<String>>,
}

impl ShellObject {
    /// The shell gate it describes.
    pub(super) fn kind(&self) -> ShellGate {
        ShellGate {
            command: self.command.clone(),
            args: self.args.clone(),
            cwd: self.cwd.clone(),
            timeout_ms: self.timeout_ms,
            env: self.env.clone(),
        }
    }

    /// Its name, paths and shell gate.
    pub(super) fn split(self) -> (Option<String>, Option<Vec<String>>, ShellGate) {
        let ShellObject {
            name,
            command,
            args,
            cwd,
            timeout_ms,
            env,
            paths,
        } = self;
        let shell = ShellGate {
            command,
            args,
            cwd,
            timeout_ms,
            env,
        };
        (name, paths, shell)
    }
}

impl GateKind for ShellGate {
    fn label(&self) -> String {
        let mut l = format!("shell: {}", self.command);
        for a in &self.args {
            l.push(' ');
            l.push_str(a);
        }
        truncate_label(l)
    }

    fn cost_class(&self) -> u8 {
        0
    }

    fn timeout(&self) -> Duration {
        self.timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_SHELL_TIMEOUT)
    }

    fn is_native(&self) -> bool {
        true
    }

    fn sees_change(&self) -> bool {
        false
    }

    fn allowlisted_command(&self) -> Option<&str> {
        Some(&self.command)
    }

    fn validate(&self, check: &Check<'_>) -> Result<(), SpecError> {
        check.not_blank("command", &self.command)?;
        check.no_nul("command", &self.command)?;
        for (i, a) in self.args.iter().enumerate() {
            check.no_nul(&format!("args[{i}]"), a)?;
        }
        if let Some(cwd) = &self.cwd {
            check.no_nul("cwd", cwd)?;
        }
        check.timeout("timeoutMs", self.timeout_ms)?;
        let names: Vec<&String> = match &self.env {
            GateEnv::PassThrough(n) => n.iter().collect(),
            GateEnv::Set(m) => {
                for (k, v) in m {
                    check.no_nul(&format!("env.{k}"), v)?;
                }
                m.keys().collect()
            }
        };
        for n in names {
            if n.is_empty() || n.contains('=') || n.contains('\0') {
                return Err(check.err("env", &format!("'{n}' is not a valid variable name")));
            }
        }
        Ok(())
    }
}
