use super::*;
use crate::store::EventRow;
use serde_json::{Value, json};

/// An event as the store reads it: a policy or review event gets its
/// policy's head (id, status, members) when the payload leaves it out.
fn event(kind: &str, policy: Option<&str>, mut payload: Value) -> EventRow {
    if let (Some(p), Value::Object(m)) = (policy, &mut payload)
        && (kind.starts_with("policy:") || kind.starts_with("review:"))
    {
        m.entry("policyId").or_insert(json!(p));
        m.entry("status").or_insert(json!("blocked"));
        m.entry("sessionIds").or_insert(json!(["claude:abc"]));
    }
    let event = crate::model::event::Event::decode(kind, payload);
    EventRow {
        host: None,
        cursor: 7,
        at: 1_700_000_000_000,
        session_id: Some("claude:abc".into()),
        policy_id: policy.map(str::to_string),
        event,
        damage: None,
    }
}

fn json_of(b: &Body) -> Value {
    serde_json::from_slice(&b.bytes).expect("a JSON body")
}

#[test]
fn each_format_has_its_receivers_shape() {
    let e = event(
        "policy:blocked",
        Some("p1"),
        json!({"outcome": "fail", "reason": "cargo test failed"}),
    );
    let m = message(&e, Some("http://127.0.0.1:7000"));
    assert_eq!(m.title, "gatehost: policy p1 is blocked");
    assert!(m.text.contains("out of retries") && m.text.contains("cargo test failed"));
    assert_eq!(
        m.link.as_deref(),
        Some("http://127.0.0.1:7000/ui/#policy/p1")
    );

    let raw = render(Format::Raw, &e, &m);
    assert_eq!(raw.content_type, "application/json");
    assert_eq!(json_of(&raw)["type"], "policy:blocked");
    assert_eq!(json_of(&raw)["cursor"], 7);

    let slack = json_of(&render(Format::Slack, &e, &m));
    let text = slack["text"].as_str().expect("text");
    assert!(
        text.starts_with("*gatehost: policy p1 is blocked*\n"),
        "{text}"
    );
    assert!(text.ends_with("<http://127.0.0.1:7000/ui/#policy/p1|Open the policy>"));
    assert_eq!(slack.as_object().map(|o| o.len()), Some(1));

    let discord = json_of(&render(Format::Discord, &e, &m));
    assert!(
        discord["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("**gatehost: policy p1 is blocked**"))
    );
    assert_eq!(discord["allowed_mentions"], json!({"parse": []}));

    let ntfy = render(Format::Ntfy, &e, &m);
    assert!(ntfy.content_type.starts_with("text/plain"));
    assert!(String::from_utf8_lossy(&ntfy.bytes).contains("cargo test failed"));
    let h = |n: &str| {
        ntfy.headers
            .iter()
            .find(|(k, _)| *k == n)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        h("Title").as_deref(),
        Some("gatehost: policy p1 is blocked")
    );
    assert_eq!(h("Priority").as_deref(), Some("high"));
    assert_eq!(
        h("Click").as_deref(),
        Some("http://127.0.0.1:7000/ui/#policy/p1")
    );
    assert_eq!(h("Tags").as_deref(), Some("no_entry"));
}

#[test]
fn the_agents_text_never_becomes_markup_a_mention_or_a_header() {
    let hostile = "<!channel> @everyone <@U123> <https://evil.example|your bank> \
                   **bold** [x](https://evil.example)\r\nTitle: forged\u{202e}gnp.exe\x1b[31m";
    let e = event(
        "policy:blocked",
        Some("p1"),
        json!({"outcome": "error", "reason": hostile}),
    );
    let m = message(&e, Some("http://127.0.0.1:7000"));
    // One line, no control or bidi characters.
    assert!(!m.text.contains('\n') && !m.text.contains('\r') && !m.text.contains('\u{1b}'));
    assert!(!m.text.contains('\u{202e}'));

    let slack = json_of(&render(Format::Slack, &e, &m));
    let text = slack["text"].as_str().expect("text");
    assert!(
        !text.contains("<!channel>") && !text.contains("<@U123>"),
        "{text}"
    );
    assert!(!text.contains("<https://evil.example"), "{text}");
    assert!(text.contains("&lt;!channel&gt;"), "{text}");
    // The one link is gatehost's.
    assert_eq!(text.matches('<').count(), 1, "{text}");

    let discord = json_of(&render(Format::Discord, &e, &m));
    let content = discord["content"].as_str().expect("content");
    assert!(
        content.contains("\\@everyone") && content.contains("\\<\\@U123\\>"),
        "{content}"
    );
    assert!(content.contains("\\*\\*bold\\*\\*"), "{content}");
    assert!(
        content.contains("\\[x\\]\\(https://evil.example\\)"),
        "{content}"
    );
    assert_eq!(discord["allowed_mentions"]["parse"], json!([]));

    let ntfy = render(Format::Ntfy, &e, &m);
    for (_, v) in &ntfy.headers {
        assert!(v.chars().all(|c| (' '..='~').contains(&c)), "{v:?}");
    }
}

#[test]
fn long_text_is_cut_within_each_receivers_limit() {
    let e = event(
        "policy:blocked",
        Some("p1"),
        json!({"outcome": "fail", "reason": "é".repeat(100_000)}),
    );
    let m = message(&e, None);
    assert!(m.text.chars().count() <= message::MAX_REASON_CHARS + 60);
    assert!(m.text.ends_with('…'));
    let discord = json_of(&render(Format::Discord, &e, &m));
    assert!(discord["content"].as_str().expect("content").len() <= 2000);
    let slack = json_of(&render(Format::Slack, &e, &m));
    assert!(slack["text"].as_str().expect("text").len() <= 3000);
    assert!(render(Format::Ntfy, &e, &m).bytes.len() <= 4096);
    // No link without a base.
    assert_eq!(m.link, None);
}

#[test]
fn every_attention_event_has_its_own_words() {
    let cases = [
        (
            "policy:blocked",
            json!({"outcome": "fail", "reason": "r"}),
            "is blocked",
        ),
        (
            "policy:commit-ready",
            json!({"plan": null}),
            "awaits your review",
        ),
        ("policy:commit-failed", json!({"reason": "r"}), "commit of"),
        (
            "policy:expired",
            json!({"deadlineAt": 1, "was": "watching", "reason": "r"}),
            "deadline",
        ),
        ("policy:next-refused", json!({"reason": "r"}), "next step"),
        (
            "review:escalated",
            json!({"cycle": 5, "maxCycles": 5, "reason": "r"}),
            "escalates to you",
        ),
        (
            "session:stale",
            json!({"sessionId": "claude:abc", "lastHeardAt": 0, "silentMs": 90_000, "timeoutMs": 60_000, "onStale": "block"}),
            "gone silent",
        ),
        (
            "session:policy-refused",
            json!({"sessionId": "claude:abc", "file": "/p.json", "reason": "r"}),
            "session policy",
        ),
        (
            "config:rejected",
            json!({"source": "/c.toml", "trigger": "signal", "reason": "r"}),
            "rejected",
        ),
        (
            "config:held",
            json!({"source": "/c.toml", "trigger": "file", "held": ["daemon.ack_requires"], "reason": "r"}),
            "held until a restart",
        ),
        (
            "passkey:registered",
            json!({"passkeyId": "c1", "name": "laptop", "by": "the operator"}),
            "passkey 'laptop' was registered",
        ),
        (
            "passkey:removed",
            json!({"passkeyId": "c1", "name": "laptop", "by": "the operator"}),
            "passkey 'laptop' was removed",
        ),
        (
            "routine:escalated",
            json!({"routineId": "rt_1", "state": "escalated", "step": "build", "message": "which branch?", "timeoutMs": 300_000}),
            "asks for your answer",
        ),
        (
            "routine:failed",
            json!({"routineId": "rt_1", "state": "failed", "step": "build", "reason": "nobody resolved the escalation"}),
            "routine rt_1 failed",
        ),
        (
            "session:ungated",
            json!({"sessionId": "claude:abc", "cwd": "/w", "turn": 1, "reason": "r"}),
            "stopped with no gate",
        ),
        (
            "session:permission-escalated",
            json!({"sessionId": "claude:abc", "request": "perm-1", "toolCallId": "c1", "tool": {}, "timeoutMs": 300_000}),
            "asks for your permission",
        ),
        (
            "tokens:rotated",
            json!({"tokens": ["agent", "operator"], "cluster": true, "host": "alpha"}),
            "the agent and operator token(s) were rotated",
        ),
        (
            "passkey:reset",
            json!({"removed": ["laptop"], "by": "gatehost passkey reset (uid 1000 on m1)"}),
            "every passkey was removed (1)",
        ),
        (
            "host:stale",
            json!({"host": "alpha", "fence": 3, "machine": "m1", "pid": 7, "heartbeatAt": 0,
                   "leaseUntil": 15_000, "graceMs": 15_000, "policies": ["p1"], "by": "beta",
                   "takeover": false}),
            "host alpha stopped renewing its claim",
        ),
        (
            "host:taken-over",
            json!({"host": "alpha", "by": "beta", "fence": 4, "policies": ["p1"],
                   "sessions": [], "routines": 0, "deliveries": 0, "requests": 0}),
            "host beta took over host alpha's work",
        ),
    ];
    assert_eq!(cases.len(), ATTENTION.len());
    for (kind, payload, words) in cases {
        assert!(ATTENTION.contains(&kind), "{kind}");
        let policy = (kind.starts_with("policy:") || kind.starts_with("review:")).then_some("p1");
        let m = message(&event(kind, policy, payload), Some("http://h"));
        assert!(m.title.contains(words), "{kind}: {}", m.title);
        assert_eq!(m.priority, Priority::High, "{kind}");
        assert_eq!(m.link.is_some(), policy.is_some(), "{kind}");
    }
    let routine = message(
        &event(
            "routine:escalated",
            None,
            json!({"routineId": "rt_1", "state": "escalated", "step": "build", "message": "which branch?", "timeoutMs": 60_000}),
        ),
        None,
    );
    assert!(
        routine
            .text
            .contains("gatehost routine resolve rt_1 build --response TEXT")
            && routine.text.contains("which branch?")
            && routine.text.contains("1m"),
        "{}",
        routine.text
    );
    let ask = message(
        &event(
            "session:permission-escalated",
            None,
            json!({"sessionId": "claude:abc", "request": "perm-1", "toolCallId": "c1", "tool": {}, "timeoutMs": 300_000}),
        ),
        None,
    );
    assert!(
        ask.text
            .contains("gatehost session permission claude:abc perm-1 --allow")
            && ask.text.contains("5m"),
        "{}",
        ask.text
    );
    let stale = message(
        &event(
            "session:stale",
            None,
            json!({"sessionId": "claude:abc", "lastHeardAt": 0, "silentMs": 90_000, "timeoutMs": 60_000, "onStale": "cancel"}),
        ),
        None,
    );
    assert!(stale.text.contains("1m 30s"), "{}", stale.text);
}

#[test]
fn event_sets_take_full_and_short_names_and_refuse_unknown_ones() {
    let set = EventSet::parse(&["blocked".into(), "session:stale".into(), "blocked".into()])
        .expect("valid");
    assert_eq!(set, EventSet::Only(vec!["policy:blocked", "session:stale"]));
    assert!(set.contains("policy:blocked") && !set.contains("policy:passed"));
    assert_eq!(EventSet::parse(&["*".into()]), Ok(EventSet::All));
    assert!(EventSet::parse(&["*".into(), "blocked".into()]).is_err());
    assert!(EventSet::parse(&[]).is_err());
    let err = EventSet::parse(&["blockd".into()]).expect_err("unknown");
    assert!(err.contains("blockd") && err.contains("known"), "{err}");
}

#[test]
fn defaults_every_event_for_raw_webhooks_and_attention_for_chats_and_notify() {
    let t = |f, attention| Target::new("http://h/x".into(), f, None, attention).expect("valid");
    assert_eq!(t(Format::Raw, false).events, EventSet::All);
    assert_eq!(t(Format::Slack, false).events, EventSet::attention());
    assert_eq!(t(Format::Raw, true).events, EventSet::attention());
    assert!(Target::new("ftp://h".into(), Format::Raw, None, false).is_err());
    assert!(Target::new("http://".into(), Format::Raw, None, false).is_err());
}

#[test]
fn a_policy_link_is_never_steered_by_its_id() {
    assert_eq!(
        policy_link("http://h:1/", "../../v1/x?y#z"),
        "http://h:1/ui/#policy/%2E%2E%2F%2E%2E%2Fv1%2Fx%3Fy%23z"
    );
}
