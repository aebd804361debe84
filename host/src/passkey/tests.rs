//! The ceremonies' unit tests: codes, logins, caps, purposes.

use super::*;

fn code() -> Option<Grant<'static>> {
    Some(Grant::Code(enrol::Checked::for_tests("ABCDE")))
}

#[test]
fn an_ip_origin_refuses_every_ceremony_and_says_why() {
    let p = Passkeys::new("http://127.0.0.1:7000");
    assert!(p.unavailable().is_some());
    let e = p
        .begin_assertion("bearer", Purpose::AddPasskey, &[])
        .expect_err("refused");
    assert!(e.to_string().contains("IP address"), "{e}");
    assert!(e.to_string().contains("localhost"), "{e}");
}

#[test]
fn a_localhost_origin_is_a_relying_party_and_a_first_registration_needs_the_code() {
    let p = Passkeys::new("http://localhost:7000");
    assert_eq!(p.unavailable(), None);
    assert_eq!(p.rp_id(), "localhost");
    assert!(matches!(
        p.begin_registration("a", Uuid::new_v4(), "laptop", &[], None),
        Err(PasskeyError::Enrol(enrol::EnrolError::Missing))
    ));
    let (id, options) = p
        .begin_registration("a", Uuid::new_v4(), "laptop", &[], code())
        .expect("begins");
    let json = serde_json::to_value(&options).expect("json");
    assert_eq!(json["publicKey"]["rp"]["id"], "localhost");
    assert_eq!(
        json["publicKey"]["authenticatorSelection"]["userVerification"],
        "required"
    );
    // Another login cannot answer it (nor spend it); its own answer
    // spends it, whatever it is.
    assert!(matches!(
        p.take("b", &id),
        Err(PasskeyError::UnknownCeremony)
    ));
    assert!(p.take("a", &id).is_ok());
    assert!(matches!(
        p.take("a", &id),
        Err(PasskeyError::UnknownCeremony)
    ));
    assert!(matches!(
        p.take("a", "never-made"),
        Err(PasskeyError::UnknownCeremony)
    ));
}

#[test]
fn a_bad_name_and_an_assertion_with_nothing_registered_are_refused() {
    let p = Passkeys::new("http://localhost:7000");
    for bad in ["", "  ", "a\nb", &"x".repeat(MAX_NAME + 1)] {
        assert!(matches!(
            p.begin_registration("a", Uuid::new_v4(), bad, &[], code()),
            Err(PasskeyError::BadName(_))
        ));
    }
    assert!(matches!(
        p.begin_assertion("a", Purpose::AddPasskey, &[]),
        Err(PasskeyError::NoneRegistered)
    ));
}

#[test]
fn an_expired_ceremony_is_refused_and_a_login_past_its_cap_drops_only_its_own() {
    let p = Passkeys::new("http://localhost:7000");
    let begin = |login: &str, i: usize| {
        p.begin_registration(login, Uuid::new_v4(), &format!("k{i}"), &[], code())
    };
    let (id, _) = begin("a", 0).expect("begins");
    p.inner
        .pending
        .lock()
        .expect("lock")
        .get_mut(&id)
        .expect("held")
        .expires = Instant::now();
    assert!(matches!(
        p.take("a", &id),
        Err(PasskeyError::UnknownCeremony)
    ));
    // The operator's one ceremony, then another login's flood.
    let (operator, _) = begin("operator", 0).expect("begins");
    let flood: Vec<String> = (0..=MAX_PER_LOGIN * 3)
        .map(|i| begin("flooder", i).expect("begins").0)
        .collect();
    assert_eq!(
        p.inner.pending.lock().expect("lock").len(),
        MAX_PER_LOGIN + 1
    );
    assert!(p.take("flooder", &flood[0]).is_err(), "its oldest dropped");
    assert!(p.take("flooder", &flood[MAX_PER_LOGIN * 3]).is_ok());
    assert!(p.take("operator", &operator).is_ok(), "the operator's kept");
    // Past the cap in all, a new one is refused; none is dropped.
    let mut i = 0;
    while p.inner.pending.lock().expect("lock").len() < MAX_PENDING {
        begin(&format!("l{i}"), 0).expect("begins");
        i += 1;
    }
    let held = p.inner.pending.lock().expect("lock").len();
    assert_eq!(held, MAX_PENDING);
    assert!(matches!(begin("late", 0), Err(PasskeyError::Busy)));
    assert_eq!(p.inner.pending.lock().expect("lock").len(), held);
}

#[test]
fn a_stored_passkey_ends_the_ceremonies_begun_on_the_code() {
    let p = Passkeys::new("http://localhost:7000");
    let (a, _) = p
        .begin_registration("a", Uuid::new_v4(), "k", &[], code())
        .expect("begins");
    assert_eq!(p.drop_unproven(), 1);
    assert!(matches!(
        p.take("a", &a),
        Err(PasskeyError::UnknownCeremony)
    ));
}

#[test]
fn a_proof_is_for_its_purpose_only() {
    let proof = Proof {
        passkey_id: "c".into(),
        name: "laptop".into(),
        purpose: Purpose::Approve {
            policy: "p1".into(),
            tree: "t1".into(),
        },
        updated: None,
    };
    assert!(
        proof
            .require(&Purpose::Approve {
                policy: "p1".into(),
                tree: "t1".into()
            })
            .is_ok()
    );
    for other in [
        Purpose::Approve {
            policy: "p1".into(),
            tree: "t2".into(),
        },
        Purpose::Approve {
            policy: "p2".into(),
            tree: "t1".into(),
        },
        Purpose::AddPasskey,
    ] {
        assert!(proof.require(&other).is_err(), "{other}");
    }
}
