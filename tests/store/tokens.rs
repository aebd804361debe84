//! The cluster's tokens as a whole program (issue 51, "one operator"):
//! two hosts on one PostgreSQL serve with one pair of tokens (the second
//! host's own are replaced, its files rewritten); `gatehost token rotate`
//! on one host makes the old operator token refused by both, the new one
//! accepted by both, within a bounded time, and the other host's files
//! hold it; a configured token file that is not the cluster's stops a
//! start, naming the file only; on the SQLite default a rotation works
//! alone; and no token value is in any daemon's log, the events or
//! `gatehost store check`.

use super::{Pg, database, store_check_run, store_section};
use crate::common::daemon::{Daemon, git_repo};
use crate::common::{Scratch, allow_config};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long another host may take to follow a rotation (its backstop is
/// 3 s; the notification is at once).
const FOLLOW: Duration = Duration::from_secs(20);

fn config(s: &Scratch, pg: &Pg) -> std::path::PathBuf {
    s.write(
        "config.toml",
        &format!(
            "{}{}",
            allow_config(&["true"]),
            store_section(&pg.url, &pg.password_file)
        ),
    )
}

fn token(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name))
        .expect("token file")
        .trim()
        .to_string()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("meta").permissions().mode() & 0o777
}

fn plant(dir: &Path, name: &str, value: &str) {
    std::fs::create_dir_all(dir).expect("mkdir");
    let p = dir.join(name);
    std::fs::write(&p, format!("{value}\n")).expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

/// The status `token` is answered on an operator-only read.
fn status(d: &Daemon, token: &str) -> u16 {
    d.get("/v1/passkeys", token).0
}

/// Polls until `d` answers `token` with `want`, within [`FOLLOW`].
fn until_status(d: &Daemon, token: &str, want: u16, what: &str) {
    let deadline = Instant::now() + FOLLOW;
    loop {
        let got = status(d, token);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still {got} after {FOLLOW:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// No value of `secrets` in `text` (`what` names it).
fn none_of(secrets: &[&str], text: &str, what: &str) {
    for s in secrets {
        assert!(!text.contains(s), "a token's value is in {what}");
    }
}

#[test]
fn two_hosts_serve_with_the_cluster_s_tokens_and_a_rotation_on_one_is_followed_by_the_other() {
    let Some(pg) = database("store::tokens::two_hosts") else {
        return;
    };
    let s = Scratch::new();
    git_repo(&s.ws);
    let cfg = config(&s, &pg);
    let mut a = Daemon::start_with_env(&s.etc.join("a"), &cfg, &[("GATEHOST_HOST_ID", "alpha")]);
    let (first_agent, first_operator) = (a.agent.clone(), a.operator.clone());
    // Beta comes with tokens of its own, which the cluster replaces.
    let b_dir = s.etc.join("b");
    let (b_own_agent, b_own_operator) = (
        "beta-own-agent-token-0123456789abcdef",
        "beta-own-operator-token-0123456789abcdef",
    );
    plant(&b_dir, "agent.token", b_own_agent);
    plant(&b_dir, "operator.token", b_own_operator);
    let b = Daemon::start_with_env(&b_dir, &cfg, &[("GATEHOST_HOST_ID", "beta")]);
    assert_eq!(
        b.operator, first_operator,
        "beta's file holds the cluster's"
    );
    assert_eq!(b.agent, first_agent);
    for f in ["agent.token", "operator.token"] {
        assert_eq!(mode(&b_dir.join(f)), 0o600, "{f}");
    }
    assert_eq!(status(&b, b_own_operator), 401, "its own is refused");
    assert_eq!(status(&b, b_own_agent), 401);
    assert_eq!(status(&b, &first_operator), 200);
    assert_eq!(status(&a, b_own_operator), 401);
    // Work on both, so that the events are not empty.
    a.register("claude:on-alpha", &s.ws);
    b.register("claude:on-beta", &s.ws);

    // Rotated on alpha: the old operator token is refused by both, the
    // new one accepted by both, beta's files hold it.
    let run = a.cli(&["token", "rotate"], &first_operator);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let a_dir = s.etc.join("a");
    assert!(
        run.stdout
            .contains(&a_dir.join("operator.token").display().to_string()),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("the cluster's"), "{}", run.stdout);
    let (new_agent, new_operator) = (
        token(&a_dir, "agent.token"),
        token(&a_dir, "operator.token"),
    );
    none_of(
        &[&new_agent, &new_operator],
        &format!("{}{}", run.stdout, run.stderr),
        "the CLI's output without --show",
    );
    assert_ne!(new_operator, first_operator);
    assert_ne!(new_agent, first_agent);
    (a.agent, a.operator) = (new_agent.clone(), new_operator.clone());
    assert_eq!(
        status(&a, &first_operator),
        401,
        "alpha refuses the old one"
    );
    assert_eq!(status(&a, &new_operator), 200);
    until_status(&b, &first_operator, 401, "beta refuses the old one");
    until_status(&b, &new_operator, 200, "beta accepts the new one");
    assert_eq!(b.get("/v1/hosts", &first_agent).0, 401);
    assert_eq!(b.get("/v1/hosts", &new_agent).0, 200);
    let deadline = Instant::now() + FOLLOW;
    while token(&b_dir, "operator.token") != new_operator {
        assert!(Instant::now() < deadline, "beta's file never rewritten");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(token(&b_dir, "agent.token"), new_agent);
    for f in ["agent.token", "operator.token"] {
        assert_eq!(mode(&b_dir.join(f)), 0o600, "{f}");
    }
    b.wait_log("the cluster's tokens were rotated", FOLLOW);
    // A rotation no host was told of (written without its notification):
    // found by the look at the generations every few seconds.
    let quiet = "quietly-set-operator-token-0123456789abcdef";
    pg.sql(&format!(
        "UPDATE cluster_tokens SET value = '{quiet}', generation = generation + 1 WHERE name = 'operator'"
    ));
    until_status(&a, &new_operator, 401, "alpha follows the quiet change");
    until_status(&b, quiet, 200, "beta follows the quiet change");
    assert_eq!(status(&a, quiet), 200);
    let deadline = Instant::now() + FOLLOW;
    while token(&b_dir, "operator.token") != quiet || token(&a_dir, "operator.token") != quiet {
        assert!(Instant::now() < deadline, "the files never rewritten");
        std::thread::sleep(Duration::from_millis(50));
    }
    a.operator = quiet.to_string();
    assert_eq!(
        pg.sql("SELECT string_agg(name || ':' || generation || ':' || rotated_by, ',' ORDER BY name) FROM cluster_tokens"),
        "agent:2:alpha,operator:3:alpha"
    );

    // Beta restarted with a configured operator token file that is not
    // the cluster's: refused, naming the file, never a value.
    let stale = s.etc.join("stale-operator.token");
    plant(&s.etc, "stale-operator.token", &first_operator);
    let cfg2 = s.write(
        "config-configured.toml",
        &format!(
            "{}{}",
            crate::common::daemon::allow_config_with(
                &["true"],
                &format!("operator_token_file = \"{}\"\n", stale.display())
            ),
            store_section(&pg.url, &pg.password_file)
        ),
    );
    let out = crate::common::daemon::serve_command(&s.etc.join("c"), &cfg2, "127.0.0.1:0")
        .env("GATEHOST_HOST_ID", "gamma")
        .output()
        .expect("run serve");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("operator_token_file"), "{err}");
    assert!(err.contains(&stale.display().to_string()), "{err}");
    none_of(
        &[&first_operator, &new_operator, &new_agent],
        &format!("{err}{}", String::from_utf8_lossy(&out.stdout)),
        "the refused start's output",
    );

    // No value anywhere a person reads: the logs, the events, store check.
    let secrets = [
        first_agent.as_str(),
        first_operator.as_str(),
        b_own_agent,
        b_own_operator,
        new_agent.as_str(),
        new_operator.as_str(),
        quiet,
    ];
    none_of(&secrets, &a.log(), "alpha's log");
    none_of(&secrets, &b.log(), "beta's log");
    let all = a.all_events("");
    // The rotation is said, once, on the cluster's log (which tokens,
    // which host), never a value.
    let said: Vec<&serde_json::Value> = all
        .iter()
        .filter(|e| e["type"] == "tokens:rotated")
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(
        said[0]["payload"],
        serde_json::json!({"tokens": ["agent", "operator"], "cluster": true, "host": "alpha"})
    );
    let events = serde_json::to_string(&all).expect("json");
    none_of(&secrets, &events, "the events");
    let check = store_check_run(&cfg);
    assert_eq!(check.code, 0, "{}", check.stderr);
    none_of(
        &secrets,
        &format!("{}{}", check.stdout, check.stderr),
        "store check",
    );
}

#[test]
fn on_sqlite_a_rotation_replaces_the_tokens_of_the_one_host() {
    let s = Scratch::new();
    let cfg = s.write("config.toml", &allow_config(&["true"]));
    let data = s.etc.join("d");
    let d = Daemon::start(&data, &cfg);
    let (old_agent, old_operator) = (d.agent.clone(), d.operator.clone());
    // A client reading the agent token file at each call (as `gatehost
    // mcp` does) carries on after a rotation; one holding the old value
    // (an agent started with GATEHOST_TOKEN) is refused.
    let follows = gatehost::client::Client::new(&d.url, old_agent.clone())
        .expect("client")
        .with_token_file(data.join("agent.token"));
    let holds = gatehost::client::Client::new(&d.url, old_agent.clone()).expect("client");
    let page = gatehost::wire::PageQuery::default();
    assert!(d.block(holds.sessions(&page)).is_ok());
    // The agent's only: the operator's stays.
    let run = d.cli(&["token", "rotate", "--agent", "--json"], &old_operator);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(v["rotated"], serde_json::json!(["agent"]), "{v}");
    assert_eq!(v["cluster"], false, "{v}");
    let said: Vec<serde_json::Value> = d
        .all_events("")
        .into_iter()
        .filter(|e| e["type"] == "tokens:rotated")
        .map(|e| e["payload"].clone())
        .collect();
    assert_eq!(
        said,
        [serde_json::json!({"tokens": ["agent"], "cluster": false})]
    );
    assert!(
        v.get("agentToken").is_none(),
        "no value without --show: {v}"
    );
    let agent2 = token(&data, "agent.token");
    assert_ne!(agent2, old_agent);
    assert_eq!(token(&data, "operator.token"), old_operator);
    assert_eq!(d.get("/v1/hosts", &old_agent).0, 401);
    assert_eq!(d.get("/v1/hosts", &agent2).0, 200);
    assert!(
        d.block(follows.sessions(&page)).is_ok(),
        "the file's new token"
    );
    let refused = d.block(holds.sessions(&page)).expect_err("the old one");
    assert!(
        refused.to_string().contains("401") || refused.to_string().contains("wrong token"),
        "{refused}"
    );
    // Both, shown: the values printed are the files'.
    let run = d.cli(&["token", "rotate", "--show"], &old_operator);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let (agent3, operator3) = (token(&data, "agent.token"), token(&data, "operator.token"));
    assert!(
        run.stdout
            .contains(&format!("new operator token: {operator3}")),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(&format!("new agent token: {agent3}")),
        "{}",
        run.stdout
    );
    assert_ne!(operator3, old_operator);
    for f in ["agent.token", "operator.token"] {
        assert_eq!(mode(&data.join(f)), 0o600, "{f}");
    }
    assert_eq!(status(&d, &old_operator), 401);
    assert_eq!(status(&d, &operator3), 200);
    assert_eq!(d.get("/v1/hosts", &agent2).0, 401);
    // The agent token cannot rotate; the old operator token neither.
    let run = d.cli(&["token", "rotate"], &agent3);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stderr.contains("operator"), "{}", run.stderr);
    let run = d.cli(&["token", "rotate"], &old_operator);
    assert_eq!(run.code, 2);
    assert_eq!(token(&data, "operator.token"), operator3, "nothing changed");
    none_of(
        &[&old_agent, &old_operator, &agent2, &agent3, &operator3],
        &d.log(),
        "the daemon's log",
    );
}
