//! The daemon's store as a whole program: `gatehost serve` and `gatehost
//! store migrate|check` on PostgreSQL (the throwaway cluster of
//! `scripts/pg-cluster.sh`, a fresh database per test) and on the
//! embedded SQLite default.
//!
//! [`database`] is how a test gets its database: the store's own test
//! support (`gatehost::store::pg_testdb`), which reads
//! `GATEHOST_TEST_PG_URL` and `GATEHOST_TEST_PG_PASSWORD_FILE`, prints a
//! loud `SKIPPED:` line without them (a failure with
//! `GATEHOST_TEST_PG_REQUIRED=1`, which `scripts/test.sh` sets when it
//! started a cluster), and drops the database when the test ends.

mod fleet;
mod fleet_chaos;
mod forwarded;
mod load;
mod page;
mod partition;
mod postgres;
mod postgres_cli;
mod postgres_wakeups;
mod restart;
mod restart_fleet;
mod takeover;
mod tokens;

use crate::common::{CliRun, run_gatehost};
use gatehost::store::pg_testdb::TestDb;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// One test's database, its URL (no password in it), and its password in
/// an owner-only file of the test's own, as `[store] password_file` reads
/// it.
pub struct Pg {
    pub db: TestDb,
    pub url: String,
    pub password: String,
    pub password_file: PathBuf,
    _dir: tempfile::TempDir,
}

/// A fresh database for `test`, or `None` after the loud skip line.
pub fn database(test: &str) -> Option<Pg> {
    let db = TestDb::new(test)?;
    let opts = db.options();
    let password = opts
        .password
        .clone()
        .expect("the test cluster has a password (scripts/pg-cluster.sh makes one)");
    let dir = tempfile::tempdir().expect("tempdir");
    let password_file = dir.path().join("pg.password");
    std::fs::write(&password_file, format!("{password}\n")).expect("write the password");
    std::fs::set_permissions(&password_file, std::fs::Permissions::from_mode(0o600))
        .expect("owner-only");
    Some(Pg {
        url: opts.url.clone(),
        db,
        password,
        password_file,
        _dir: dir,
    })
}

impl Pg {
    /// Runs `sql` in this test's database: the first column of the first
    /// row, as text ("" when none).
    pub fn sql(&self, sql: &str) -> String {
        first(self.db.sql(sql))
    }

    /// Runs `sql` on the cluster's admin connection, as [`Pg::sql`].
    pub fn admin_sql(&self, sql: &str) -> String {
        first(self.db.admin_sql(sql))
    }
}

/// `gatehost store check --json` on `cfg`, as it ran.
pub fn store_check_run(cfg: &Path) -> CliRun {
    run_gatehost(
        &[
            "store".into(),
            "check".into(),
            "--json".into(),
            "--config".into(),
            cfg.display().to_string(),
        ],
        &[],
    )
}

/// `gatehost store check --json` on `cfg`: its exit code and answer.
pub fn store_check(cfg: &Path) -> (i32, serde_json::Value) {
    let run = store_check_run(cfg);
    let v = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("store check --json: {e}: {}{}", run.stdout, run.stderr));
    (run.code, v)
}

fn first(rows: Vec<Vec<Option<String>>>) -> String {
    rows.into_iter()
        .next()
        .and_then(|r| r.into_iter().next().flatten())
        .unwrap_or_default()
}

/// A `[store]` section on `url` with the password in `password_file`.
/// A scratch area with a git workspace and a config allowing the shell
/// programs `allow` on the store `url` (its password in `password_file`).
pub fn workspace_on(
    url: &str,
    password_file: &Path,
    allow: &[&str],
) -> (crate::common::Scratch, PathBuf) {
    let s = crate::common::Scratch::new();
    crate::common::daemon::git_repo(&s.ws);
    let cfg = s.write(
        "config.toml",
        &format!(
            "{}{}",
            crate::common::allow_config(allow),
            store_section(url, password_file)
        ),
    );
    (s, cfg)
}

pub fn store_section(url: &str, password_file: &Path) -> String {
    format!(
        "[store]\nurl = \"{url}\"\npassword_file = \"{}\"\n",
        password_file.display()
    )
}
