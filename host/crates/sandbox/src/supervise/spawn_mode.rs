//! How the child program is cloned (`[sandbox] spawn`): the setting
//! only. It is parsed on every platform (the config is portable); only
//! Linux's child program (`program`, `spawn`) acts on it, and elsewhere it
//! is ignored (a process is started by std's `Command`). It must never
//! hold anything of the spawn itself.

/// How the child is cloned: `[sandbox] spawn`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SpawnMode {
    /// `CLONE_VM | CLONE_VFORK` on a stack of its own (x86_64): nothing
    /// of the host's is copied for a spawn. The default.
    #[default]
    Vfork,
    /// A copy-on-write copy of the host (no `CLONE_VM`).
    Fork,
}

impl SpawnMode {
    /// The values `[sandbox] spawn` takes, for an error message.
    pub const ALLOWED: &'static str = "\"vfork\" or \"fork\"";

    /// The mode `[sandbox] spawn` names (`vfork`, `fork`); `None` for
    /// anything else.
    pub fn parse(text: &str) -> Option<SpawnMode> {
        match text {
            "vfork" => Some(SpawnMode::Vfork),
            "fork" => Some(SpawnMode::Fork),
            _ => None,
        }
    }

    /// The mode's `[sandbox] spawn` value.
    pub fn as_str(self) -> &'static str {
        match self {
            SpawnMode::Vfork => "vfork",
            SpawnMode::Fork => "fork",
        }
    }
}
