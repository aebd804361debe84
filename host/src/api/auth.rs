//! The two credentials: the agent token (attach, report, poll, wait) and
//! the operator token (everything, including ack and cancel). Tokens are
//! files readable by their owner only; the daemon creates them on first
//! start unless the configuration names its own.

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

pub struct Tokens {
    agent: [u8; 32],
    operator: [u8; 32],
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

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("token file {path}: {message}")]
    File { path: String, message: String },
}

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
            let token = format!(
                "{}{}",
                uuid::Uuid::new_v4().simple(),
                uuid::Uuid::new_v4().simple()
            );
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
    /// created owner-only on first start.
    pub fn load(
        data_dir: &Path,
        agent_file: Option<&Path>,
        operator_file: Option<&Path>,
    ) -> Result<(Tokens, PathBuf, PathBuf), TokenError> {
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
        Ok((
            Tokens {
                agent: digest(&agent),
                operator: digest(&operator),
            },
            a_path,
            o_path,
        ))
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
        if same(&d, &self.operator) {
            Ok(Role::Operator)
        } else if same(&d, &self.agent) {
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
        let (t1, a, o) = Tokens::load(dir.path(), None, None).expect("create");
        for p in [&a, &o] {
            let mode = std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", p.display());
        }
        let agent = std::fs::read_to_string(&a).expect("read");
        let (t2, _, _) = Tokens::load(dir.path(), None, None).expect("reuse");
        assert!(same(&t1.agent, &t2.agent) && same(&t1.operator, &t2.operator));
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
