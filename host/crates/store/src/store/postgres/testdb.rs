//! Test support: a fresh PostgreSQL database for one test, made through an
//! admin connection to the cluster `GATEHOST_TEST_PG_URL` names (a
//! superuser's URL without a password; the password in the file
//! `GATEHOST_TEST_PG_PASSWORD_FILE`), and dropped when the test ends, also
//! when it panics (a guard), so that tests run in parallel, each on its
//! own database. Without the variable a test is skipped with a loud line on
//! the process's stderr (never captured by the test harness); with
//! `GATEHOST_TEST_PG_REQUIRED=1` that is a failure instead.
//! `scripts/pg-cluster.sh` starts such a cluster.
//!
//! Compiled only for tests (`test-support`): gatehost's own tests use it
//! too. It must never be reachable from the released binary.

use super::bridge::Bridge;
use super::options::{PgOptions, Tls, redacted};

/// The variable naming the test cluster's admin URL.
const URL_VAR: &str = "GATEHOST_TEST_PG_URL";
/// The variable naming the file that holds its password.
const PASSWORD_VAR: &str = "GATEHOST_TEST_PG_PASSWORD_FILE";
/// Set to `1`: a missing cluster fails the test instead of skipping it.
const REQUIRED_VAR: &str = "GATEHOST_TEST_PG_REQUIRED";

/// One test's database, dropped with this value.
pub struct TestDb {
    name: String,
    admin: PgOptions,
    opts: PgOptions,
    bridge: Bridge,
}

impl std::fmt::Debug for TestDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDb").field("name", &self.name).finish()
    }
}

/// `url` naming database `db` instead of its own.
fn with_database(url: &str, db: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (url, None),
    };
    let (scheme, rest) = head.split_once("://").unwrap_or(("postgres", head));
    let authority = rest.split('/').next().unwrap_or(rest);
    match query {
        Some(q) => format!("{scheme}://{authority}/{db}?{q}"),
        None => format!("{scheme}://{authority}/{db}"),
    }
}

impl TestDb {
    /// A fresh, empty database for `test`; `None` (after a loud line on
    /// stderr) when no test cluster is named, a panic instead when one is
    /// required.
    pub fn new(test: &str) -> Option<TestDb> {
        let Ok(url) = std::env::var(URL_VAR) else {
            if std::env::var(REQUIRED_VAR).is_ok_and(|v| v == "1") {
                panic!("{test}: no PostgreSQL ({URL_VAR} unset) but {REQUIRED_VAR}=1");
            }
            // Straight to the process's stderr: the test harness captures
            // `eprintln!` of a passing test, and a skip must be seen.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: {test}: no PostgreSQL ({URL_VAR} unset; scripts/pg-cluster.sh starts one)"
            );
            return None;
        };
        let password = std::env::var(PASSWORD_VAR).ok().map(|file| {
            std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{PASSWORD_VAR}={file}: {e}"))
                .trim_end_matches(['\n', '\r'])
                .to_string()
        });
        let name = format!("gh_{}", uuid::Uuid::new_v4().simple());
        let admin = PgOptions {
            url: url.clone(),
            password: password.clone(),
            application_name: "gatehost-test-admin".into(),
        };
        let opts = PgOptions {
            url: with_database(&url, &name),
            password,
            application_name: "gatehost-test".into(),
        };
        let db = TestDb {
            name,
            admin,
            opts,
            bridge: Bridge::new().expect("a runtime for the test database"),
        };
        db.admin_sql(&format!("CREATE DATABASE {}", db.name));
        Some(db)
    }

    /// The options that reach this test's database.
    pub fn options(&self) -> PgOptions {
        self.opts.clone()
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A store of this database claimed for the host `id` (a lease of
    /// `lease_secs`).
    pub fn host(&self, id: &str, lease_secs: u64) -> crate::store::Store {
        crate::store::Store::open_postgres_as(&self.options(), &host_spec(id, lease_secs))
            .expect("claim the host id")
    }

    /// Runs `sql` (simple statements) on a new connection made with
    /// `opts`: each row's columns as text.
    fn run(&self, opts: &PgOptions, sql: &str) -> Vec<Vec<Option<String>>> {
        let parsed = opts.parse().expect("the test URL");
        let shown = redacted(&opts.url);
        let msgs = match parsed.tls {
            Tls::Off => {
                let (client, conn) = self
                    .bridge
                    .wait(parsed.config.connect(tokio_postgres::NoTls))
                    .unwrap_or_else(|e| panic!("connect to {shown}: {e}"));
                self.bridge.spawn(async move {
                    let _ = conn.await;
                });
                self.bridge.wait(client.simple_query(sql))
            }
            Tls::Prefer | Tls::Require => {
                let tls = super::options::tls_connector(&shown).expect("TLS");
                let (client, conn) = self
                    .bridge
                    .wait(parsed.config.connect(tls))
                    .unwrap_or_else(|e| panic!("connect to {shown}: {e}"));
                self.bridge.spawn(async move {
                    let _ = conn.await;
                });
                self.bridge.wait(client.simple_query(sql))
            }
        }
        .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        msgs.iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => {
                    Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect())
                }
                _ => None,
            })
            .collect()
    }

    /// Runs `sql` in this test's database, as the cluster's admin.
    pub fn sql(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        let inside = PgOptions {
            url: with_database(&self.admin.url, &self.name),
            ..self.admin.clone()
        };
        self.run(&inside, sql)
    }

    /// Runs `sql` in the admin URL's own database.
    pub fn admin_sql(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        self.run(&self.admin, sql)
    }

    /// Ends every connection to this test's database but the caller's
    /// (as a server restart or a network cut would); how many.
    pub fn terminate_connections(&self) -> usize {
        self.admin_sql(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE datname = '{}' AND pid <> pg_backend_pid()",
            self.name
        ))
        .len()
    }

    /// How many sessions wait for an advisory lock in this test's database.
    pub fn advisory_waiters(&self) -> usize {
        let rows = self.admin_sql(&format!(
            "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
              WHERE l.locktype = 'advisory' AND NOT l.granted AND d.datname = '{}'",
            self.name
        ));
        rows.first()
            .and_then(|r| r.first().cloned().flatten())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        // Never a panic in a drop (a test already panicking would abort).
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.admin_sql(&sql);
        }));
        if dropped.is_err() {
            eprintln!("test database {} was not dropped", self.name);
        }
    }
}

/// A test host's spec: `id`, a lease of `lease_secs`, a test machine.
pub fn host_spec(id: &str, lease_secs: u64) -> super::HostSpec {
    super::HostSpec {
        id: id.into(),
        lease: std::time::Duration::from_secs(lease_secs),
        machine: "test-machine".into(),
        version: "0.0.0-test".into(),
    }
}
