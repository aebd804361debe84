//! The `[hook]` section: what a standalone `gatehost hook AGENT --gates
//! FILE` does beyond its gates (a daemon's hooks are the daemon's). It
//! only holds settings; it never reads a file or posts anything.

use serde::Deserialize;
use std::path::PathBuf;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HookSection {
    pub(super) notify_url: Option<String>,
    #[serde(default)]
    pub(super) notify_format: super::webhooks::Format,
    pub(super) notify_secret_file: Option<String>,
}

/// Settings of standalone hooks.
#[derive(Debug, Clone, Default)]
pub struct HookConfig {
    /// Where a standalone hook posts when an agent is out of retries
    /// (`hook:capped`) or a gate could not run (`hook:gate-error`).
    pub notify: Option<super::webhooks::Target>,
    /// The key signing those posts (Standard Webhooks), if any.
    pub notify_secret_file: Option<PathBuf>,
}

impl HookSection {
    pub(super) fn resolve(self) -> Result<HookConfig, (String, String)> {
        let notify = match self.notify_url {
            Some(url) => Some(
                super::webhooks::Target::new(url, self.notify_format, None, true)
                    .map_err(|m| ("hook.notify_url".to_string(), m))?,
            ),
            None => None,
        };
        Ok(HookConfig {
            notify,
            notify_secret_file: self.notify_secret_file.map(PathBuf::from),
        })
    }
}
