//! `gatehost store migrate|check` on an empty database, one migrated and
//! one written by a newer gatehost; on a database that cannot be reached;
//! and on the embedded SQLite default (no cluster needed). A URL holding a
//! password is refused before anything connects.

use super::{database, store_section};
use crate::common::Scratch;
use crate::common::daemon::serve_command;
use crate::common::shorthand::gatehost;
use serde_json::Value;

fn store(cmd: &str, cfg: &std::path::Path, extra: &[&str]) -> crate::common::CliRun {
    let cfg = cfg.display().to_string();
    let mut args = vec!["store", cmd, "--config", cfg.as_str()];
    args.extend_from_slice(extra);
    gatehost(&args)
}

fn json(run: &crate::common::CliRun) -> Value {
    serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", run.stdout, run.stderr))
}

#[test]
fn migrate_makes_the_schema_once_and_check_tells_missing_current_and_newer() {
    let Some(pg) = database("store::postgres_cli::migrate_and_check") else {
        return;
    };
    let s = Scratch::new();
    let cfg = s.write("config.toml", &store_section(&pg.url, &pg.password_file));
    // An empty database: no schema, exit 1, nothing made by the look.
    let run = store("check", &cfg, &["--json"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let v = json(&run);
    assert_eq!(v["schemaVersion"], Value::Null);
    assert_eq!(v["ok"], false);
    assert!(
        v["serverVersion"].as_str().is_some_and(|s| !s.is_empty()),
        "{v}"
    );
    let tables = pg.sql(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()",
    );
    assert_eq!(tables, "0", "check changed nothing");
    let known = v["knownSchemaVersion"].as_i64().expect("known");
    // Migrated once; again, nothing to do.
    let run = store("migrate", &cfg, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains(&format!("→ {known}")), "{}", run.stdout);
    let run = store("migrate", &cfg, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(&format!("schema {known}: up to date")),
        "{}",
        run.stdout
    );
    let run = store("check", &cfg, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("PostgreSQL"), "{}", run.stdout);
    assert!(run.stdout.contains(&pg.url), "{}", run.stdout);
    let v = json(&store("check", &cfg, &["--json"]));
    assert_eq!(v["schemaVersion"].as_i64(), Some(known));
    assert_eq!(v["headCursor"].as_i64(), Some(0), "{v}");
    assert_eq!(v["ok"], true);
    // A newer gatehost's schema: refused by check (exit 1) and by serve.
    pg.sql(&format!(
        "UPDATE meta SET value = '{}' WHERE key = 'schema'",
        known + 1
    ));
    let run = store("check", &cfg, &["--json"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        json(&run)["schema"]
            .as_str()
            .is_some_and(|s| s.contains("newer"))
    );
    let out = serve_command(&s.etc.join("data"), &cfg, "127.0.0.1:0")
        .output()
        .expect("run serve");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&pg.url) && err.contains("newer"), "{err}");
}

#[test]
fn a_database_that_cannot_be_reached_is_an_error_naming_it() {
    let s = Scratch::new();
    let pw = s.write("pg.password", "pw-that-must-not-show\n");
    // Port 1 on loopback: nothing listens.
    let url = "postgres://gatehost@127.0.0.1:1/gatehost";
    let cfg = s.write("config.toml", &store_section(url, &pw));
    for cmd in ["check", "migrate"] {
        let run = store(cmd, &cfg, &[]);
        assert_eq!(run.code, 2, "{cmd}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(url), "{cmd}: {}", run.stderr);
        assert!(
            !run.stderr.contains("pw-that-must-not-show"),
            "{}",
            run.stderr
        );
    }
    let run = store("check", &cfg, &["--json"]);
    assert_eq!(run.code, 2);
    assert_eq!(json(&run)["error"]["code"], "store");
    let out = serve_command(&s.etc.join("data"), &cfg, "127.0.0.1:0")
        .output()
        .expect("run serve");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(url), "{err}");
    assert!(!err.contains("pw-that-must-not-show"), "{err}");
    // An unreadable password file names the file, at start.
    let cfg = s.write(
        "missing.toml",
        &store_section(url, &s.etc.join("no-such-file")),
    );
    let out = serve_command(&s.etc.join("data"), &cfg, "127.0.0.1:0")
        .output()
        .expect("run serve");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no-such-file"), "{err}");
}

#[test]
fn a_url_holding_a_password_is_refused_without_showing_it() {
    let s = Scratch::new();
    let cfg = s.write(
        "config.toml",
        "[store]\nurl = \"postgres://gatehost:hunter2-secret@127.0.0.1:5432/gatehost\"\n",
    );
    for run in [
        store("check", &cfg, &[]),
        store("migrate", &cfg, &[]),
        gatehost(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            &s.etc.join("data").display().to_string(),
            "--config",
            &cfg.display().to_string(),
        ]),
    ] {
        assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains("store.url"), "{}", run.stderr);
        assert!(run.stderr.contains("password_file"), "{}", run.stderr);
        assert!(!run.stderr.contains("hunter2-secret"), "{}", run.stderr);
        assert!(!run.stdout.contains("hunter2-secret"), "{}", run.stdout);
    }
}

#[test]
fn without_a_url_both_commands_name_the_sqlite_file_and_succeed() {
    let s = Scratch::new();
    let cfg = s.write("config.toml", "");
    let data = s.etc.join("data");
    let data_arg = data.display().to_string();
    let file = data.join("gatehost.db").display().to_string();
    let run = store("check", &cfg, &["--data-dir", &data_arg]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains(&file), "{}", run.stdout);
    assert!(run.stdout.contains("not made yet"), "{}", run.stdout);
    let run = store("migrate", &cfg, &["--data-dir", &data_arg]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains(&file), "{}", run.stdout);
    // Neither made the data directory or the file.
    assert!(!data.exists());
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(&file, "").expect("touch");
    let v = json(&store("check", &cfg, &["--data-dir", &data_arg, "--json"]));
    assert_eq!(v["backend"], "sqlite");
    assert_eq!(v["path"], file.as_str());
    assert_eq!(v["exists"], true);
}
