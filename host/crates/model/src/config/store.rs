//! The `[store]` section: where `gatehost serve` keeps its state. Without
//! `url`, the embedded SQLite file in the data directory (nothing to set
//! up); with `url = "postgres://user@host:port/db?sslmode=require"`, a
//! PostgreSQL database, its password read from `password_file` or the
//! environment variable [`PASSWORD_ENV`] (docs/fleet.md).
//!
//! It owns parsing and checking these settings and reading the password.
//! It must never connect to a database, and never let the password into a
//! URL it keeps, an error, a log line or a `Debug` output: a URL that
//! holds one is refused at load, without being quoted.

use percent_encoding::percent_decode_str;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The environment variable the PostgreSQL password may come from when
/// `[store] password_file` is not set.
pub const PASSWORD_ENV: &str = "GATEHOST_STORE_PASSWORD";

/// The longest `application_name` PostgreSQL keeps (`NAMEDATALEN - 1`
/// bytes); the default is cut to it.
const APPLICATION_NAME_MAX: usize = 63;

/// The `sslmode` values a URL may ask for (PostgreSQL's, less `allow`,
/// which would try without TLS first).
const SSL_MODES: &[&str] = &["disable", "prefer", "require", "verify-ca", "verify-full"];

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StoreSection {
    url: Option<String>,
    password_file: Option<String>,
    application_name: Option<String>,
    lease: Option<String>,
    grace: Option<String>,
    shared_workspaces: Option<bool>,
}

/// Where the daemon's store is (`[store]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreConfig {
    /// `None`: the embedded SQLite file `gatehost.db` in the data
    /// directory. `Some`: a PostgreSQL database.
    pub postgres: Option<PostgresConfig>,
}

/// A PostgreSQL store: its URL (which holds no password), where its
/// password comes from, and the name its connections carry. Nothing here
/// is secret: it may be printed whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresConfig {
    /// `postgres://` or `postgresql://`, without a password.
    pub url: String,
    /// The file holding the password (`[store] password_file`); `None`:
    /// [`PASSWORD_ENV`] if set, else no password.
    pub password_file: Option<PathBuf>,
    /// The `application_name` of its connections (`gatehost/<host name>`
    /// unless set).
    pub application_name: String,
    /// How long a host's claim lives without a renewal (`lease`, default
    /// [`DEFAULT_LEASE`], at least [`MIN_LEASE`]): renewed every third of
    /// it; a host that cannot renew stops acting before it ends.
    pub lease: std::time::Duration,
    /// How long after a host's lease ended the leader waits before it
    /// marks the host stale (`grace`, default [`DEFAULT_GRACE`]: three
    /// missed renewals at the default lease; at least a third of the
    /// lease, one renewal).
    pub grace: std::time::Duration,
    /// Whether every host reaches the same workspace paths
    /// (`shared_workspaces`, default false): the leader then takes a
    /// stale host's work over; otherwise it waits for that host.
    pub shared_workspaces: bool,
}

/// The default `[store] grace`.
pub const DEFAULT_GRACE: std::time::Duration = std::time::Duration::from_secs(15);

/// The default `[store] lease`.
pub const DEFAULT_LEASE: std::time::Duration = std::time::Duration::from_secs(15);

/// The shortest `[store] lease` (a renewal every third of it must fit a
/// round trip to the database).
pub const MIN_LEASE: std::time::Duration = std::time::Duration::from_secs(3);

/// Why the PostgreSQL password could not be read. It names the file and
/// the cause, never the file's content.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// The file could not be read.
    #[error("[store] password_file {path}: cannot read it: {source}")]
    Read {
        /// The password file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The file (or the variable) is empty, or holds more than one line,
    /// or is not UTF-8 text.
    #[error("{from}: {why}")]
    Unusable {
        /// The file's path, or the variable's name.
        from: String,
        /// What is wrong with it (never the content).
        why: &'static str,
    },
}

impl PostgresConfig {
    /// The password: `password_file`'s content (one trailing newline
    /// trimmed), else [`PASSWORD_ENV`]'s value, else none. Read now, at
    /// each call (a daemon reads it once, at start).
    pub fn password(&self) -> Result<Option<String>, PasswordError> {
        match &self.password_file {
            Some(path) => read_password_file(path).map(Some),
            None => match std::env::var_os(PASSWORD_ENV) {
                None => Ok(None),
                Some(value) => {
                    let text = value.into_string().map_err(|_| PasswordError::Unusable {
                        from: format!("${PASSWORD_ENV}"),
                        why: "is not UTF-8 text",
                    })?;
                    check_password(text, &format!("${PASSWORD_ENV}")).map(Some)
                }
            },
        }
    }
}

fn read_password_file(path: &Path) -> Result<String, PasswordError> {
    let from = format!("[store] password_file {}", path.display());
    let read = |source| PasswordError::Read {
        path: path.to_path_buf(),
        source,
    };
    // A FIFO or a device would block the start, or never end.
    if !std::fs::metadata(path).map_err(read)?.is_file() {
        return Err(PasswordError::Unusable {
            from,
            why: "is not a regular file",
        });
    }
    let bytes = std::fs::read(path).map_err(read)?;
    let text = String::from_utf8(bytes).map_err(|_| PasswordError::Unusable {
        from: from.clone(),
        why: "is not UTF-8 text",
    })?;
    check_password(text, &from)
}

/// `text` less one trailing newline (`\n` or `\r\n`), refused when that
/// leaves it empty or with a line break inside.
fn check_password(mut text: String, from: &str) -> Result<String, PasswordError> {
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    let unusable = |why| PasswordError::Unusable {
        from: from.to_string(),
        why,
    };
    if text.is_empty() {
        return Err(unusable("is empty"));
    }
    if text.contains(['\n', '\r', '\0']) {
        return Err(unusable(
            "holds more than one line (or a NUL): one password, one line",
        ));
    }
    Ok(text)
}

impl StoreSection {
    /// Checks the section; an error is `(key, message)`, and never quotes
    /// the URL (it could hold a password).
    pub(super) fn resolve(self) -> Result<StoreConfig, (String, String)> {
        let err = |key: &str, m: String| (format!("store.{key}"), m);
        let Some(url) = self.url else {
            for (key, set) in [
                ("password_file", self.password_file.is_some()),
                ("application_name", self.application_name.is_some()),
                ("lease", self.lease.is_some()),
                ("grace", self.grace.is_some()),
                ("shared_workspaces", self.shared_workspaces.is_some()),
            ] {
                if set {
                    return Err(err(
                        key,
                        "is set without store.url (the embedded SQLite store needs neither)".into(),
                    ));
                }
            }
            return Ok(StoreConfig::default());
        };
        check_url(&url).map_err(|m| err("url", m.to_string()))?;
        let password_file = match self.password_file {
            None => None,
            Some(p) if p.trim().is_empty() => {
                return Err(err("password_file", "is empty: name a file".into()));
            }
            Some(p) => Some(super::home_path(&p)),
        };
        let application_name = match self.application_name {
            Some(name) => {
                check_application_name(&name).map_err(|m| err("application_name", m))?;
                name
            }
            None => default_application_name(),
        };
        let lease = match self.lease {
            Some(text) => super::daemon::duration(&text, MIN_LEASE).map_err(|m| err("lease", m))?,
            None => DEFAULT_LEASE,
        };
        let grace = match self.grace {
            Some(text) => super::daemon::duration(&text, lease / 3).map_err(|m| err("grace", m))?,
            None => DEFAULT_GRACE,
        };
        Ok(StoreConfig {
            postgres: Some(PostgresConfig {
                url,
                password_file,
                application_name,
                lease,
                grace,
                shared_workspaces: self.shared_workspaces.unwrap_or(false),
            }),
        })
    }
}

/// Why a `[store] url` is refused, in words that never quote it.
fn check_url(url: &str) -> Result<(), &'static str> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err("must be a postgres:// or postgresql:// URL");
    };
    if !scheme.eq_ignore_ascii_case("postgres") && !scheme.eq_ignore_ascii_case("postgresql") {
        return Err("must be a postgres:// or postgresql:// URL");
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("holds a space or a control character");
    }
    const HOLDS_PASSWORD: &str = "holds a password: put it in the file [store] password_file names, or in the environment variable GATEHOST_STORE_PASSWORD, never in the URL (configuration files are shown and logged)";
    // The authority ends at the path, the query or the fragment; its
    // userinfo, at its last `@`. `user:secret@` and `user:@` alike.
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if let Some((userinfo, _)) = authority.rsplit_once('@')
        && userinfo.contains(':')
    {
        return Err(HOLDS_PASSWORD);
    }
    let query = rest
        .split_once('?')
        .map(|(_, q)| q.split('#').next().unwrap_or_default())
        .unwrap_or_default();
    let mut host_param = false;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode_str(key)
            .decode_utf8_lossy()
            .to_ascii_lowercase();
        let value = percent_decode_str(value).decode_utf8_lossy();
        match key.as_str() {
            "password" => return Err(HOLDS_PASSWORD),
            "sslmode" if !SSL_MODES.contains(&&*value) => {
                return Err("sslmode must be disable, prefer, require, verify-ca or verify-full");
            }
            "host" | "hostaddr" => host_param = true,
            _ => {}
        }
    }
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, h)| h)
        .trim();
    if host.is_empty() && !host_param {
        return Err("names no host (postgres://user@host:port/database)");
    }
    Ok(())
}

fn check_application_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("is empty".into());
    }
    if name.len() > APPLICATION_NAME_MAX {
        return Err(format!(
            "is {} bytes: PostgreSQL keeps at most {APPLICATION_NAME_MAX}",
            name.len()
        ));
    }
    if !name.chars().all(|c| c.is_ascii_graphic() || c == ' ') {
        return Err("must be printable ASCII (PostgreSQL replaces anything else)".into());
    }
    Ok(())
}

/// `gatehost/<host name>`, cut to what PostgreSQL keeps, anything but
/// printable ASCII replaced by `?`.
fn default_application_name() -> String {
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let mut name: String = format!("gatehost/{host}")
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect();
    name.truncate(APPLICATION_NAME_MAX);
    name
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
