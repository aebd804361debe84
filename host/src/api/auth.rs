//! The two credentials: the agent token (attach, report, poll, wait) and
//! the operator token (everything, including ack and cancel). Tokens are
//! files readable by their owner only; the daemon creates them on first
//! start unless the configuration names its own. [`Tokens`] holds their
//! digests, swapped at once when they change (`gatehost token rotate`, or
//! the cluster's tokens adopted: `cluster_tokens`), and where they are.
//!
//! It owns the check of a bearer and the files' reading; it must never
//! log, answer or keep a token's value (digests only).

use super::ApiError;
use axum::http::{HeaderMap, StatusCode};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Agent,
    Operator,
}

impl Role {
    /// How far what this credential writes is trusted.
    pub fn trust(self) -> crate::config::Trust {
        match self {
            Role::Operator => crate::config::Trust::Operator,
            Role::Agent => crate::config::Trust::Agent,
        }
    }
}

/// Token file names in the data directory.
pub(crate) use crate::wire::{AGENT_TOKEN_FILE, OPERATOR_TOKEN_FILE};

/// The digests of the tokens in force.
#[derive(Clone, Copy)]
struct Digests {
    agent: [u8; 32],
    operator: [u8; 32],
}

/// Where a daemon's tokens are: their files, and whether the
/// configuration named each (a named file is the operator's: the daemon
/// reads it and never writes it).
#[derive(Debug, Clone)]
pub struct TokenFiles {
    pub agent: PathBuf,
    pub operator: PathBuf,
    pub agent_configured: bool,
    pub operator_configured: bool,
}

/// The values read at start, for the cluster's seeding (never logged).
pub struct LocalTokens {
    pub agent: String,
    pub operator: String,
}

impl std::fmt::Debug for LocalTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalTokens(..)")
    }
}

pub struct Tokens {
    current: std::sync::RwLock<Digests>,
    files: TokenFiles,
    /// The generations `(agent, operator)` of the cluster's tokens held
    /// (PostgreSQL), else `None`.
    generations: std::sync::Mutex<Option<(i64, i64)>>,
    /// One change of the tokens at a time (a rotation, an adoption).
    pub(crate) changing: std::sync::Mutex<()>,
    /// Bumped each time the operator token is replaced (the page's
    /// logins it opened end with it).
    operator_changes: tokio::sync::watch::Sender<u64>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokens(..)")
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.trim().as_bytes()).into()
}

/// Equal in time independent of where the digests differ.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(crate) use super::token_files::TokenError;

/// Reads an owner-only secret file (at least 16 characters), or creates it
/// with a fresh random secret when `create` and it does not exist.
pub(crate) fn read_or_create(path: &Path, create: bool) -> Result<String, TokenError> {
    let err = |message: String| TokenError::File {
        path: path.display().to_string(),
        message,
    };
    match std::fs::read_to_string(path) {
        Ok(t) => {
            let mode = std::fs::metadata(path)
                .map_err(|e| err(e.to_string()))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                return Err(err(format!(
                    "is readable by others (mode {:o}); make it owner-only (chmod 600)",
                    mode & 0o777
                )));
            }
            let t = t.trim().to_string();
            if t.len() < 16 {
                return Err(err("holds a token shorter than 16 characters".into()));
            }
            Ok(t)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
            let token = super::token_files::fresh_token();
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(|e| err(format!("cannot create: {e}")))?;
            f.write_all(format!("{token}\n").as_bytes())
                .and_then(|_| f.sync_all())
                .map_err(|e| err(format!("cannot write: {e}")))?;
            Ok(token)
        }
        Err(e) => Err(err(e.to_string())),
    }
}

impl Tokens {
    /// Loads the tokens: from the configured files (which must exist), else
    /// from `<data_dir>/agent.token` and `<data_dir>/operator.token`,
    /// created owner-only on first start. The values come back beside
    /// them, for the cluster's tokens (`cluster_tokens`).
    pub fn load(
        data_dir: &Path,
        agent_file: Option<&Path>,
        operator_file: Option<&Path>,
    ) -> Result<(Tokens, LocalTokens), TokenError> {
        let a_path = agent_file.map_or_else(|| data_dir.join(AGENT_TOKEN_FILE), Path::to_path_buf);
        let o_path =
            operator_file.map_or_else(|| data_dir.join(OPERATOR_TOKEN_FILE), Path::to_path_buf);
        let agent = read_or_create(&a_path, agent_file.is_none())?;
        let operator = read_or_create(&o_path, operator_file.is_none())?;
        if agent == operator {
            return Err(TokenError::File {
                path: o_path.display().to_string(),
                message: "the operator token must differ from the agent token".into(),
            });
        }
        let files = TokenFiles {
            agent: a_path,
            operator: o_path,
            agent_configured: agent_file.is_some(),
            operator_configured: operator_file.is_some(),
        };
        Ok((
            Tokens {
                current: std::sync::RwLock::new(Digests {
                    agent: digest(&agent),
                    operator: digest(&operator),
                }),
                files,
                generations: std::sync::Mutex::new(None),
                changing: std::sync::Mutex::new(()),
                operator_changes: tokio::sync::watch::Sender::new(0),
            },
            LocalTokens { agent, operator },
        ))
    }

    /// Where the tokens are.
    pub fn files(&self) -> &TokenFiles {
        &self.files
    }

    /// From now on, these are the tokens (`agent`, `operator`: values,
    /// kept as digests; `None` keeps that one): a bearer of a replaced one
    /// is refused.
    pub(crate) fn swap(&self, agent: Option<&str>, operator: Option<&str>) {
        let mut cur = self.current.write().unwrap_or_else(|p| p.into_inner());
        if let Some(a) = agent {
            cur.agent = digest(a);
        }
        if let Some(o) = operator {
            let new = digest(o);
            if !same(&new, &cur.operator) {
                cur.operator = new;
                self.operator_changes.send_modify(|n| *n += 1);
            }
        }
    }

    /// Changes each time the operator token is replaced.
    pub(crate) fn operator_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.operator_changes.subscribe()
    }

    /// The generations of the cluster's tokens held, if any.
    pub(crate) fn generations(&self) -> Option<(i64, i64)> {
        *self.generations.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records the generations of the cluster's tokens now held.
    pub(crate) fn set_generations(&self, g: Option<(i64, i64)>) {
        *self.generations.lock().unwrap_or_else(|p| p.into_inner()) = g;
    }

    /// The role of the bearer, or 401.
    pub fn role(&self, headers: &HeaderMap) -> Result<Role, ApiError> {
        let unauthorized = |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", m);
        let value = headers
            .get(axum::http::header::AUTHORIZATION)
            .ok_or_else(|| unauthorized("missing Authorization: Bearer <token>"))?
            .to_str()
            .map_err(|_| unauthorized("malformed Authorization header"))?;
        let token = value
            .strip_prefix("Bearer ")
            .ok_or_else(|| unauthorized("the Authorization header must be 'Bearer <token>'"))?;
        let d = digest(token);
        let cur = *self.current.read().unwrap_or_else(|p| p.into_inner());
        if same(&d, &cur.operator) {
            Ok(Role::Operator)
        } else if same(&d, &cur.agent) {
            Ok(Role::Agent)
        } else {
            Err(unauthorized("wrong token"))
        }
    }

    /// Checks the bearer may use a route needing `needed`.
    pub fn require(&self, headers: &HeaderMap, needed: Role) -> Result<Role, ApiError> {
        let role = self.role(headers)?;
        if needed == Role::Operator && role != Role::Operator {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "operator-only",
                "this route needs the operator token; the agent token cannot approve, reject, cancel or start sessions",
            ));
        }
        Ok(role)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_created_owner_only_and_distinct_then_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (t1, _) = Tokens::load(dir.path(), None, None).expect("create");
        let (a, o) = (t1.files().agent.clone(), t1.files().operator.clone());
        for p in [&a, &o] {
            let mode = std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", p.display());
        }
        let agent = std::fs::read_to_string(&a).expect("read");
        let (t2, _) = Tokens::load(dir.path(), None, None).expect("reuse");
        let (d1, d2) = (
            *t1.current.read().expect("lock"),
            *t2.current.read().expect("lock"),
        );
        assert!(same(&d1.agent, &d2.agent) && same(&d1.operator, &d2.operator));
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::AUTHORIZATION,
            format!("Bearer {}", agent.trim()).parse().expect("header"),
        );
        assert_eq!(t2.role(&h).expect("role"), Role::Agent);
        assert!(t2.require(&h, Role::Operator).is_err());
    }

    #[test]
    fn a_token_file_readable_by_others_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("agent.token");
        std::fs::write(&p, "0123456789abcdef0123456789abcdef").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = Tokens::load(dir.path(), None, None).expect_err("must refuse");
        assert!(err.to_string().contains("chmod 600"), "{err}");
    }
}
