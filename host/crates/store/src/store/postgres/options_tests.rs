//! The options read without a server: `sslmode`, a password in the URL
//! refused and never echoed, the location and `Debug` without a password.

use super::options::{PgOptions, Tls, redacted};
use crate::store::StoreError;

fn opts(url: &str) -> PgOptions {
    PgOptions {
        url: url.into(),
        password: Some("s3cret-pw".into()),
        application_name: "gatehost/test".into(),
    }
}

#[test]
fn sslmode_chooses_the_tls() {
    for (mode, tls) in [
        ("", Tls::Off),
        ("?sslmode=disable", Tls::Off),
        ("?sslmode=allow", Tls::Off),
        ("?sslmode=prefer", Tls::Prefer),
        ("?sslmode=require", Tls::Require),
        ("?sslmode=verify-ca", Tls::Require),
        ("?application_name=x&sslmode=verify-full", Tls::Require),
    ] {
        let parsed = opts(&format!("postgres://gh@db.example:5433/fleet{mode}"))
            .parse()
            .expect("parses");
        assert_eq!(parsed.tls, tls, "{mode}");
        assert_eq!(parsed.location, "postgres://gh@db.example:5433/fleet");
        assert_eq!(parsed.config.get_password(), Some(&b"s3cret-pw"[..]));
    }
    let err = opts("postgres://gh@db/fleet?sslmode=sometimes")
        .parse()
        .err()
        .expect("refused");
    assert!(err.to_string().contains("sometimes"), "{err}");
}

#[test]
fn a_password_in_the_url_is_refused_and_never_echoed() {
    for url in [
        "postgres://gh:hunter2-in-url@db/fleet",
        "postgres://gh@db/fleet?password=hunter2-in-url",
    ] {
        let o = PgOptions {
            password: None,
            ..opts(url)
        };
        let err = o.parse().err().expect("refused");
        assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
        for shown in [err.to_string(), format!("{err:?}"), format!("{o:?}")] {
            assert!(!shown.contains("hunter2"), "{shown}");
        }
    }
}

#[test]
fn debug_and_redaction_never_show_a_password() {
    let o = opts("postgres://gh@db/fleet");
    let shown = format!("{o:?}");
    assert!(!shown.contains("s3cret-pw"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
    assert_eq!(
        redacted("postgresql://a:b@h:1/d?sslmode=require&password=c"),
        "postgresql://a:<redacted>@h:1/d?sslmode=require&password=<redacted>"
    );
    assert_eq!(redacted("postgres://a@h/d"), "postgres://a@h/d");
}

/// No server where the URL says: `Unreachable` (retry later), naming the
/// place, never the password.
#[test]
fn no_server_is_unreachable() {
    let o = opts("postgres://gh@127.0.0.1:1/fleet");
    let err = crate::store::Store::open_postgres(&o).expect_err("nothing listens on port 1");
    assert!(matches!(err, StoreError::Unreachable(_)), "{err:?}");
    assert!(err.is_unavailable());
    let text = err.to_string();
    assert!(text.starts_with("the database cannot be reached"), "{text}");
    assert!(!text.contains("s3cret-pw") && !format!("{err:?}").contains("s3cret-pw"));
}
