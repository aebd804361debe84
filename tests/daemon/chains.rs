//! Review → repair → re-review chains (issue 27) through a real daemon on
//! loopback: judge reviewers are real adapter processes (a script that
//! blocks its first calls, counted in a file), session reviewers are
//! registered sessions answering through the API, a webhook receiver
//! stands for the person, and SIGKILLs at random moments of the chains.

use crate::common;
use crate::common::shorthand::{assert_has, etc_dir, str_of};

use common::Scratch;
use common::daemon::{Daemon, allow_config_with, git_repo, git_scratch, judge_j};
use common::webhooks::{Receiver, receiver_answering};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(30);

/// A daemon with its webhook at a receiver and the judge adapter `j`
/// (`review.sh DIR BLOCKS`) counting its calls in `calls`.
fn setup(blocks: &str, keys: &str) -> (Scratch, Daemon, Receiver, std::path::PathBuf) {
    let hook = receiver_answering(None);
    let s = git_scratch();
    let calls = etc_dir(&s, "calls");
    let mut cfg = allow_config_with(
        &["true", "false"],
        &format!("webhook_url = \"{}\"\n{keys}", hook.url),
    );
    cfg.push_str(&judge_j("judges/review.sh", &calls, blocks));
    let cfg = s.write("config.toml", &cfg);
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    (s, d, hook, calls)
}

fn judge_reviewer(tag: &str) -> Value {
    json!({"judge": {"adapter": "j", "prompt": format!("Review {tag}: ship it only if it is complete.")}})
}

/// Session `author` registered, its `work.txt` drafted, a chain (as
/// [`commit_chain`]) attached and the author's turn ended; the policy.
fn start_chain(d: &Daemon, s: &Scratch, tag: &str, max_cycles: u32) -> String {
    d.register("author", &s.ws);
    std::fs::write(s.ws.join("work.txt"), format!("{tag} draft\n")).expect("write");
    let pid = d.attach(commit_chain("author", tag, max_cycles));
    say(d, "author", "done");
    pid
}

fn commit_chain(session: &str, tag: &str, max_cycles: u32) -> Value {
    json!({
        "sessionId": session,
        "gate": {"command": "true"},
        "then": "commit",
        "commit": {"paths": ["work.txt"], "message": "reviewed change"},
        "review": {"reviewer": judge_reviewer(tag), "maxCycles": max_cycles}
    })
}

/// The verdicts of the chain's reviews, in order.
fn verdicts_of(events: &[Value]) -> Vec<Value> {
    let verdicts = of_type(events, "review:verdict");
    verdicts
        .iter()
        .map(|v| v["payload"]["verdict"].clone())
        .collect()
}

fn of_type(events: &[Value], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == kind)
        .cloned()
        .collect()
}

fn count(d: &Daemon, pid: &str, kind: &str) -> usize {
    d.policy_events(pid).iter().filter(|e| *e == kind).count()
}

fn calls(dir: &Path, key: &str) -> u32 {
    std::fs::read_to_string(dir.join(key))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Reports a turn-end of `id` with `message` as its last message.
/// The name of the review under way of `pid` (what its reviewer's
/// verdict line must end with), as its prompt in `review:started` asks.
fn review_name(d: &Daemon, pid: &str) -> String {
    let name = d.policy(pid)["review"]["nonce"]
        .as_str()
        .expect("a review's name")
        .to_string();
    let started = of_type(&d.all_events(&format!("&policy={pid}")), "review:started");
    let prompt = started
        .last()
        .and_then(|e| e["payload"]["prompt"].as_str())
        .unwrap_or_default();
    assert_has(prompt, &format!("VERDICT: SHIP {name}"));
    name
}

fn say(d: &Daemon, id: &str, message: &str) {
    let request = gatehost::wire::ReportRequest {
        kind: serde_json::from_value(json!("turn-end")).expect("kind"),
        message: Some(message.to_string()),
    };
    let client = d.client();
    if let Err(e) = d.block(client.report(id, &request)) {
        panic!("report {id}: {e}");
    }
}

/// Drives the author of `pid` as an agent would: each repair nudge is
/// answered by a turn-end, until the policy is `want`. Returns how many
/// repairs it answered.
fn answer_repairs(d: &Daemon, pid: &str, author: &str, want: &str) -> usize {
    let deadline = Instant::now() + T;
    let mut answered = 0;
    let mut p = d.policy(pid);
    while p["status"] != want {
        assert!(
            Instant::now() < deadline,
            "policy {pid} never {want}: {p}\n{:?}\n{}",
            d.policy_events(pid),
            d.log()
        );
        let repairs = count(d, pid, "review:repair");
        if repairs > answered && p["status"] == "watching" {
            say(d, author, &format!("repaired ({repairs})"));
            answered = repairs;
        }
        std::thread::sleep(Duration::from_millis(30));
        p = d.policy(pid);
    }
    answered
}

/// BLOCK twice, then SHIP: exactly two repair nudges (each with the
/// judge's findings, to the author), three verdicts, one `review:shipped`
/// and one `awaiting-ack`; the status names the cycle it shipped at.
#[test]
fn a_chain_that_blocks_twice_then_ships_repairs_twice_and_awaits_one_ack() {
    let (s, d, _hook, calls_dir) = setup("2", "");
    let pid = start_chain(&d, &s, "chain-1", 5);
    assert_eq!(
        answer_repairs(&d, &pid, "author", "awaiting-ack"),
        2,
        "two repairs"
    );
    // A while later nothing more happened.
    std::thread::sleep(Duration::from_millis(500));
    let events = d.all_events(&format!("&policy={pid}"));
    let repair = of_type(&events, "review:repair");
    assert_eq!(repair.len(), 2, "{events:#?}");
    for (i, r) in repair.iter().enumerate() {
        assert_eq!(r["payload"]["session"], "author");
        assert_eq!(r["payload"]["cycle"], i as u64 + 1);
        let message = r["payload"]["message"].as_str().unwrap_or_default();
        assert_has(message, "lacks a test");
    }
    let verdicts = verdicts_of(&events);
    assert_eq!(
        verdicts,
        vec![json!("BLOCK"), json!("BLOCK"), json!("SHIP")]
    );
    assert_eq!(of_type(&events, "review:started").len(), 3);
    assert_eq!(of_type(&events, "review:shipped").len(), 1);
    assert_eq!(of_type(&events, "policy:commit-ready").len(), 1);
    assert!(of_type(&events, "review:escalated").is_empty());
    assert_eq!(calls(&calls_dir, "chain-1"), 3);
    let p = d.policy(&pid);
    assert_eq!(p["status"], "awaiting-ack");
    assert_eq!(p["review"]["phase"], "shipped");
    assert_eq!(p["review"]["cycle"], 3);
    // The judge reviewed the change against HEAD.
    let started = &of_type(&events, "review:started")[0]["payload"];
    assert!(started["diffBytes"].as_u64().unwrap_or(0) > 0, "{started}");
    let status = d.cli(&["policy", "status", &pid], &d.operator);
    assert!(
        status.stdout.contains("shipped at review 3 of 5"),
        "{}{}",
        status.stdout,
        status.stderr
    );
}

/// A reviewer that never ships: after `maxCycles` BLOCKs the chain
/// escalates once: `blocked` with the findings, one `review:escalated`,
/// one notification at the receiver; nothing more after.
#[test]
fn a_chain_that_never_ships_escalates_once_after_max_cycles() {
    let (s, d, hook, calls_dir) = setup("always", "");
    let pid = start_chain(&d, &s, "chain-2", 3);
    assert_eq!(
        answer_repairs(&d, &pid, "author", "blocked"),
        2,
        "two repairs"
    );
    let p = d.policy(&pid);
    let reason = p["reason"].as_str().unwrap_or_default();
    assert_has(reason, "3 times");
    assert_has(reason, "lacks a test");
    // More turn-ends change nothing.
    say(&d, "author", "again");
    std::thread::sleep(Duration::from_millis(800));
    let events = d.all_events(&format!("&policy={pid}"));
    assert_eq!(of_type(&events, "review:escalated").len(), 1, "{events:#?}");
    assert_eq!(of_type(&events, "review:verdict").len(), 3);
    assert_eq!(of_type(&events, "review:repair").len(), 2);
    assert_eq!(of_type(&events, "policy:blocked").len(), 1);
    assert!(of_type(&events, "review:shipped").is_empty());
    assert!(of_type(&events, "policy:commit-ready").is_empty());
    assert_eq!(calls(&calls_dir, "chain-2"), 3);
    hook.wait_for_kind("review:escalated", T);
    std::thread::sleep(Duration::from_millis(300));
    let told = hook
        .kinds()
        .iter()
        .filter(|k| *k == "review:escalated")
        .count();
    assert_eq!(told, 1, "{:?}", hook.kinds());
}

/// A session reviewer is prompted with the rubric and the change; an
/// answer without a verdict line counts as BLOCK (a repair to the author
/// with what it said), and a later `VERDICT: SHIP` ships.
#[test]
fn a_session_reviewer_without_a_verdict_counts_as_block() {
    let (s, d, _hook, _calls) = setup("0", "");
    d.register("author", &s.ws);
    d.register("rev", &s.ws);
    std::fs::write(s.ws.join("work.txt"), "a change to review\n").expect("write");
    let pid = d.attach(json!({
        "sessionId": "author",
        "gate": {"command": "true"},
        "review": {"reviewer": {"session": "rev", "prompt": "Check the change for typos."}, "maxCycles": 4}
    }));
    say(&d, "author", "done");
    d.wait_status(&pid, "reviewing", T);
    let started = of_type(&d.all_events(&format!("&policy={pid}")), "review:started");
    let prompt = started[0]["payload"]["prompt"].as_str().unwrap_or_default();
    assert_has(prompt, "Check the change for typos.");
    assert_has(prompt, "a change to review");
    assert_eq!(d.policy(&pid)["review"]["cycle"], 1);
    say(&d, "rev", "it reads well to me");
    d.wait_status(&pid, "watching", T);
    let events = d.all_events(&format!("&policy={pid}"));
    let verdict = &of_type(&events, "review:verdict")[0]["payload"];
    assert_eq!(verdict["verdict"], "BLOCK");
    let findings = verdict["findings"].as_str().unwrap_or_default();
    assert_has(findings, "no VERDICT");
    assert_has(findings, "it reads well");
    assert_eq!(of_type(&events, "review:repair").len(), 1);
    // The repaired turn is gated and reviewed again; SHIP ends it.
    say(&d, "author", "fixed");
    d.wait_status(&pid, "reviewing", T);
    assert_eq!(d.policy(&pid)["review"]["cycle"], 2);
    // A verdict that does not name the review it answers is BLOCK.
    say(&d, "rev", "now it is right\nVERDICT: SHIP");
    d.wait_status(&pid, "watching", T);
    say(&d, "author", "fixed again");
    d.wait_status(&pid, "reviewing", T);
    let name = review_name(&d, &pid);
    say(&d, "rev", &format!("now it is right\nVERDICT: SHIP {name}"));
    d.wait_status(&pid, "done", T);
    let events = d.all_events(&format!("&policy={pid}"));
    let verdicts = verdicts_of(&events);
    assert_eq!(
        verdicts,
        vec![json!("BLOCK"), json!("BLOCK"), json!("SHIP")]
    );
    let unnamed = &of_type(&events, "review:verdict")[1]["payload"]["findings"];
    assert_has(str_of(unnamed), "does not name this review");
    assert_eq!(of_type(&events, "review:shipped").len(), 1);
    assert_eq!(of_type(&events, "policy:done").len(), 1);
}

/// `[daemon] max_chain_depth` caps `next` links and review cycles
/// together: an attach over it is refused naming the field; a reviewer
/// that is the author, or unknown, is refused too.
#[test]
fn attaches_over_the_chain_cap_or_with_a_bad_reviewer_are_refused() {
    let (s, d, _hook, _calls) = setup("0", "max_chain_depth = 4\n");
    d.register("author", &s.ws);
    let client = d.client();
    for (spec, field) in [
        (
            json!({"sessionId": "author", "review": {"reviewer": judge_reviewer("x"), "maxCycles": 5}}),
            "review.maxCycles",
        ),
        (
            json!({"sessionId": "author", "review": {"reviewer": judge_reviewer("x"), "maxCycles": 3}, "next": {"next": {}}}),
            "next.next",
        ),
        (
            json!({"sessionId": "author", "review": {"reviewer": {"session": "author"}, "maxCycles": 1}}),
            "review.reviewer.session",
        ),
        (
            json!({"sessionId": "author", "review": {"reviewer": {"session": "nobody"}, "maxCycles": 1}}),
            "review.reviewer.session",
        ),
        (
            json!({"sessionId": "author", "review": {"reviewer": {"command": "true"}, "maxCycles": 1}}),
            "review.reviewer",
        ),
    ] {
        match d.block(client.attach(&spec)) {
            Ok(p) => panic!("{spec} was attached: {}", p.policy_id),
            Err(e) => assert!(e.to_string().contains(field), "{spec}: {e}"),
        }
    }
    // Within the cap: attached.
    d.attach(json!({"sessionId": "author", "review": {"reviewer": judge_reviewer("x"), "maxCycles": 3}, "next": {}}));
}

/// At least 100 SIGKILLs at random moments of eight chains (each blocks
/// twice, then ships), the daemon restarted on the same data directory
/// each time: every chain ships exactly once, none escalates, each
/// `policy:commit-ready` is published once, and no repair is lost or
/// doubled (repairs = BLOCK verdicts).
#[test]
fn sigkills_at_every_step_of_chains_double_and_lose_no_terminal_event() {
    const CHAINS: usize = 8;
    const KILLS: usize = 100;
    let (s, mut d, _hook, _calls) = setup("2", "");
    let mut chains = Vec::new();
    for i in 0..CHAINS {
        let ws = s.ws.join(format!("w{i}"));
        std::fs::create_dir_all(&ws).expect("mkdir");
        git_repo(&ws);
        std::fs::write(ws.join("work.txt"), format!("chain-{i} draft\n")).expect("write");
        let sid = format!("a{i}");
        d.register(&sid, &ws);
        let mut spec = commit_chain(&sid, &format!("chain-{i}"), 5);
        spec["sessionId"] = json!(sid);
        let pid = d.attach(spec);
        say(&d, &sid, "done");
        chains.push((pid, sid));
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.as_nanos() as u64)
        .unwrap_or(7);
    eprintln!("seed {seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut answered = vec![0usize; CHAINS];
    // One pass of the agents' side: each repair nudge answered once. A
    // request the kill cut off is tried again on the next life.
    let drive = |d: &Daemon, answered: &mut Vec<usize>| -> bool {
        let mut all_settled = true;
        for (i, (pid, sid)) in chains.iter().enumerate() {
            let client = d.client();
            let Ok(p) = d.block(client.policy(pid)) else {
                return false;
            };
            let status = serde_json::to_value(&p).expect("json")["status"].clone();
            if status != "awaiting-ack" && status != "blocked" {
                all_settled = false;
            }
            let q = gatehost::wire::EventQuery {
                host: None,
                since: Some(0),
                limit: Some(1000),
                types: Some("review:repair".into()),
                session: None,
                policy: Some(pid.clone()),
                wait: None,
            };
            let Ok(page) = d.block(client.events(&q)) else {
                return false;
            };
            let repairs = page.events.len();
            if repairs > answered[i] && status == "watching" {
                let request = gatehost::wire::ReportRequest {
                    kind: serde_json::from_value(json!("turn-end")).expect("kind"),
                    message: Some(format!("repaired {repairs}")),
                };
                if d.block(client.report(sid, &request)).is_err() {
                    return false;
                }
                answered[i] = repairs;
            }
        }
        all_settled
    };
    let started = Instant::now();
    for _ in 0..KILLS {
        let life = Duration::from_millis(rng.u64(5..250));
        let until = Instant::now() + life;
        while Instant::now() < until {
            drive(&d, &mut answered);
            std::thread::sleep(Duration::from_millis(rng.u64(0..20)));
        }
        d.restart();
    }
    eprintln!("{KILLS} kills in {:?}", started.elapsed());
    // The last life runs the chains to their end.
    let deadline = Instant::now() + Duration::from_secs(90);
    while !drive(&d, &mut answered) {
        assert!(
            Instant::now() < deadline,
            "the chains never settled\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    for (pid, _) in &chains {
        let events = d.all_events(&format!("&policy={pid}"));
        let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        let n = |k: &str| kinds.iter().filter(|x| **x == k).count();
        assert_eq!(n("review:shipped"), 1, "{pid}: {kinds:?}");
        assert_eq!(n("review:escalated"), 0, "{pid}: {kinds:?}");
        assert_eq!(n("policy:commit-ready"), 1, "{pid}: {kinds:?}");
        let blocks = of_type(&events, "review:verdict")
            .iter()
            .filter(|v| v["payload"]["verdict"] == "BLOCK")
            .count();
        assert_eq!(n("review:repair"), blocks, "{pid}: {kinds:?}");
        assert!(blocks <= 2, "{pid}: {kinds:?}");
        // Each cycle's verdict once.
        let mut cycles: Vec<u64> = of_type(&events, "review:verdict")
            .iter()
            .filter_map(|v| v["payload"]["cycle"].as_u64())
            .collect();
        let all = cycles.len();
        cycles.dedup();
        assert_eq!(
            cycles.len(),
            all,
            "{pid}: a cycle's verdict twice: {kinds:?}"
        );
        assert_eq!(d.policy(pid)["status"], "awaiting-ack");
    }
}

/// One session reviewer for two authors (issue 48, item 6): the attacker,
/// seeing `review:started` of the honest author's policy, gets its own
/// review under way at once, so that the reviewer's next turn-end would
/// answer both. Each answer is bound to its review by name: the SHIP of
/// the honest change ships only the honest change, the attacker's change
/// waits for its own answer, and that answer (BLOCK) is not dropped.
#[test]
fn a_reviewers_answer_ships_only_the_review_it_names() {
    let (s, d, _hook, _calls) = setup("0", "");
    d.register("honest", &s.ws);
    d.register("attacker", &s.ws);
    d.register("rev", &s.ws);
    let chain = |author: &str| {
        json!({
            "sessionId": author,
            "gate": {"command": "true"},
            "review": {"reviewer": {"session": "rev", "prompt": "Ship only safe code."}, "maxCycles": 2}
        })
    };
    let honest = d.attach(chain("honest"));
    let attacker = d.attach(chain("attacker"));
    say(&d, "honest", "a fix");
    d.wait_status(&honest, "reviewing", T);
    say(&d, "attacker", "a backdoor");
    d.wait_status(&attacker, "reviewing", T);
    let (h, a) = (review_name(&d, &honest), review_name(&d, &attacker));
    assert_ne!(h, a);
    // The reviewer answers the honest change.
    say(&d, "rev", &format!("the fix is fine\nVERDICT: SHIP {h}"));
    d.wait_status(&honest, "done", T);
    std::thread::sleep(Duration::from_millis(500));
    let p = d.policy(&attacker);
    assert_eq!(
        p["status"], "reviewing",
        "the honest SHIP is not the attacker's: {p}"
    );
    // Its own answer comes, and is not dropped.
    say(
        &d,
        "rev",
        &format!("this opens a backdoor\nVERDICT: BLOCK {a}"),
    );
    d.wait_status(&attacker, "watching", T);
    let verdicts = of_type(
        &d.all_events(&format!("&policy={attacker}")),
        "review:verdict",
    );
    assert_eq!(verdicts.len(), 1, "{verdicts:?}");
    assert_eq!(verdicts[0]["payload"]["verdict"], "BLOCK");
    assert_eq!(
        of_type(
            &d.all_events(&format!("&policy={honest}")),
            "review:verdict"
        )
        .len(),
        1
    );
}

/// A session reviewer that goes silent (stale, past `[daemon]
/// heartbeat_timeout`) without answering ends the review (issue 48, item
/// 11): escalated, with an event, a reason naming the silence, and a
/// notification; never `reviewing` for ever.
#[test]
fn a_silent_session_reviewer_escalates_the_review() {
    let (s, d, hook, _calls) = setup("0", "heartbeat_timeout = \"1s\"\n");
    d.register("author", &s.ws);
    d.register("rev", &s.ws);
    let pid = d.attach(json!({
        "sessionId": "author",
        "gate": {"command": "true"},
        "review": {"reviewer": {"session": "rev", "prompt": "Check it."}, "maxCycles": 3}
    }));
    say(&d, "author", "done");
    let p = d.wait_status(&pid, "blocked", T);
    let reason = p["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("reviewer session rev went silent")
            && reason.contains("a person must look"),
        "{p}"
    );
    let events = d.all_events(&format!("&policy={pid}"));
    assert_eq!(of_type(&events, "review:escalated").len(), 1, "{events:?}");
    assert!(
        of_type(&events, "review:repair").is_empty(),
        "the author repairs nothing"
    );
    hook.wait_for_kind("review:escalated", T);
}
