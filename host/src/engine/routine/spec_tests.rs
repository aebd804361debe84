//! A routine's spec: what `validate` refuses and how it says so, the
//! forms of `waitFor`, the spec's JSON (unknown fields refused) and the
//! done marker a step's last message ends with.

use super::*;

fn step(label: &str, wait: &[&str]) -> StepSpec {
    StepSpec {
        label: label.into(),
        prompt: None,
        session: SessionSpec::Acp {
            command: vec!["agent".into()],
            cwd: "/tmp".into(),
            permission: None,
        },
        wait_for: if wait.is_empty() {
            WaitFor::default()
        } else {
            WaitFor::All(wait.iter().map(|w| w.to_string()).collect())
        },
        policy: None,
        on_input: OnInput::default(),
    }
}

#[test]
fn specs_are_checked() {
    let ok = RoutineSpec {
        label: None,
        steps: vec![step("a", &[]), step("b", &["a", "sess-elsewhere"])],
    };
    assert_eq!(ok.validate(), Ok(()));
    let none = RoutineSpec {
        label: None,
        steps: vec![],
    };
    assert_eq!(none.validate(), Err(SpecError::NoSteps));
    let dup = RoutineSpec {
        label: None,
        steps: vec![step("a", &[]), step("a", &[])],
    };
    assert_eq!(dup.validate(), Err(SpecError::DuplicateLabel("a".into())));
    let later = RoutineSpec {
        label: None,
        steps: vec![step("a", &["b"]), step("b", &[])],
    };
    assert!(matches!(
        later.validate(),
        Err(SpecError::WaitsForLater { .. })
    ));
    let itself = RoutineSpec {
        label: None,
        steps: vec![step("a", &["a"])],
    };
    assert!(matches!(
        itself.validate(),
        Err(SpecError::WaitsForLater { .. })
    ));
    let mut empty = step("a", &[]);
    empty.session = SessionSpec::Acp {
        command: vec![],
        cwd: "/".into(),
        permission: None,
    };
    let spec = RoutineSpec {
        label: None,
        steps: vec![empty],
    };
    assert_eq!(spec.validate(), Err(SpecError::EmptyCommand("a".into())));
    let mut zero = step("a", &[]);
    zero.on_input = OnInput::Escalate { timeout_secs: 0 };
    let spec = RoutineSpec {
        label: None,
        steps: vec![zero],
    };
    assert_eq!(spec.validate(), Err(SpecError::ZeroTimeout("a".into())));
    let one = |s: StepSpec| RoutineSpec {
        label: None,
        steps: vec![s],
    };
    let mut never = step("a", &[]);
    never.on_input = OnInput::AutoAllow {
        prompt: "go".into(),
        max: 0,
    };
    assert_eq!(
        one(never).validate(),
        Err(SpecError::ZeroAutoAllow("a".into()))
    );
    let mut no_policy = step("a", &[]);
    no_policy.wait_for = WaitFor::Finish(Finish::Policy);
    assert_eq!(
        one(no_policy.clone()).validate(),
        Err(SpecError::PolicyMissing("a".into()))
    );
    let mut unused = step("a", &[]);
    unused.policy = Some(serde_json::json!({"gate": {"command": "true"}}).into());
    assert_eq!(
        one(unused).validate(),
        Err(SpecError::PolicyUnused("a".into()))
    );
    for body in [
        serde_json::json!({"sessionId": "other", "gate": {"command": "true"}}),
        serde_json::json!({"sessionIds": ["other"]}),
        serde_json::json!(["not", "an", "object"]),
    ] {
        let mut named = no_policy.clone();
        named.policy = Some(body.clone().into());
        assert_eq!(
            one(named).validate(),
            Err(SpecError::PolicyNamesSession("a".into())),
            "{body}"
        );
    }
    let mut ok = no_policy;
    ok.policy = Some(serde_json::json!({"gate": {"command": "true"}}).into());
    assert_eq!(one(ok).validate(), Ok(()));
}

#[test]
fn wait_for_takes_its_three_forms_and_names_them_when_wrong() {
    let parse = |w: &str| serde_json::from_str::<WaitFor>(w);
    assert_eq!(
        parse(r#""turn-end""#).unwrap(),
        WaitFor::Finish(Finish::TurnEnd)
    );
    assert_eq!(
        parse(r#""policy""#).unwrap(),
        WaitFor::Finish(Finish::Policy)
    );
    assert_eq!(
        parse(r#"["a","s1"]"#).unwrap(),
        WaitFor::All(vec!["a".into(), "s1".into()])
    );
    for bad in [r#""later""#, "3", r#"{"policy":1}"#] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.contains("\"turn-end\", \"policy\""), "{bad}: {e}");
    }
    assert_eq!(WaitFor::All(vec!["a".into()]).prerequisites(), ["a"]);
    assert_eq!(WaitFor::All(vec!["a".into()]).finish(), Finish::TurnEnd);
    assert!(WaitFor::Finish(Finish::Policy).prerequisites().is_empty());
    // Stored as written: the default is left out, the rest round-trips.
    for w in [
        WaitFor::Finish(Finish::Policy),
        WaitFor::All(vec!["a".into()]),
    ] {
        let json = serde_json::to_string(&w).unwrap();
        assert_eq!(parse(&json).unwrap(), w, "{json}");
    }
}

#[test]
fn a_spec_parses_from_its_json_and_unknown_fields_are_refused() {
    let spec: RoutineSpec = serde_json::from_str(
        r#"{"steps":[{"label":"a","prompt":"hi","session":{"acp":{"command":["x"],"cwd":"/w"}},
            "onInput":{"mode":"auto-allow","prompt":"go on"}},
           {"label":"b","session":{"existing":"s1"},"waitFor":["a"],"onInput":{"mode":"escalate"}}]}"#,
    )
    .unwrap();
    assert_eq!(
        spec.steps[1].on_input,
        OnInput::Escalate {
            timeout_secs: DEFAULT_ESCALATION_SECS
        }
    );
    assert_eq!(spec.steps[1].session, SessionSpec::Existing("s1".into()));
    assert!(serde_json::from_str::<RoutineSpec>(r#"{"steps":[],"evil":1}"#).is_err());
}

#[test]
fn the_done_marker_is_a_line_of_its_own() {
    assert!(finishes_step(Some("work done\nSTEP DONE\n")));
    assert!(finishes_step(Some("**step done**")));
    assert!(!finishes_step(Some("I am not STEP DONE yet?")));
    assert!(!finishes_step(None));
    assert!(step_prompt(&step("a", &[])).contains(STEP_DONE));
    let mut gated = step("a", &[]);
    gated.wait_for = WaitFor::Finish(Finish::Policy);
    assert!(!step_prompt(&gated).contains(STEP_DONE));
}
