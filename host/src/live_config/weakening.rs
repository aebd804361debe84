//! The settings whose live change would weaken a guarantee, held at their
//! old value until the daemon restarts. The configuration file is often
//! writable by the daemon's user, and so by an agent running as that user:
//! a reload must never let such an agent switch off what protects the
//! operator. A restart is the operator's act (and re-reads the file).
//!
//! Held (each named as in `config:reloaded`'s `changed`):
//! - `daemon.ack_requires` lowered from `"passkey"` to `"token"`;
//! - `daemon.workspace_roots` gaining a root (where agents may register);
//! - `daemon.notify_url_prefixes` gaining a prefix (where a session's
//!   notifications may go);
//! - `daemon.session_policies` losing or changing a rule (the operator's
//!   policies every matching session gets): the whole old list is kept;
//! - `agents` lowering confinement (`confine` off, `network` or `pty` on,
//!   `read` or `write` gaining a path): the whole old section is kept.
//!
//! Applied live as ever: the allowlist (`shell.allow`) growing is normal
//! operation (a program still runs only as a gate the operator's policy
//! names); `daemon.enabled = false` pauses gating (policies wait, nothing
//! passes or is committed); `[sandbox]` needs a restart anyway.
//!
//! It owns that list and putting the old values back. It must never
//! store events (the caller does, `config:held`), and never hold a
//! strengthening.

use crate::config::{AckRequires, HostConfig};

/// The attention event of a held weakening.
pub const HELD_EVENT: &str = "config:held";

pub use crate::model::event::ConfigHeld;

/// Whether `new` has an item `old` lacks (compared as configured).
fn gains<T: std::fmt::Debug>(old: &[T], new: &[T]) -> bool {
    let before: Vec<String> = old.iter().map(|o| format!("{o:?}")).collect();
    new.iter().any(|n| !before.contains(&format!("{n:?}")))
}

/// The settings of `new` that would weaken `old`'s guarantees (in the
/// order of the list above).
pub fn weakened(old: &HostConfig, new: &HostConfig) -> Vec<String> {
    let (o, n) = (&old.daemon, &new.daemon);
    let mut out = Vec::new();
    if o.ack_requires == AckRequires::Passkey && n.ack_requires != AckRequires::Passkey {
        out.push("daemon.ack_requires".to_string());
    }
    if gains(&o.workspace_roots, &n.workspace_roots) {
        out.push("daemon.workspace_roots".to_string());
    }
    if gains(&o.notify_url_prefixes, &n.notify_url_prefixes) {
        out.push("daemon.notify_url_prefixes".to_string());
    }
    if gains(&n.session_policies, &o.session_policies) {
        out.push("daemon.session_policies".to_string());
    }
    let (oa, na) = (&old.agents, &new.agents);
    if (oa.confine && !na.confine)
        || (!oa.network && na.network)
        || (!oa.pty && na.pty)
        || gains(&oa.read, &na.read)
        || gains(&oa.write, &na.write)
    {
        out.push("agents".to_string());
    }
    out
}

/// Puts `old`'s value back into `new` for every setting named in `held`
/// (those [`weakened`] named): it stays in force until a restart.
pub fn hold(old: &HostConfig, new: &mut HostConfig, held: &[String]) {
    for name in held {
        let (o, n) = (&old.daemon, &mut new.daemon);
        match name.as_str() {
            "daemon.ack_requires" => n.ack_requires = o.ack_requires,
            "daemon.workspace_roots" => n.workspace_roots = o.workspace_roots.clone(),
            "daemon.notify_url_prefixes" => n.notify_url_prefixes = o.notify_url_prefixes.clone(),
            "daemon.session_policies" => n.session_policies = o.session_policies.clone(),
            "agents" => new.agents = old.agents.clone(),
            other => {
                tracing::error!(
                    setting = other,
                    "a weakening said to be held has no way to keep its old value; the new one applies"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> HostConfig {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("c.toml");
        std::fs::write(&path, text).expect("write");
        HostConfig::load(Some(&path)).expect("loads")
    }

    #[test]
    fn a_lowered_guarantee_is_held_and_a_raised_one_is_not() {
        let strong = config(
            "[daemon]\nack_requires = \"passkey\"\nworkspace_roots = [\"/srv/a\"]\n[agents]\nnetwork = false\n",
        );
        let weak = config(
            "[daemon]\nack_requires = \"token\"\nworkspace_roots = [\"/srv/a\", \"/\"]\n[agents]\nnetwork = true\nconfine = false\n",
        );
        let held = weakened(&strong, &weak);
        assert_eq!(
            held,
            ["daemon.ack_requires", "daemon.workspace_roots", "agents"]
        );
        let mut kept = config(
            "[daemon]\nack_requires = \"token\"\nworkspace_roots = [\"/srv/a\", \"/\"]\n[agents]\nnetwork = true\nconfine = false\n",
        );
        hold(&strong, &mut kept, &held);
        assert_eq!(kept.daemon.ack_requires, AckRequires::Passkey);
        assert_eq!(kept.daemon.workspace_roots, strong.daemon.workspace_roots);
        assert!(kept.agents.confine && !kept.agents.network);
        assert!(weakened(&strong, &kept).is_empty());
        // The other way is a strengthening: applied live.
        assert!(weakened(&weak, &strong).is_empty());
        // A root taken away, an allowlist grown: not held.
        let fewer = config(
            "[daemon]\nack_requires = \"passkey\"\nworkspace_roots = []\n[shell]\nallow = [\"cargo\"]\n[agents]\nnetwork = false\n",
        );
        assert!(weakened(&strong, &fewer).is_empty());
    }
}
