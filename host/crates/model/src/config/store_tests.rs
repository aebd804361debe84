//! Tests of the `[store]` section (`store.rs`).

use super::*;
use crate::config::{ConfigError, HostConfig};

fn parse(text: &str) -> Result<StoreConfig, (String, String)> {
    let section: StoreSection = toml::from_str(text).expect("toml");
    section.resolve()
}

fn postgres(text: &str) -> PostgresConfig {
    parse(text)
        .expect("valid")
        .postgres
        .expect("a PostgreSQL store")
}

#[test]
fn without_a_url_the_store_is_the_embedded_sqlite_file() {
    assert_eq!(parse("").expect("empty"), StoreConfig::default());
    assert!(
        HostConfig::from_toml("", "c.toml")
            .expect("defaults")
            .store
            .postgres
            .is_none()
    );
    // What only a PostgreSQL store has is refused without one.
    for text in [
        "password_file = \"/p\"",
        "application_name = \"x\"",
        "lease = \"20s\"",
        "grace = \"20s\"",
        "shared_workspaces = true",
    ] {
        let (key, message) = parse(text).expect_err(text);
        assert!(key.starts_with("store."), "{key}");
        assert!(message.contains("without store.url"), "{message}");
    }
}

#[test]
fn a_postgres_url_parses_with_its_defaults() {
    let pg = postgres("url = \"postgres://gatehost@db.example:5432/gatehost?sslmode=require\"");
    assert_eq!(
        pg.url,
        "postgres://gatehost@db.example:5432/gatehost?sslmode=require"
    );
    assert_eq!(pg.password_file, None);
    assert!(
        pg.application_name.starts_with("gatehost/") && pg.application_name.len() > 9,
        "{}",
        pg.application_name
    );
    assert!(pg.application_name.len() <= APPLICATION_NAME_MAX);
    let pg = postgres(
        "url = \"postgresql://u@[::1]:5433/d\"\npassword_file = \"/etc/gatehost/pg.password\"\napplication_name = \"gatehost/pod-7\"",
    );
    assert_eq!(
        pg.password_file.as_deref(),
        Some(Path::new("/etc/gatehost/pg.password"))
    );
    assert_eq!(pg.application_name, "gatehost/pod-7");
    // A Unix socket directory as the host parameter.
    postgres("url = \"postgres://gatehost@/gatehost?host=/run/postgresql\"");
    for mode in SSL_MODES {
        postgres(&format!("url = \"postgres://u@h/d?sslmode={mode}\""));
    }
}

#[test]
fn a_url_holding_a_password_is_refused_without_being_quoted() {
    let secret = "s3cr3t-Pa55";
    for url in [
        format!("postgres://u:{secret}@h:5432/d"),
        format!("postgresql://u:{secret}@h/d?sslmode=require"),
        // An empty password is a password field all the same.
        "postgres://u:@h/d".to_string(),
        format!("postgres://u@h/d?password={secret}"),
        format!("postgres://u@h/d?sslmode=disable&PassWord={secret}"),
        // Percent-encoded key: the driver decodes it.
        format!("postgres://u@h/d?pass%77ord={secret}"),
        // An `@` in the password: the userinfo ends at the last one.
        format!("postgres://u:{secret}@x@h/d"),
    ] {
        let (key, message) = parse(&format!("url = \"{url}\"")).expect_err(&url);
        assert_eq!(key, "store.url");
        assert!(message.contains("password_file"), "{message}");
        assert!(message.contains(PASSWORD_ENV), "{message}");
        assert!(!message.contains(secret), "{message}");
        // Through the whole configuration, too: the error a person sees.
        let err = HostConfig::from_toml(&format!("[store]\nurl = \"{url}\"\n"), "c.toml")
            .expect_err(&url);
        let shown = format!("{err} {err:?}");
        assert!(matches!(err, ConfigError::Invalid { .. }), "{shown}");
        assert!(!shown.contains(secret), "{shown}");
    }
}

#[test]
fn other_urls_are_refused_with_a_reason() {
    for (url, says) in [
        ("mysql://u@h/d", "postgres://"),
        ("http://u@h/d", "postgres://"),
        ("host=h user=u dbname=d", "postgres://"),
        ("postgres:/h/d", "postgres://"),
        ("postgres://u@h/d?sslmode=allow", "sslmode"),
        ("postgres://u@h/d?sslmode=verify_full", "sslmode"),
        ("postgres://u@h/d b", "space"),
        ("postgres:///d", "no host"),
        ("postgres://u@/d", "no host"),
    ] {
        let (key, message) = parse(&format!("url = \"{url}\"")).expect_err(url);
        assert_eq!(key, "store.url", "{url}");
        assert!(message.contains(says), "{url}: {message}");
    }
}

#[test]
fn bad_names_and_files_are_refused() {
    for (text, key) in [
        (
            "url = \"postgres://u@h/d\"\napplication_name = \"\"",
            "store.application_name",
        ),
        (
            "url = \"postgres://u@h/d\"\napplication_name = \"caf\u{e9}\"",
            "store.application_name",
        ),
        (
            "url = \"postgres://u@h/d\"\napplication_name = \"a\\nb\"",
            "store.application_name",
        ),
        (
            format!(
                "url = \"postgres://u@h/d\"\napplication_name = \"{}\"",
                "x".repeat(64)
            )
            .as_str(),
            "store.application_name",
        ),
        (
            "url = \"postgres://u@h/d\"\npassword_file = \" \"",
            "store.password_file",
        ),
    ] {
        let (k, _) = parse(text).expect_err(text);
        assert_eq!(k, key, "{text}");
    }
}

#[test]
fn an_unknown_key_is_refused() {
    let err = HostConfig::from_toml(
        "[store]\nurl = \"postgres://u@h/d\"\npassword = \"x\"\n",
        "c.toml",
    )
    .expect_err("password is not a key");
    assert!(err.to_string().contains("password"), "{err}");
}

fn with_file(content: &[u8]) -> (tempfile::TempDir, PostgresConfig) {
    let d = tempfile::tempdir().expect("tempdir");
    let path = d.path().join("pg.password");
    std::fs::write(&path, content).expect("write");
    let pg = PostgresConfig {
        url: "postgres://u@h/d".into(),
        password_file: Some(path),
        application_name: "gatehost/t".into(),
        lease: crate::config::DEFAULT_LEASE,
        grace: crate::config::DEFAULT_GRACE,
        shared_workspaces: false,
    };
    (d, pg)
}

#[test]
fn the_password_file_is_read_with_its_trailing_newline_trimmed() {
    for (content, want) in [
        (&b"hunter2\n"[..], "hunter2"),
        (b"hunter2\r\n", "hunter2"),
        (b"hunter2", "hunter2"),
        // Only the one newline: spaces are the password's.
        (b" hunter2 \n", " hunter2 "),
    ] {
        let (_d, pg) = with_file(content);
        assert_eq!(pg.password().expect("read").as_deref(), Some(want));
    }
}

#[test]
fn an_unusable_password_file_is_named_and_its_content_never_shown() {
    let secret = "very-secret-1";
    for content in [
        format!("{secret}\nsecond line\n").into_bytes(),
        b"\n".to_vec(),
        Vec::new(),
        {
            let mut b = secret.as_bytes().to_vec();
            b.push(0xff);
            b
        },
    ] {
        let (_d, pg) = with_file(&content);
        let err = pg.password().expect_err("unusable");
        let shown = format!("{err} {err:?}");
        assert!(shown.contains("pg.password"), "{shown}");
        assert!(!shown.contains(secret), "{shown}");
    }
    let (d, mut pg) = with_file(b"x\n");
    pg.password_file = Some(d.path().join("missing"));
    let err = pg.password().expect_err("missing");
    assert!(matches!(err, PasswordError::Read { .. }), "{err:?}");
    assert!(err.to_string().contains("missing"), "{err}");
    // A directory or a FIFO is no password file either (a FIFO would
    // block the start until someone writes to it).
    pg.password_file = Some(d.path().to_path_buf());
    assert!(pg.password().is_err());
    let fifo = d.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    pg.password_file = Some(fifo);
    let err = pg.password().expect_err("a FIFO");
    assert!(err.to_string().contains("not a regular file"), "{err}");
}

#[test]
fn checked_passwords_refuse_what_the_variable_could_hold() {
    assert_eq!(check_password("pw\n".into(), "$V").expect("one line"), "pw");
    for bad in ["", "\n", "a\nb", "a\rb", "a\0b"] {
        let err = check_password(bad.into(), "$V").expect_err(bad);
        assert!(err.to_string().starts_with("$V: "), "{err}");
    }
}

#[test]
fn the_default_application_name_is_printable_and_short_enough() {
    let name = default_application_name();
    assert!(check_application_name(&name).is_ok(), "{name}");
}

#[test]
fn the_password_variable_is_never_passed_to_a_gate_or_a_judge() {
    for (text, key) in [
        (
            "[shell]\npass_env = [\"GATEHOST_STORE_PASSWORD\"]\n",
            "shell.pass_env",
        ),
        (
            "[judge.adapters.mine]\ncommand = [\"/bin/true\"]\nenv = [\"GATEHOST_STORE_PASSWORD\"]\n",
            "judge.adapters.mine.env",
        ),
    ] {
        match HostConfig::from_toml(text, "c.toml") {
            Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key, "{text}"),
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn the_lease_the_grace_and_shared_workspaces_parse_with_their_bounds() {
    let url = "url = \"postgres://g@db/g\"\n";
    let pg = postgres(url);
    assert_eq!(pg.lease, DEFAULT_LEASE);
    assert_eq!(pg.grace, DEFAULT_GRACE);
    assert!(
        !pg.shared_workspaces,
        "workspaces are not shared unless said"
    );
    let pg = postgres(&format!(
        "{url}lease = \"6s\"\ngrace = \"2s\"\nshared_workspaces = true"
    ));
    assert_eq!(pg.lease, std::time::Duration::from_secs(6));
    assert_eq!(pg.grace, std::time::Duration::from_secs(2));
    assert!(pg.shared_workspaces);
    // A grace under one renewal (a third of the lease) is refused.
    let (key, message) =
        parse(&format!("{url}lease = \"6s\"\ngrace = \"1s\"")).expect_err("too short");
    assert_eq!(key, "store.grace");
    assert!(message.contains("at least 2s"), "{message}");
    let (key, _) = parse(&format!("{url}lease = \"2s\"")).expect_err("lease too short");
    assert_eq!(key, "store.lease");
}
