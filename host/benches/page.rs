//! The operator's page in a real headless Chromium (issue 53), against a
//! real `gatehost serve` on loopback; the browser is driven by
//! `benches/support/page_bench.py` (Playwright for Python, the system's
//! Chromium: `scripts/install-browser.sh` makes `target/browser-venv`, or
//! set `GATEHOST_BROWSER_PYTHON`).
//!
//! Run: `cargo bench -p gatehost --bench page` (options: `-- --policies N
//! --lines N --attaches N --runs N`).
//!
//! - The inbox with `--policies` (10,000) settled policies in the store
//!   (every 37th blocked): a fresh load of `/ui/` to its lists drawn
//!   (the page's `gatehost:inbox-shown` mark, ms since the navigation
//!   began), beside the same load's `DOMContentLoaded` (the page's own
//!   files, before any call: the baseline).
//! - A policy whose diff adds `--lines` (10,000) lines: a fresh load of its
//!   page to its diff's first screen painted and to every row drawn, and
//!   the longest main-thread task Chromium reported.
//! - One tab's cost on the daemon: `--attaches` (1,000) policies attached
//!   one after another (each measurement on a session of its own), with
//!   the inbox open in a tab (live) and with none, alternated ABBA `--runs`
//!   times; the ratio of their wall times, and how many requests the tab
//!   made meanwhile.

mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::serve::{Daemon, Http, start};

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("GATEHOST_BROWSER_PYTHON") {
        return PathBuf::from(p);
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/browser-venv/bin/python");
    assert!(
        p.exists(),
        "no browser venv at {}: run scripts/install-browser.sh",
        p.display()
    );
    p
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/support/page_bench.py")
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .status()
        .expect("git")
        .success();
    assert!(ok, "git {args:?}");
}

fn link(http: &Http, d: &Daemon, policy: Option<&str>) -> String {
    let body = policy.map_or(json!({}), |p| json!({"policy": p}));
    http.call(d, reqwest::Method::POST, "/v1/ui/link", Some(body))["url"]
        .as_str()
        .expect("url")
        .to_string()
}

fn origin(link: &str) -> String {
    link.split("/ui/login").next().expect("origin").to_string()
}

/// Waits for policy `id` to reach `status`.
fn wait_status(http: &Http, d: &Daemon, id: &str, status: &str) {
    let t0 = Instant::now();
    loop {
        let p = http.call(d, reqwest::Method::GET, &format!("/v1/policies/{id}"), None);
        if p["status"] == status {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "{p}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `n` policies attached one after another on a session of their own
/// (`session`, registered first: a session's policies are looked at on
/// each attach, so each measurement starts from none).
fn attaches(http: &Http, d: &Daemon, ws: &Path, session: &str, n: usize) -> Duration {
    http.call(
        d,
        reqwest::Method::POST,
        "/v1/sessions",
        Some(json!({"id": session, "cwd": ws})),
    );
    let t0 = Instant::now();
    for _ in 0..n {
        http.call(
            d,
            reqwest::Method::POST,
            "/v1/policies",
            Some(json!({"sessionId": session, "gate": {"command": "true"}})),
        );
    }
    t0.elapsed()
}

fn main() {
    let policies = support::arg("--policies", 10_000);
    let lines = support::arg("--lines", 10_000);
    let n = support::arg("--attaches", 1_000);
    let runs = support::arg("--runs", 3);
    let dir = tempfile::tempdir().expect("tempdir");
    let roots = dir.path().join("roots");
    let ws = roots.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    git(&ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("README"), "hello\n").expect("readme");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-q", "-m", "init"]);
    let config = support::serve::config(dir.path(), "config", &roots, None, "");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data");
    support::settled_policies(&data, "old", policies, 37);
    let (d, _) = start(&data, &config, "127.0.0.1:0");
    let http = Http::new();
    http.call(
        &d,
        reqwest::Method::POST,
        "/v1/sessions",
        Some(json!({"id": "s", "cwd": ws})),
    );
    // The big change: a file of `lines` lines, each a line of code.
    let text: String = (0..lines)
        .map(|i| format!("fn f{i}() -> u32 {{ {i} }} // line {i}\n"))
        .collect();
    std::fs::write(ws.join("big.rs"), text).expect("big");
    let p = http.call(
        &d,
        reqwest::Method::POST,
        "/v1/policies",
        Some(
            json!({"sessionId": "s", "gate": {"command": "true"}, "then": "commit",
                    "commit": {"paths": ["big.rs"], "message": "a big file"}}),
        ),
    );
    let pid = p["policyId"].as_str().expect("policyId").to_string();
    http.call(
        &d,
        reqwest::Method::POST,
        "/v1/sessions/s/report",
        Some(json!({"kind": "turn-end"})),
    );
    wait_status(&http, &d, &pid, "awaiting-ack");

    // The inbox and the big diff, loaded afresh `runs` times.
    let l = link(&http, &d, None);
    let base = origin(&l);
    let profile = dir.path().join("profile-measure");
    let out = Command::new(python())
        .arg(script())
        .args(["measure", &l, &format!("{base}/ui/")])
        .arg(format!("{base}/ui/#policy/{pid}"))
        .arg(runs.to_string())
        .arg(&profile)
        .output()
        .expect("run the browser");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    let col = |list: &str, key: &str| -> Vec<f64> {
        seen[list]
            .as_array()
            .expect("runs")
            .iter()
            .map(|r| r[key].as_f64().expect("a number"))
            .collect()
    };
    println!(
        "## the page in Chromium ({runs} fresh loads each, median; ms since the navigation began)\n"
    );
    println!("| | median | runs |");
    println!("| --- | --- | --- |");
    let row = |name: &str, v: Vec<f64>| {
        let all: Vec<String> = v.iter().map(|x| format!("{x:.0}")).collect();
        println!("| {name} | {:.1} ms | {} |", median(v), all.join(", "));
    };
    row(
        &format!("inbox, {policies} policies: DOMContentLoaded (baseline)"),
        col("inbox", "domContentLoaded"),
    );
    row("inbox: the lists drawn", col("inbox", "inbox"));
    row(
        &format!("a {lines}-line diff: DOMContentLoaded (baseline)"),
        col("policy", "domContentLoaded"),
    );
    row("its first screen painted", col("policy", "firstScreen"));
    row("every row drawn", col("policy", "drawn"));
    row("the longest main-thread task", col("policy", "longestTask"));
    println!(
        "\nrows drawn: {}",
        seen["policy"][0]["rows"].as_u64().unwrap_or_default()
    );

    // One tab's cost: the attaches with the inbox open, and with none.
    let (mut with, mut without, mut requests) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..runs {
        // Alternated ABBA (none, tab; tab, none; …): the store grows by
        // `n` policies each time, and neither side always comes later.
        let none_first = r % 2 == 0;
        if none_first {
            without.push(attaches(&http, &d, &ws, &format!("none-{r}"), n).as_secs_f64());
        }
        let l = link(&http, &d, None);
        let mut tab = Command::new(python())
            .arg(script())
            .args(["hold", &l, &format!("{}/ui/", origin(&l))])
            .arg(dir.path().join(format!("profile-hold-{r}")))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the tab");
        let mut lines = BufReader::new(tab.stdout.take().expect("stdout")).lines();
        let ready = lines.next().expect("ready").expect("line");
        assert_eq!(ready, "ready");
        with.push(attaches(&http, &d, &ws, &format!("tab-{r}"), n).as_secs_f64());
        writeln!(tab.stdin.take().expect("stdin")).expect("go on");
        let last = lines.next().expect("answer").expect("line");
        let v: Value = serde_json::from_str(&last).expect("json");
        requests.push(v["requests"].as_f64().unwrap_or_default());
        let _ = tab.wait();
        if !none_first {
            without.push(attaches(&http, &d, &ws, &format!("none-{r}"), n).as_secs_f64());
        }
    }
    let ratio: Vec<f64> = with.iter().zip(&without).map(|(w, o)| w / o).collect();
    println!("\n## one open tab's cost: {n} attaches, alternated {runs} times\n");
    println!("| | median | runs |");
    println!("| --- | --- | --- |");
    let secs = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.2} s"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "| no tab (baseline) | {:.2} s | {} |",
        median(without.clone()),
        secs(&without)
    );
    println!(
        "| the inbox open | {:.2} s | {} |",
        median(with.clone()),
        secs(&with)
    );
    println!(
        "| ratio | {:.2}x | {} |",
        median(ratio.clone()),
        ratio
            .iter()
            .map(|x| format!("{x:.2}x"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "| the tab's requests meanwhile | {:.0} | {} |",
        median(requests.clone()),
        requests
            .iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}
