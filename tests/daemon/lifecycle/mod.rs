//! The policy lifecycle through a real daemon on loopback: pass, nudge,
//! block, the attach race, fan-in, `next`, cancel, tokens and bad input.

use crate::common;

use common::daemon::{Daemon, scratch_config};
use common::{Scratch, allow_config, script_gate};
use serde_json::{Value, json};
use std::time::Duration;

mod api;
mod gating;
mod operator_power;

const T: Duration = Duration::from_secs(30);

fn setup() -> (Scratch, Daemon) {
    let (s, cfg) = scratch_config(&["true", "false"]);
    let data = s.etc.join("data");
    let d = Daemon::start(&data, &cfg);
    (s, d)
}

/// As [`setup`], with session `s1` registered on the workspace.
fn setup_s1() -> (Scratch, Daemon) {
    let (s, d) = setup();
    d.register("s1", &s.ws);
    (s, d)
}

/// The agent of `session` fixes `status.txt` and ends its turn: the
/// policy `pid` passes on its second gate run.
fn fix_and_pass(s: &Scratch, d: &Daemon, session: &str, pid: &str) {
    s.write_ws("status.txt", "ok\n");
    d.report(session, "turn-end");
    d.wait_runs(pid, "done", 2, T);
}

fn gate_file_ok(file: &str) -> Value {
    serde_json::from_str(&script_gate("gates/file-says-ok.sh", &[file], 10_000)).expect("gate json")
}

fn subsequence(events: &[String], want: &[&str]) -> bool {
    let mut it = events.iter();
    want.iter().all(|w| it.any(|e| e == w))
}
