//! Passkeys for acks through a real daemon with `[daemon] ack_requires =
//! "passkey"`: the operator token alone approves nothing (the CLI's `ack
//! --approve` is refused with a pointer to the page, as is the API),
//! rejecting still takes the token, registration is the page's only, a
//! forged answer changes nothing; and in a real headless Chromium with its
//! virtual authenticator (tests/support/browser/passkey_flow.py): the page's login
//! (what a token holder has) registers no first passkey without the
//! enrolment code of `gatehost passkey enrol-code`, a registration begun on
//! the code before the first passkey and finished after it is refused, the
//! code registers one passkey; register on the page, a failed user
//! verification approves nothing, an assertion without user verification
//! or replayed is refused by the daemon, approve with the passkey → the
//! commit is in git; a token holder's flood of challenges pushes out none
//! of the page's; the passkey outlives a restart. A configuration file
//! lowering `ack_requires` (what an agent running as the daemon's user can
//! write) is held until a restart, with a `config:held` attention event.

use crate::common;
use crate::common::shorthand::{arg, assert_has, assert_lacks, gatehost, str_of};

use common::browser::{run_script, shots_dir};
use common::daemon::{Daemon, git_out, git_scratch};
use common::webhooks::receiver_answering;
use common::{
    DAEMON_ROOTS, Scratch, allow_config, assert_no_env_survivors, eventually_within, marker,
};
use serde_json::{Value, json};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

fn passkey_daemon() -> (Scratch, Daemon) {
    let s = git_scratch();
    let cfg = allow_config(&["true", "false"]).replace(
        DAEMON_ROOTS,
        &format!("{DAEMON_ROOTS}ack_requires = \"passkey\"\n"),
    );
    let cfg = s.write("config.toml", &cfg);
    let d = Daemon::start(&s.etc.join("data"), &cfg);
    d.register("s1", &s.ws);
    (s, d)
}

/// A commit policy on s1 gated green on `file`, awaiting its ack.
fn awaiting(s: &Scratch, d: &Daemon, file: &str) -> String {
    s.write_ws(file, "pub fn answer() -> u32 { 42 }\n");
    let pid = d.attach(json!({
        "sessionId": "s1",
        "gate": {"command": "true"},
        "then": "commit",
        "commit": {"paths": [file], "message": "the answer"}
    }));
    d.report("s1", "turn-end");
    d.wait_status(&pid, "awaiting-ack", T);
    pid
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or_default()
}

#[test]
fn with_passkeys_required_the_token_alone_approves_nothing_and_registers_nothing() {
    let (s, d) = passkey_daemon();
    let head = git_out(&s.ws, &["rev-parse", "HEAD"]);
    let pid = awaiting(&s, &d, "src/lib.rs");

    // The CLI's ack --approve: refused, saying where to approve.
    let run = d.cli(&["policy", "ack", &pid, "--approve"], &d.operator);
    assert_ne!(run.code, 0, "{}", run.stdout);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert_has(&said, "passkey");
    assert_has(&said, "gatehost ui");
    // The API with the bearer token, and with a forged passkey answer.
    let (status, body) = d.post(
        &format!("/v1/policies/{pid}/ack"),
        &d.operator,
        Some(json!({"approve": true})),
    );
    assert_eq!((status, code(&body)), (403, "passkey-required"), "{body}");
    let forged = json!({
        "ceremony": "0123456789abcdef",
        "credential": {"id": "AAAA", "rawId": "AAAA", "type": "public-key",
            "response": {"authenticatorData": "AAAA", "clientDataJSON": "AAAA",
                         "signature": "AAAA", "userHandle": null}}
    });
    let (status, body) = d.post(
        &format!("/v1/policies/{pid}/ack"),
        &d.operator,
        Some(json!({"approve": true, "passkey": forged})),
    );
    assert_eq!((status, code(&body)), (409, "ceremony-unknown"), "{body}");
    assert_eq!(d.policy(&pid)["status"], "awaiting-ack");
    assert_eq!(
        git_out(&s.ws, &["rev-parse", "HEAD"]),
        head,
        "nothing committed"
    );

    // What approving takes, where passkeys work, and none registered yet:
    // no challenge can be made.
    let (status, keys) = d.get("/v1/passkeys", &d.operator);
    assert_eq!(status, 200, "{keys}");
    assert_eq!(keys["ackRequires"], "passkey");
    assert_eq!(keys["rpId"], "localhost");
    let port = d
        .url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .expect("port");
    assert_eq!(keys["origin"], format!("http://localhost:{port}"));
    assert_eq!(keys["passkeys"], json!([]));
    let (status, body) = d.post(
        "/v1/passkeys/challenge",
        &d.operator,
        Some(json!({"for": "add-passkey"})),
    );
    assert_eq!((status, code(&body)), (409, "no-passkey"), "{body}");
    // The agent token reads none of it.
    let (status, _) = d.get("/v1/passkeys", &d.agent);
    assert_eq!(status, 403);

    // Registration with a token (even the operator's) is refused: it is
    // the page's, in a person's browser.
    for token in [&d.operator, &d.agent] {
        let (status, body) = d.post(
            "/v1/passkeys/register",
            token,
            Some(json!({"name": "mine"})),
        );
        assert_eq!((status, code(&body)), (403, "page-only"), "{body}");
    }

    // Rejecting still takes the token alone.
    d.cli_ok(&["policy", "ack", &pid, "--reject"], &d.operator);
    assert_eq!(d.policy(&pid)["status"], "cancelled");
}

#[test]
fn a_passkey_registered_on_the_page_approves_in_a_real_browser_and_only_when_verified() {
    let (s, mut d) = passkey_daemon();
    let head = git_out(&s.ws, &["rev-parse", "HEAD"]);
    let pid = awaiting(&s, &d, "src/lib.rs");
    let tree = d.policy(&pid)["plan"]["snapshot"]["tree"]
        .as_str()
        .expect("snapshot tree")
        .to_string();
    let page = d
        .url
        .trim_end_matches('/')
        .replace("127.0.0.1", "localhost");
    // The enrolment code, made on the daemon's machine as its user: on
    // this terminal only, its digest in the data directory.
    let made = gatehost(&["passkey", "enrol-code", "--data-dir", &arg(&d.data)]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let code = made.stdout.trim().to_string();
    assert_eq!(code.len(), 23, "{code}");
    let enrol_file = d.data.join("passkey-enrol.json");
    let stored = std::fs::read_to_string(&enrol_file).expect("the code's file");
    assert_lacks(&stored, &code.replace('-', ""));
    // Nothing the operator token reads carries it.
    let (_, keys) = d.get("/v1/passkeys", &d.operator);
    let events = serde_json::to_string(&d.all_events("")).expect("json");
    for seen_by_token in [keys.to_string(), events, d.log()] {
        assert!(!seen_by_token.contains(&code), "the code leaked");
    }
    let m = marker("passkey");
    let profile = s.etc.join(format!("gatehost-test-{m}-profile"));
    let shots = shots_dir();
    let (ok, seen) = run_script(
        "passkey_flow.py",
        &[
            &page,
            &d.operator,
            &profile.display().to_string(),
            &pid,
            &shots.display().to_string(),
            &code,
        ],
        &format!("gatehost-test-{m}"),
        &s.etc.join("browser.log"),
        Duration::from_secs(240),
    );
    let log = || std::fs::read_to_string(s.etc.join("browser.log")).unwrap_or_default();
    assert!(ok && seen.get("error").is_none(), "{seen:#}\n{}", log());

    // Without the code, or with a wrong one, the page's login (a token
    // holder's) registers nothing; the page asks for the code until the
    // first passkey exists.
    assert_eq!(seen["codeFieldShown"], true, "{seen:#}");
    assert_eq!(
        seen["firstWithoutCode"],
        json!({"status": 403, "code": "enrol-code-required"}),
        "{seen:#}"
    );
    assert_eq!(
        seen["firstWithWrongCode"],
        json!({"status": 403, "code": "enrol-code-refused"}),
        "{seen:#}"
    );
    assert_has(
        str_of(&seen["pageWithoutCode"]),
        "gatehost passkey enrol-code",
    );
    assert_eq!(seen["codeFieldAfter"], false, "{seen:#}");
    // Begun on the code before the first passkey, finished after it:
    // refused (its ceremony ended when the first was stored).
    assert_eq!(seen["earlyBegun"], 200, "{seen:#}");
    assert_eq!(
        seen["earlyFinished"],
        json!({"status": 409, "code": "ceremony-unknown", "error": null}),
        "{seen:#}"
    );
    // The code registered one passkey: spent, its file gone.
    assert_eq!(
        seen["codeAgain"],
        json!({"status": 403, "code": "passkey-required"}),
        "{seen:#}"
    );
    assert!(!enrol_file.exists(), "the spent code's file is removed");
    // A token holder's 40 challenges were made, and pushed out none of
    // the page's (its pending assertion added the second passkey below).
    assert_eq!(seen["flood"], json!(vec![200; 40]), "{seen:#}");
    // Registered through the page, for RP ID localhost.
    assert_has(str_of(&seen["registered"]), "test laptop");
    assert_eq!(seen["credentials"][0]["rpId"], "localhost", "{seen:#}");
    // A second passkey needs the first's assertion.
    assert_eq!(
        seen["secondWithoutAssertion"],
        json!({"status": 403, "code": "passkey-required"}),
        "{seen:#}"
    );
    // The page reviewed the snapshot's tree.
    assert_eq!(seen["tree"], tree.as_str(), "{seen:#}");
    // A failed user verification: the browser's error, nothing approved.
    assert_eq!(seen["statusAfterUnverified"], "awaiting-ack", "{seen:#}");
    // An assertion without user verification reached the daemon and was
    // refused; replayed, its ceremony was spent.
    assert_eq!(seen["bareAssertion"], true, "{seen:#}");
    assert_eq!(seen["uv0"]["status"], 403, "{seen:#}");
    assert_eq!(seen["uv0"]["code"], "passkey-rejected", "{seen:#}");
    assert_eq!(
        seen["replay"],
        json!({"status": 409, "code": "ceremony-unknown"}),
        "{seen:#}"
    );
    // A challenge for another tree is refused.
    assert_eq!(seen["otherTree"], "tree-changed", "{seen:#}");
    // Approved with the passkey: done, and in git with exactly the change.
    assert_eq!(seen["approvedStatus"], "done", "{seen:#}");
    assert_ne!(git_out(&s.ws, &["rev-parse", "HEAD"]), head);
    assert_eq!(git_out(&s.ws, &["rev-parse", "HEAD^{tree}"]).trim(), tree);
    assert_eq!(
        git_out(&s.ws, &["show", "HEAD:src/lib.rs"]).trim(),
        "pub fn answer() -> u32 { 42 }"
    );
    let approved = d
        .all_events(&format!("policy={pid}"))
        .into_iter()
        .find(|e| e["type"] == "policy:approved")
        .expect("approved");
    assert_eq!(
        approved["payload"]["by"], "the operator (passkey 'test laptop')",
        "{approved:#}"
    );
    // The second passkey was added with the first's assertion (spent
    // once: it added no third), the first then removed with the
    // second's; the last is kept while approvals need one.
    assert_eq!(seen["addAssertion"], true, "{seen:#}");
    assert_eq!(seen["second"]["status"], 200, "{seen:#}");
    assert_eq!(
        seen["thirdWithSpentAssertion"],
        json!({"status": 409, "code": "ceremony-unknown"}),
        "{seen:#}"
    );
    assert_eq!(
        seen["afterSecond"].as_array().map(Vec::len),
        Some(2),
        "{seen:#}"
    );
    assert_has(str_of(&seen["lastRemoveError"]), "last passkey");
    let registered: Vec<(Value, Value)> = d
        .all_events("types=passkey:registered")
        .into_iter()
        .map(|e| (e["payload"]["name"].clone(), e["payload"]["by"].clone()))
        .collect();
    assert_eq!(
        registered,
        [
            (
                json!("test laptop"),
                json!("the operator (the page's login, with the enrolment code)")
            ),
            (
                json!("phone"),
                json!("the operator (passkey 'test laptop')")
            ),
        ],
    );
    let removed = d.all_events("types=passkey:removed");
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert_eq!(removed[0]["payload"]["name"], "test laptop");
    assert_eq!(
        removed[0]["payload"]["by"],
        "the operator (passkey 'phone')"
    );
    assert_no_env_survivors(&format!("gatehost-test-{m}"));

    // The passkey is stored: a restart keeps it, and its use.
    d.restart();
    let (status, keys) = d.get("/v1/passkeys", &d.operator);
    assert_eq!(status, 200, "{keys}");
    let list = keys["passkeys"].as_array().expect("passkeys");
    assert_eq!(list.len(), 1, "{keys}");
    // Renamed on the page (issue 53): kept, and said.
    assert_eq!(list[0]["name"], "renamed laptop");
    assert_has(str_of(&seen["afterRename"]), "renamed laptop");
    let renamed = d.all_events("types=passkey:renamed");
    assert_eq!(renamed.len(), 1, "{renamed:?}");
    assert_eq!(renamed[0]["payload"]["name"], "renamed laptop");
    assert!(list[0]["lastUsedAt"].is_i64(), "{keys}");
    assert!(
        seen["passkeyAfter"]
            .as_str()
            .is_some_and(|t| t.contains(", used ")),
        "the page shows its use: {seen:#}"
    );
    assert_eq!(seen["signCountAfter"], 2, "{seen:#}");

    // The last passkey lost: `gatehost passkey reset` on the daemon's
    // machine removes every one and says so; the enrolment code is again
    // what registers the first.
    let data = d.data.display().to_string();
    let config = d.config.display().to_string();
    let run = d.cli_ok(
        &["passkey", "reset", "--data-dir", &data, "--config", &config],
        &d.operator,
    );
    assert_eq!(run.stdout.trim(), "1", "{}", run.stderr);
    assert_has(&run.stderr, "renamed laptop");
    let (_, keys) = d.get("/v1/passkeys", &d.operator);
    assert_eq!(keys["passkeys"], json!([]), "{keys}");
    let reset = d.all_events("types=passkey:reset");
    assert_eq!(reset.len(), 1, "{reset:?}");
    assert_eq!(reset[0]["payload"]["removed"], json!(["renamed laptop"]));
    assert_has(str_of(&reset[0]["payload"]["by"]), "gatehost passkey reset");
    // Not a data directory: refused, naming the flag.
    let bad = d.cli(
        &[
            "passkey",
            "reset",
            "--data-dir",
            "/nonexistent",
            "--config",
            &config,
        ],
        &d.operator,
    );
    assert_ne!(bad.code, 0);
    assert_has(&bad.stderr, "--data-dir");
}

/// The daemon's configuration with `ack_requires = ack`, notifications to
/// `notify`.
fn passkey_config(ack: &str, notify: &str) -> String {
    allow_config(&["true", "false"]).replace(
        DAEMON_ROOTS,
        &format!("{DAEMON_ROOTS}ack_requires = \"{ack}\"\nnotify_url = \"{notify}\"\n"),
    )
}

#[test]
fn a_configuration_file_lowering_ack_requires_is_held_until_a_restart_and_announced() {
    let told = receiver_answering(None);
    let s = git_scratch();
    let cfg = s.write("config.toml", &passkey_config("passkey", &told.url));
    // Only SIGHUP reloads: the test knows its trigger.
    let mut d = Daemon::start_with_env(
        &s.etc.join("data"),
        &cfg,
        &[("GATEHOST_TEST_NO_CONFIG_POLL", "1")],
    );
    d.register("s1", &s.ws);
    let head = git_out(&s.ws, &["rev-parse", "HEAD"]);
    let pid = awaiting(&s, &d, "src/lib.rs");

    // What an agent running as the daemon's user can do: write the file
    // (at once, as an editor saves) and have it read.
    let tmp = cfg.with_extension("toml.new");
    std::fs::write(&tmp, passkey_config("token", &told.url)).expect("write");
    std::fs::rename(&tmp, &cfg).expect("rename");
    // SAFETY: kill(2) on the test's own child.
    assert_eq!(unsafe { libc::kill(d.pid() as i32, libc::SIGHUP) }, 0);
    eventually_within(T, "the reload", || {
        !d.all_events("types=config:reloaded").is_empty()
    });

    // The stronger setting stays in force: the token approves nothing.
    let (status, keys) = d.get("/v1/passkeys", &d.operator);
    assert_eq!(
        (status, keys["ackRequires"].as_str()),
        (200, Some("passkey"))
    );
    let (status, body) = d.post(
        &format!("/v1/policies/{pid}/ack"),
        &d.operator,
        Some(json!({"approve": true})),
    );
    assert_eq!((status, code(&body)), (403, "passkey-required"), "{body}");
    let run = d.cli(&["policy", "ack", &pid, "--approve"], &d.operator);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert_eq!(d.policy(&pid)["status"], "awaiting-ack");
    assert_eq!(git_out(&s.ws, &["rev-parse", "HEAD"]), head);

    // Held, and said: an attention event (notified), a log line.
    let held = d.all_events("types=config:held");
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0]["payload"]["held"], json!(["daemon.ack_requires"]));
    assert_eq!(held[0]["payload"]["trigger"], "signal");
    assert_has(str_of(&held[0]["payload"]["reason"]), "restart");
    let reloaded = d.all_events("types=config:reloaded");
    assert_eq!(
        reloaded[0]["payload"]["held"],
        json!(["daemon.ack_requires"])
    );
    assert_has(
        &d.log(),
        "a weakening of the configuration is held until a restart",
    );
    eventually_within(T, "the notification", || {
        told.kinds().iter().any(|k| k == "config:held")
    });

    // A restart (the operator's act) reads the file: the token approves.
    d.restart();
    let (status, keys) = d.get("/v1/passkeys", &d.operator);
    assert_eq!((status, keys["ackRequires"].as_str()), (200, Some("token")));
    let run = d.cli(&["policy", "ack", &pid, "--approve"], &d.operator);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    d.wait_status(&pid, "done", T);
    assert_ne!(git_out(&s.ws, &["rev-parse", "HEAD"]), head);
}
