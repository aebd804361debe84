//! How gatehost reaches its PostgreSQL database: [`PgOptions`] (the URL,
//! the password given apart, the application name), read into the
//! driver's configuration, its TLS (from the URL's `sslmode`) and the
//! place shown in messages.
//!
//! `sslmode`: absent, `disable` or `allow`: no TLS; `prefer`: TLS when the
//! server offers it (verified as below), else plain; `require`,
//! `verify-ca` and `verify-full`: TLS or no connection, the server's
//! certificate verified against the system's root certificates
//! (`SSL_CERT_FILE` / `SSL_CERT_DIR` name others) and its name checked,
//! for all three (stricter than libpq's `require` and `verify-ca`, never
//! weaker). TLS is rustls with the ring provider.
//!
//! It owns the password's secrecy: the URL must not hold one (refused,
//! without echoing it), the password is set on the driver's configuration
//! only, and no `Debug` or message of this module shows it. It must never
//! open a connection itself.

use crate::store::{StoreError, StoreResult};
use std::sync::Arc;
use std::time::Duration;

/// How to connect the store to PostgreSQL: what `[store] url` and its
/// password say. `Debug` never shows the password.
#[derive(Clone)]
pub struct PgOptions {
    /// `postgres://user@host:port/database?sslmode=…`, without a password
    /// (refused if it holds one). The tables live in the URL's default
    /// schema (`search_path`).
    pub url: String,
    /// The password, read from a file or the environment.
    pub password: Option<String>,
    /// What the server shows as the connection's program
    /// (`pg_stat_activity.application_name`).
    pub application_name: String,
}

impl std::fmt::Debug for PgOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgOptions")
            .field("url", &redacted(&self.url))
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("application_name", &self.application_name)
            .finish()
    }
}

/// How long a connection may take to be made.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The TLS a URL asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tls {
    /// None.
    Off,
    /// TLS when the server offers it, verified.
    Prefer,
    /// TLS or nothing, verified.
    Require,
}

/// The options, read.
pub(super) struct Parsed {
    pub(super) config: tokio_postgres::Config,
    pub(super) tls: Tls,
    /// `postgres://user@host:port/database`: for messages.
    pub(super) location: String,
}

/// `url` with any password in it (user info, a `password=` parameter)
/// replaced, for a message.
pub(super) fn redacted(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (url, None),
    };
    let mut out = match head.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find('/') {
                Some(i) => rest.split_at(i),
                None => (rest, ""),
            };
            let authority = match authority.rsplit_once('@') {
                Some((user, host)) => match user.split_once(':') {
                    Some((name, _)) => format!("{name}:<redacted>@{host}"),
                    None => format!("{user}@{host}"),
                },
                None => authority.to_string(),
            };
            format!("{scheme}://{authority}{path}")
        }
        None => head.to_string(),
    };
    if let Some(q) = query {
        let params: Vec<String> = q
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=<redacted>"),
                _ => p.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}

impl PgOptions {
    /// Reads the options: the URL without its `sslmode` into the driver's
    /// configuration, the password set apart, the TLS asked for.
    pub(super) fn parse(&self) -> StoreResult<Parsed> {
        let shown = redacted(&self.url);
        let refuse = |message: String| StoreError::Open {
            path: shown.clone(),
            message,
        };
        let (head, query) = match self.url.split_once('?') {
            Some((h, q)) => (h, q),
            None => (self.url.as_str(), ""),
        };
        let mut sslmode = None;
        let mut rest = Vec::new();
        for p in query.split('&').filter(|p| !p.is_empty()) {
            match p.split_once('=') {
                Some(("sslmode", v)) => sslmode = Some(v.to_string()),
                _ => rest.push(p),
            }
        }
        let url = if rest.is_empty() {
            head.to_string()
        } else {
            format!("{head}?{}", rest.join("&"))
        };
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e: tokio_postgres::Error| refuse(format!("not a PostgreSQL URL: {e}")))?;
        if config.get_password().is_some() {
            return Err(refuse(
                "the URL holds a password: give it apart (a file or the environment), never in the URL"
                    .into(),
            ));
        }
        let tls = match sslmode.as_deref() {
            None | Some("disable" | "allow") => Tls::Off,
            Some("prefer") => Tls::Prefer,
            Some("require" | "verify-ca" | "verify-full") => Tls::Require,
            Some(other) => {
                return Err(refuse(format!(
                    "unknown sslmode '{other}' (disable, allow, prefer, require, verify-ca, verify-full)"
                )));
            }
        };
        config.ssl_mode(match tls {
            Tls::Off => tokio_postgres::config::SslMode::Disable,
            Tls::Prefer => tokio_postgres::config::SslMode::Prefer,
            Tls::Require => tokio_postgres::config::SslMode::Require,
        });
        if let Some(pw) = &self.password {
            config.password(pw.as_bytes());
        }
        config.application_name(&self.application_name);
        config.connect_timeout(CONNECT_TIMEOUT);
        let location = location(&config);
        Ok(Parsed {
            config,
            tls,
            location,
        })
    }
}

/// `postgres://user@host:port/database`, never a password.
fn location(c: &tokio_postgres::Config) -> String {
    use tokio_postgres::config::Host;
    let host = match c.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = c.get_ports().first().copied().unwrap_or(5432);
    let user = c.get_user().unwrap_or("");
    let db = c.get_dbname().unwrap_or(user);
    let at = if user.is_empty() {
        String::new()
    } else {
        format!("{user}@")
    };
    format!("postgres://{at}{host}:{port}/{db}")
}

/// The TLS connector for a URL that asks for TLS: rustls (ring) with the
/// system's root certificates.
pub(super) fn tls_connector(shown: &str) -> StoreResult<tokio_postgres_rustls::MakeRustlsConnect> {
    let refuse = |message: String| StoreError::Open {
        path: shown.to_string(),
        message,
    };
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(refuse(format!(
            "the URL asks for TLS (sslmode) but no system root certificate could be loaded ({} errors; SSL_CERT_FILE names a file of them)",
            found.errors.len()
        )));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| refuse(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}
