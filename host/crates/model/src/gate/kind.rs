//! What every kind of gate is, as data: one implementation of
//! [`GateKind`] per kind (`shell`, `judge`, `wasm`, each in its own file
//! with its JSON shape), registered in `spec::Kind`. How a kind runs is
//! the runner's (gatehost's `gate::run::RunGate`), not this crate's.
//!
//! It owns the trait and the field checks the kinds share. It must never
//! name a kind: a new kind is a new file and its registration, not an arm
//! here.

use std::time::Duration;

/// The longest timeout a gate may ask for: one day.
pub const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

/// A gate object that is refused, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SpecError {
    /// Where in the gate file, e.g. `[1].judge.timeoutMs` (empty: the file).
    pub field: String,
    /// Why it is refused.
    pub message: String,
}

/// One kind of gate: how it is labelled, ordered and checked.
pub trait GateKind: Send + Sync {
    /// The gate's label when it has no `name`: `shell: cargo test`,
    /// `judge: claude (opus)`, `wasm: plugin`.
    fn label(&self) -> String;

    /// Cost class for ordering a list of gates, cheapest first.
    fn cost_class(&self) -> u8;

    /// The gate's own timeout, or its kind's default.
    fn timeout(&self) -> Duration;

    /// True when the gate starts host processes (a program, a judge, a
    /// plugin that may call a judge): those run in the sandbox.
    fn is_native(&self) -> bool;

    /// True when the gate is given the change (judges and plugins); a
    /// kind that is not reads the workspace itself.
    fn sees_change(&self) -> bool;

    /// True when the gate is a plugin: it gets the change as files, and
    /// its evaluation needs a worker thread of its own.
    fn runs_plugin(&self) -> bool {
        false
    }

    /// The command the host's allowlist must admit, for a kind that runs
    /// one (the hints `gatehost check` gives).
    fn allowlisted_command(&self) -> Option<&str> {
        None
    }

    /// Refuses what the kind's fields may not hold (an empty program, a
    /// zero timeout, …), naming the field through `check`.
    fn validate(&self, check: &Check<'_>) -> Result<(), SpecError>;
}

/// The field checks every kind uses, naming fields under the gate's place
/// in its file (`[1].judge.timeoutMs`).
pub struct Check<'a> {
    at: &'a str,
}

impl<'a> Check<'a> {
    pub(super) fn new(at: &'a str) -> Self {
        Check { at }
    }

    /// An error naming `name` (relative to the gate object).
    pub fn err(&self, name: &str, message: &str) -> SpecError {
        SpecError {
            field: join_field(self.at, name),
            message: message.to_string(),
        }
    }

    /// `s` holds no NUL byte.
    pub fn no_nul(&self, name: &str, s: &str) -> Result<(), SpecError> {
        if s.contains('\0') {
            Err(self.err(name, "must not contain a NUL byte"))
        } else {
            Ok(())
        }
    }

    /// A timeout of at least 1 ms and at most one day, when given.
    pub fn timeout(&self, name: &str, t: Option<u64>) -> Result<(), SpecError> {
        match t {
            Some(0) => Err(self.err(name, "must be at least 1")),
            Some(ms) if ms > MAX_TIMEOUT_MS => {
                Err(self.err(name, "must be at most 86400000 (one day)"))
            }
            _ => Ok(()),
        }
    }

    /// `s` is not only whitespace.
    pub fn not_blank(&self, name: &str, s: &str) -> Result<(), SpecError> {
        if s.trim().is_empty() {
            Err(self.err(name, "must not be empty"))
        } else {
            Ok(())
        }
    }
}

/// A field's name under the gate's place in its file.
pub(super) fn join_field(at: &str, name: &str) -> String {
    match (at.is_empty(), name.is_empty()) {
        (true, true) => "gate".into(),
        (true, false) => name.to_string(),
        (false, true) => at.to_string(),
        (false, false) => format!("{at}.{name}"),
    }
}

/// A label cut to 80 characters.
pub(super) fn truncate_label(mut l: String) -> String {
    const MAX: usize = 80;
    if l.chars().count() > MAX {
        l = l.chars().take(MAX - 1).collect::<String>() + "…";
    }
    l
}
