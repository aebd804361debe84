//! The verdict: the one result type every gate kind produces.
//!
//! Owns the outcome vocabulary (`pass`, `fail`, `error`) and the JSON shape
//! clients read. It must never decide anything itself: gates build verdicts,
//! and nothing here defaults to `pass`.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What a gate concluded.
///
/// `Fail` means the gate ran and said no (a red test, a judge's FAIL);
/// `Error` means the gate could not run (not allowlisted, path escape,
/// adapter missing, crash of the host side). Both block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The gate ran and said yes.
    Pass,
    /// The gate ran and said no (a red test, a judge's FAIL).
    Fail,
    /// The gate could not run (not allowlisted, a path escape, a missing
    /// adapter, a crash of the host side).
    Error,
}

impl Outcome {
    /// Exit code of `gatehost check`: 0 pass, 1 fail, 2 error.
    pub fn exit_code(self) -> i32 {
        match self {
            Outcome::Pass => 0,
            Outcome::Fail => 1,
            Outcome::Error => 2,
        }
    }

    /// Its name in JSON and in reports (`pass`, `fail`, `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Error => "error",
        }
    }
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// For information.
    Info,
    /// Worth a look (a file left out of what a judge saw, say).
    Warning,
    /// A problem the gate found.
    Error,
}

/// One located remark a gate makes about the work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The file it is about, relative to the workspace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The line in `path`, from 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// How serious it is.
    pub severity: Severity,
    /// The remark, for the agent and the person reading.
    pub message: String,
}

/// The kept tail of one output stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputTail {
    /// The last bytes of the stream (at most the cap), decoded lossily.
    pub text: String,
    /// How many bytes the stream carried in all.
    pub total_bytes: u64,
    /// True when `text` is only the tail because the stream exceeded the cap.
    pub truncated: bool,
}

/// Durations measured around a gate, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Durations {
    /// Time spent waiting for a concurrency slot (judges).
    pub queued_ms: u64,
    /// Time from spawn to the gate's resolution, kill and reap included.
    pub run_ms: u64,
}

impl Durations {
    /// The durations of `queued` and `run`, in whole milliseconds (saturating).
    pub fn new(queued: Duration, run: Duration) -> Self {
        Durations {
            queued_ms: duration_ms(queued),
            run_ms: duration_ms(run),
        }
    }
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The result of running one gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// What the gate concluded.
    pub outcome: Outcome,
    /// One line a person understands.
    pub reason: String,
    /// What ran, for example `shell: cargo test` or `judge: claude`.
    pub gate: String,
    /// What the gate found, located where it could be.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// A process gate's exit code (none: killed by a signal, or no process
    /// ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended a process gate, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// The gate ran out of its timeout and was killed.
    #[serde(default)]
    pub timed_out: bool,
    /// The tail of the gate's stdout (none when no process ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<OutputTail>,
    /// The tail of the gate's stderr (none when no process ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<OutputTail>,
    /// How long it waited for a slot and how long it ran.
    pub durations: Durations,
}

impl Verdict {
    /// A verdict with no process details, used by the `error` paths that
    /// stop a gate before anything runs.
    pub fn new(outcome: Outcome, gate: impl Into<String>, reason: impl Into<String>) -> Self {
        Verdict {
            outcome,
            reason: reason.into(),
            gate: gate.into(),
            findings: Vec::new(),
            exit_code: None,
            signal: None,
            timed_out: false,
            stdout: None,
            stderr: None,
            durations: Durations::default(),
        }
    }

    /// An `error` verdict with no process details: the gate could not run.
    pub fn error(gate: impl Into<String>, reason: impl Into<String>) -> Self {
        Verdict::new(Outcome::Error, gate, reason)
    }

    /// Whether the outcome is `pass`.
    pub fn passed(&self) -> bool {
        self.outcome == Outcome::Pass
    }
}

/// The result of running a gate file: one verdict per gate that ran, in the
/// order they ran, and the overall outcome (the first non-pass, else pass).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunReport {
    /// The first non-pass gate's outcome, else `pass` (`error` when no gate
    /// ran).
    pub outcome: Outcome,
    /// One line a person understands: the first non-pass gate's reason (`gate
    /// 2 of 3 (…): …`), or why all passed.
    pub reason: String,
    /// The gates' durations, summed.
    pub durations: Durations,
    /// Verdicts of the gates that ran; gates after the first non-pass are
    /// listed in `skipped` instead.
    pub gates: Vec<Verdict>,
    /// The labels of the gates not run because an earlier one did not pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

impl RunReport {
    /// A run that could not happen (no gate ran): `error`, with why.
    pub fn error(reason: String) -> RunReport {
        RunReport {
            outcome: Outcome::Error,
            reason,
            durations: Durations::default(),
            gates: Vec::new(),
            skipped: Vec::new(),
        }
    }

    /// The report of `gates` (run in order) and `skipped`: its outcome,
    /// reason and summed durations.
    pub fn from_verdicts(gates: Vec<Verdict>, skipped: Vec<String>) -> Self {
        let total = gates.len() + skipped.len();
        let mut durations = Durations::default();
        for v in &gates {
            durations.queued_ms = durations.queued_ms.saturating_add(v.durations.queued_ms);
            durations.run_ms = durations.run_ms.saturating_add(v.durations.run_ms);
        }
        let first_blocking = gates.iter().position(|v| !v.passed());
        let (outcome, reason) = match first_blocking {
            Some(i) => {
                let v = &gates[i];
                let reason = if total == 1 {
                    v.reason.clone()
                } else {
                    format!("gate {} of {} ({}): {}", i + 1, total, v.gate, v.reason)
                };
                (v.outcome, reason)
            }
            None if gates.is_empty() => (Outcome::Error, "the gate file holds no gate".to_string()),
            None if gates.len() == 1 => (Outcome::Pass, gates[0].reason.clone()),
            None => (Outcome::Pass, format!("all {total} gates passed")),
        };
        RunReport {
            outcome,
            reason,
            durations,
            gates,
            skipped,
        }
    }
}

/// `1.5 s`, `250 ms`, `2 min 5 s`.
pub fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        let s = d.as_secs_f64();
        if ms.is_multiple_of(1000) {
            format!("{} s", ms / 1000)
        } else {
            format!("{s:.1} s")
        }
    } else {
        let secs = d.as_secs();
        match secs % 60 {
            0 => format!("{} min", secs / 60),
            r => format!("{} min {r} s", secs / 60),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(outcome: Outcome, reason: &str) -> Verdict {
        Verdict::new(outcome, "shell: x", reason)
    }

    #[test]
    fn exit_codes_follow_the_outcome() {
        assert_eq!(Outcome::Pass.exit_code(), 0);
        assert_eq!(Outcome::Fail.exit_code(), 1);
        assert_eq!(Outcome::Error.exit_code(), 2);
    }

    #[test]
    fn an_empty_report_is_an_error_never_a_pass() {
        let r = RunReport::from_verdicts(vec![], vec![]);
        assert_eq!(r.outcome, Outcome::Error);
    }

    #[test]
    fn the_first_blocking_gate_decides_the_report() {
        let r = RunReport::from_verdicts(
            vec![v(Outcome::Pass, "ok"), v(Outcome::Error, "not allowlisted")],
            vec!["judge: claude".into()],
        );
        assert_eq!(r.outcome, Outcome::Error);
        assert!(r.reason.starts_with("gate 2 of 3"), "{}", r.reason);
        assert!(r.reason.ends_with("not allowlisted"));
    }

    #[test]
    fn verdict_json_uses_the_documented_names() {
        let mut verdict = v(Outcome::Fail, "exited with code 3");
        verdict.exit_code = Some(3);
        let json = serde_json::to_value(&verdict).expect("serialises");
        assert_eq!(json["outcome"], "fail");
        assert_eq!(json["reason"], "exited with code 3");
        assert_eq!(json["exitCode"], 3);
        assert_eq!(json["durations"]["queuedMs"], 0);
        assert!(json.get("signal").is_none());
    }
}
