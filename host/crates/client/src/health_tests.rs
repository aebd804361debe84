//! The health answers as the typed client reads them: a degraded health
//! (503) is the `store-unavailable` error, an older daemon's health a
//! store that answers.

use super::decode;
use crate::wire::Health;

/// Health while the store is unavailable is a 503 whose body is both
/// the degraded health and an API error: the typed client reads the
/// error. An older daemon's `{ok, version, cursor}` still decodes, as
/// a store that answers.
#[test]
fn a_degraded_health_is_a_store_unavailable_error_and_an_old_health_still_decodes() {
    let degraded = crate::wire::HealthDegraded {
        ok: false,
        status: crate::wire::HealthStatus::Degraded,
        version: "0.1.0".into(),
        cursor: None,
        store: crate::wire::StoreHealth {
            reachable: false,
            error: Some("the database cannot be reached".into()),
            unavailable_since: Some(1),
        },
        error: crate::wire::ErrorDetail {
            code: "store-unavailable".into(),
            message: "the database cannot be reached".into(),
            field: None,
            hint: None,
        },
    };
    let body = serde_json::to_vec(&degraded).expect("json");
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains(r#""status":"degraded""#), "{text}");
    assert!(text.contains(r#""unavailableSince":1"#), "{text}");
    let back: crate::wire::HealthDegraded = serde_json::from_slice(&body).expect("typed");
    assert_eq!(back, degraded);
    let e = decode::<Health>(503, &body, "/v1/health").expect_err("an error");
    assert_eq!(e.code(), "store-unavailable");
    assert_eq!(e.status(), Some(503));
    let old = decode::<Health>(
        200,
        br#"{"ok": true, "version": "0.1.0", "cursor": 7}"#,
        "/v1/health",
    )
    .expect("an older daemon's health");
    assert_eq!(old.status, crate::wire::HealthStatus::Ok);
    assert!(old.store.reachable);
    assert_eq!(old.cursor, 7);
}
