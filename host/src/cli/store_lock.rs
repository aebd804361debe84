//! One daemon per PostgreSQL database, until several hosts can share one
//! (issue 51: leases and fencing are not built yet): `serve` holds a
//! session advisory lock, `pg_try_advisory_lock(LOCK_KEYS)`, on a
//! connection of its own for its whole life, as it holds `serve.lock` in
//! its data directory. The server drops the lock when that connection
//! ends (the daemon's death included), so a second `serve` on the same
//! database is refused while the first lives, and starts once it is gone.
//!
//! A lost connection (the server restarted, a network cut) loses the lock:
//! it is taken again as soon as the server answers; if another daemon took
//! it meanwhile, this one stops at once (exit 2, as a SIGKILL would: the
//! store keeps everything) rather than serve the database beside it.
//!
//! It owns that lock only. It must never read or write the store's
//! tables, and never show the password (the driver's configuration holds
//! it; messages name the URL, which holds none). The driver is named here,
//! outside the store crate, because the store has no such lock yet: its
//! natural home is `store::postgres`, beside the migration lock.

use crate::store::PgOptions;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_postgres::config::SslMode;

/// The lock's two keys ("gate", 1). Two-key advisory locks never meet the
/// one-key (bigint) ones the store takes for its writes and migrations.
const LOCK_KEYS: (i32, i32) = (0x6761_7465, 1);

/// How long making the lock's connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The lock, held while this lives (its task keeps the connection).
pub struct DaemonLock {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for DaemonLock {
    fn drop(&mut self) {
        // The connection ends with the task: the server drops the lock.
        self.task.abort();
    }
}

/// Takes the database's one-daemon lock, or says that another daemon
/// holds it. `shown` is the URL as messages name it. Runs on the daemon's
/// runtime, which keeps the connection.
pub async fn hold(opts: &PgOptions, shown: &str) -> Result<DaemonLock, String> {
    let (config, tls) = config_of(opts)?;
    match take(&config, tls).await {
        Err(e) => Err(format!("cannot reach the store {shown}: {e}")),
        Ok(None) => Err(format!(
            "another gatehost serve serves the database {shown}; stop it first or name another database (one daemon per database until several hosts can share one: docs/fleet.md)"
        )),
        Ok(Some((client, lost))) => {
            let shown = shown.to_string();
            let task = tokio::spawn(keep(config, tls, shown, client, lost));
            Ok(DaemonLock { task })
        }
    }
}

/// Holds the lock: when its connection ends, takes it again on a new
/// one; another daemon holding it by then stops this process.
async fn keep(
    config: tokio_postgres::Config,
    tls: bool,
    shown: String,
    client: tokio_postgres::Client,
    lost: oneshot::Receiver<String>,
) {
    let (mut _client, mut lost) = (client, lost);
    loop {
        let why = (&mut lost)
            .await
            .unwrap_or_else(|_| "its task ended".to_string());
        tracing::warn!(store = %shown, cause = %why, "the connection holding the database's one-daemon lock was lost; taking the lock again");
        let mut wait = Duration::from_millis(100);
        loop {
            tokio::time::sleep(wait).await;
            match take(&config, tls).await {
                Ok(Some((c, l))) => {
                    (_client, lost) = (c, l);
                    tracing::info!(store = %shown, "took the database's one-daemon lock again");
                    break;
                }
                Ok(None) => {
                    let message = format!(
                        "another gatehost serve took the database {shown} while this daemon's lock was lost; stopping (one daemon per database)"
                    );
                    tracing::error!("{message}");
                    eprintln!("gatehost: error: {message}");
                    std::process::exit(super::error::EXIT_ERROR);
                }
                Err(e) => {
                    tracing::warn!(store = %shown, error = %e, "cannot take the database's one-daemon lock again yet");
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

/// A new connection and the lock on it: `None` when another session
/// holds it. The receiver answers when the connection ends, and why.
async fn take(
    config: &tokio_postgres::Config,
    tls: bool,
) -> Result<Option<(tokio_postgres::Client, oneshot::Receiver<String>)>, String> {
    let (client, lost) = if tls {
        let (c, conn) = config
            .connect(tls_connector()?)
            .await
            .map_err(|e| e.to_string())?;
        (c, watch(conn))
    } else {
        let (c, conn) = config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(|e| e.to_string())?;
        (c, watch(conn))
    };
    let row = client
        .query_one(
            "SELECT pg_try_advisory_lock($1, $2)",
            &[&LOCK_KEYS.0, &LOCK_KEYS.1],
        )
        .await
        .map_err(|e| e.to_string())?;
    let got: bool = row.try_get(0).map_err(|e| e.to_string())?;
    Ok(got.then_some((client, lost)))
}

/// Runs a connection on the runtime; the receiver answers when it ends.
fn watch<F>(conn: F) -> oneshot::Receiver<String>
where
    F: std::future::Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let why = match conn.await {
            Ok(()) => "the server closed it".to_string(),
            Err(e) => e.to_string(),
        };
        let _ = tx.send(why);
    });
    rx
}

/// The driver's configuration of `opts` (its `sslmode` read apart: the
/// driver knows neither `verify-ca` nor `verify-full`), and whether TLS is
/// used. The password goes to the configuration only.
fn config_of(opts: &PgOptions) -> Result<(tokio_postgres::Config, bool), String> {
    let (head, query) = opts.url.split_once('?').unwrap_or((opts.url.as_str(), ""));
    let mut sslmode = None;
    let mut rest = Vec::new();
    for p in query.split('&').filter(|p| !p.is_empty()) {
        match p.split_once('=') {
            Some(("sslmode", v)) => sslmode = Some(v),
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
        .map_err(|e: tokio_postgres::Error| format!("[store] url: not a PostgreSQL URL: {e}"))?;
    let (mode, tls) = match sslmode {
        None | Some("disable") => (SslMode::Disable, false),
        Some("prefer") => (SslMode::Prefer, true),
        Some("require" | "verify-ca" | "verify-full") => (SslMode::Require, true),
        Some(other) => return Err(format!("[store] url: unknown sslmode '{other}'")),
    };
    config.ssl_mode(mode);
    if let Some(pw) = &opts.password {
        config.password(pw.as_bytes());
    }
    config.application_name(format!("{} (lock)", opts.application_name));
    config.connect_timeout(CONNECT_TIMEOUT);
    Ok((config, tls))
}

/// rustls (ring) with the system's root certificates, the server's name
/// checked: as the store's own connections.
fn tls_connector() -> Result<tokio_postgres_rustls::MakeRustlsConnect, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(
            "the URL asks for TLS (sslmode) but no system root certificate could be loaded".into(),
        );
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(url: &str) -> PgOptions {
        PgOptions {
            url: url.into(),
            password: Some("hunter2".into()),
            application_name: "gatehost/t".into(),
        }
    }

    #[test]
    fn sslmode_is_read_apart_and_chooses_tls() {
        for (url, tls) in [
            ("postgres://u@h/d", false),
            ("postgres://u@h/d?sslmode=disable", false),
            ("postgres://u@h/d?sslmode=prefer", true),
            ("postgres://u@h/d?sslmode=require&connect_timeout=3", true),
            ("postgres://u@h/d?sslmode=verify-full", true),
        ] {
            let (config, with_tls) = config_of(&opts(url)).expect(url);
            assert_eq!(with_tls, tls, "{url}");
            assert_eq!(config.get_dbname(), Some("d"));
            assert_eq!(config.get_password(), Some(&b"hunter2"[..]));
        }
        assert!(config_of(&opts("postgres://u@h/d?sslmode=sometimes")).is_err());
    }

    #[test]
    fn the_password_is_in_no_message() {
        let e = config_of(&opts("postgres://u@h/d?sslmode=sometimes")).expect_err("refused");
        assert!(!e.contains("hunter2"), "{e}");
    }
}
