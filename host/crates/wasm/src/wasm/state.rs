//! The per-evaluation store state: WASI context, bounds bookkeeping, and
//! the host functions a plugin imports (`log`, `file-diff`, `judge`,
//! `judge-with-context`, `workspace-files`, `read-files`).
//!
//! A store (and so this state) lives for exactly one evaluation and is
//! dropped afterwards, trapped or not.

use super::bindings::gatehost::gate::host::{self, JudgeReply, LogLevel, ReadError};
use super::bindings::gatehost::gate::types::{self, Decision};
use super::judge_host::{JudgeAnswer, JudgeCall, JudgeHost};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// The most judge text handed back to a plugin (the tail is kept).
const JUDGE_TEXT_CAP: usize = 64 * 1024;
/// The most log lines kept from one evaluation.
pub(super) const LOG_LINES_CAP: usize = 200;

/// Which bound an evaluation hit, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BoundHit {
    JudgeCalls,
    /// The evaluation's deadline passed in (or before) a `judge` call.
    Timeout,
}

/// How the plugin's `judge` import reaches the host's judge gate.
#[derive(Debug, Clone)]
pub struct JudgeBridge {
    /// Runs the call (the gate layer's judge).
    pub host: Arc<dyn JudgeHost>,
    /// The adapter the gate's `judge` names; `None`: no judge is
    /// configured, and a call is an error.
    pub adapter: Option<String>,
    /// The model the gate's `judge` names, if any.
    pub model: Option<String>,
    /// Each call's own bound (the gate's `judge.timeoutMs`, else the
    /// default), within what is left of the evaluation's.
    pub timeout: Duration,
    /// Whether a call's verdict line must carry its nonce.
    pub nonce: bool,
    /// Judge calls one evaluation may make.
    pub max_calls: u32,
}

/// The time one evaluation spent in judge calls, reported in its usage.
/// It counts against the plugin's `timeoutMs` like everything else the
/// evaluation waits on (each call is bounded by what is left of it).
#[derive(Debug, Default)]
pub(super) struct JudgeClock {
    state: std::sync::Mutex<ClockState>,
}

#[derive(Debug, Default)]
struct ClockState {
    spent: Duration,
    running: Option<(Instant, Duration)>,
}

impl JudgeClock {
    /// A judge call starts; it may take up to `bound`.
    fn start(&self, bound: Duration) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.running = Some((Instant::now(), bound));
    }

    /// The running call ended.
    fn stop(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((since, bound)) = s.running.take() {
            s.spent += since.elapsed().min(bound);
        }
    }

    /// Judge time so far, as of `now`.
    pub(super) fn spent(&self, now: Instant) -> Duration {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let running = s.running.map_or(Duration::ZERO, |(since, bound)| {
            now.saturating_duration_since(since).min(bound)
        });
        s.spent + running
    }
}

/// Stops the clock when a judge call ends, however it ends.
struct Timing<'a>(&'a JudgeClock);

impl Drop for Timing<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

pub(super) struct PluginState {
    pub plugin: String,
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub limiter: MemoryBudget,
    pub diffs: Arc<BTreeMap<String, String>>,
    /// The workspace for `workspace-files` and `read-files`.
    pub workspace: Option<cap_std::fs::Dir>,
    /// `None` while the store waits as a spare, made ahead of its
    /// evaluation (see `spare`; a spare must not hold the runner, which
    /// holds the host): the evaluation that takes the store sets it, and
    /// until then every host import refuses.
    pub judge: Option<JudgeBridge>,
    pub judge_calls: u32,
    /// Time spent in judge calls (reported; the deadline counts it too).
    pub judge_clock: Arc<JudgeClock>,
    /// When the evaluation's `timeoutMs` runs out (set with the epoch
    /// deadline): a `judge` call is bounded by what is left of it.
    pub deadline: Option<Instant>,
    pub bound_hit: Option<BoundHit>,
    pub logs: Vec<String>,
    /// `log` lines past the per-evaluation cap: neither kept nor printed.
    pub logs_dropped: u64,
    /// A host import was called while the store waited as a spare.
    pub called_ahead: bool,
}

impl PluginState {
    /// Refuses a host import in a store made ahead of its evaluation: the
    /// diffs, workspace and judge it would answer from are not there yet.
    fn refuse_ahead(&mut self) -> wasmtime::Result<()> {
        if self.judge.is_none() {
            self.called_ahead = true;
            return Err(wasmtime::format_err!(
                "plugin called the host while being instantiated ahead of its evaluation"
            ));
        }
        Ok(())
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// One memory budget across all of a plugin's linear memories and tables'
/// growth (wasmtime's `StoreLimits` bounds each memory separately).
#[derive(Debug)]
pub(super) struct MemoryBudget {
    pub max_bytes: u64,
    pub used_bytes: u64,
    pub exceeded: bool,
}

/// What one table entry is counted as against the memory budget (a
/// function reference: a pointer and its type, as wasmtime stores it).
const TABLE_ENTRY_BYTES: u64 = 16;

impl ResourceLimiter for MemoryBudget {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let extra = desired.saturating_sub(current) as u64;
        if self.used_bytes.saturating_add(extra) > self.max_bytes {
            self.exceeded = true;
            return Ok(false);
        }
        self.used_bytes += extra;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Table entries are memory too: each counts against the same
        // budget as linear memory (and a million entries is refused
        // outright, far beyond any honest plugin).
        let extra = (desired.saturating_sub(current) as u64).saturating_mul(TABLE_ENTRY_BYTES);
        if desired > 1_000_000 || self.used_bytes.saturating_add(extra) > self.max_bytes {
            self.exceeded = true;
            return Ok(false);
        }
        self.used_bytes += extra;
        Ok(true)
    }
}

impl types::Host for PluginState {}

impl host::Host for PluginState {
    async fn log(&mut self, level: LogLevel, message: String) -> wasmtime::Result<()> {
        self.refuse_ahead()?;
        // Past the cap a line is only counted: a plugin must not flood the
        // host's log (the count is reported once, after the evaluation).
        if self.logs.len() >= LOG_LINES_CAP {
            self.logs_dropped += 1;
            return Ok(());
        }
        let message: String = message.chars().take(2000).collect();
        let plugin = &self.plugin;
        match level {
            LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            LogLevel::Info => tracing::info!(plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
        self.logs.push(message);
        Ok(())
    }

    async fn file_diff(&mut self, path: String) -> wasmtime::Result<Result<String, String>> {
        self.refuse_ahead()?;
        Ok(self
            .diffs
            .get(path.trim_start_matches("./"))
            .cloned()
            .ok_or_else(|| format!("no diff is known for {path}")))
    }

    async fn workspace_files(&mut self) -> wasmtime::Result<Result<Vec<String>, String>> {
        self.refuse_ahead()?;
        Ok(match &self.workspace {
            Some(dir) => super::files::list_files(dir),
            None => Err("no workspace is open for this plugin".into()),
        })
    }

    async fn read_files(
        &mut self,
        paths: Vec<String>,
        max_bytes: u64,
    ) -> wasmtime::Result<Result<Vec<Result<Vec<u8>, ReadError>>, String>> {
        self.refuse_ahead()?;
        let Some(dir) = &self.workspace else {
            return Ok(Err("no workspace is open for this plugin".into()));
        };
        let read = super::files::read_files(dir, &paths, max_bytes, self.limiter.max_bytes);
        Ok(read.map(|files| {
            files
                .into_iter()
                .map(|r| {
                    r.map_err(|e| match e {
                        super::files::ReadError::TooLarge => ReadError::TooLarge,
                        super::files::ReadError::Unreadable(m) => ReadError::Unreadable(m),
                    })
                })
                .collect()
        }))
    }

    async fn judge(&mut self, prompt: String) -> wasmtime::Result<Result<JudgeReply, String>> {
        self.ask_judge(&prompt, None).await
    }

    async fn judge_with_context(
        &mut self,
        rubric: String,
        context: String,
    ) -> wasmtime::Result<Result<JudgeReply, String>> {
        self.ask_judge(&rubric, Some(&context)).await
    }
}

impl PluginState {
    /// One judge call of either import: `rubric` is the judge's rubric,
    /// `context` (if any) the untrusted material. Both imports share the
    /// call count and the evaluation's deadline.
    async fn ask_judge(
        &mut self,
        rubric: &str,
        context: Option<&str>,
    ) -> wasmtime::Result<Result<JudgeReply, String>> {
        self.refuse_ahead()?;
        let bridge = self
            .judge
            .clone()
            .ok_or_else(|| wasmtime::format_err!("no judge bridge (checked above)"))?;
        self.judge_calls += 1;
        if self.judge_calls > bridge.max_calls {
            self.bound_hit = Some(BoundHit::JudgeCalls);
            return Err(wasmtime::format_err!(
                "plugin exceeded its limit of {} judge call(s) per evaluation",
                bridge.max_calls
            ));
        }
        let Some(adapter) = bridge.adapter.clone() else {
            return Ok(Err(
                "this gate configures no judge (set \"judge\" in the wasm gate object)".into(),
            ));
        };
        // The gate's timeout bounds the judge too: the call gets what is
        // left of the evaluation's time, at most the judge's own timeout.
        let left = self.deadline.map_or(bridge.timeout, |d| {
            d.saturating_duration_since(Instant::now())
        });
        if left.is_zero() {
            self.bound_hit = Some(BoundHit::Timeout);
            return Err(wasmtime::format_err!(
                "the plugin's time ran out before its judge call"
            ));
        }
        let call = JudgeCall {
            label: format!("judge for plugin {}: {adapter}", self.plugin),
            adapter: &adapter,
            model: bridge.model.as_deref(),
            rubric,
            context,
            timeout: bridge.timeout.min(left),
            nonce: bridge.nonce,
        };
        // The judge gate bounds itself (that timeout, then kill); epochs
        // do not interrupt host calls.
        let clock = self.judge_clock.clone();
        clock.start(left);
        let timing = Timing(&clock);
        let answer = bridge.host.judge(call).await;
        drop(timing);
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            // Cut short by the plugin's own bound: the evaluation timed
            // out, whatever the judge had answered so far.
            self.bound_hit = Some(BoundHit::Timeout);
            return Err(wasmtime::format_err!(
                "the plugin's time ran out during its judge call"
            ));
        }
        Ok(match answer {
            JudgeAnswer::CouldNotRun(reason) => Err(reason),
            JudgeAnswer::Decided { pass, output } => Ok(JudgeReply {
                decision: Some(if pass { Decision::Pass } else { Decision::Fail }),
                text: tail(&output, JUDGE_TEXT_CAP),
            }),
            // No verdict or a timeout: the judge decided nothing (fail closed).
            JudgeAnswer::Undecided { reason, output } => Ok(JudgeReply {
                decision: None,
                text: format!("{reason}\n{}", tail(&output, JUDGE_TEXT_CAP)),
            }),
        })
    }
}

fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    s[start..].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_entries_count_against_the_memory_budget() {
        let mut b = MemoryBudget {
            max_bytes: 1024 * 1024,
            used_bytes: 0,
            exceeded: false,
        };
        // 32 Ki entries of 16 bytes: half the budget.
        assert!(b.table_growing(0, 32 * 1024, None).expect("answer"));
        assert_eq!(b.used_bytes, 512 * 1024);
        // Memory and tables share it: 600 KiB more of memory does not fit.
        assert!(!b.memory_growing(0, 600 * 1024, None).expect("answer"));
        assert!(b.exceeded);
        // Nor do 40 Ki more entries.
        let mut c = MemoryBudget {
            max_bytes: 1024 * 1024,
            used_bytes: 512 * 1024,
            exceeded: false,
        };
        assert!(!c.table_growing(32 * 1024, 72 * 1024, None).expect("answer"));
        assert!(c.exceeded);
    }

    fn state(ahead: bool) -> PluginState {
        /// Never called: these tests stop before a judge runs.
        #[derive(Debug)]
        struct NoJudge;
        impl JudgeHost for NoJudge {
            fn judge<'a>(
                &'a self,
                _: JudgeCall<'a>,
            ) -> std::pin::Pin<Box<dyn std::future::Future<Output = JudgeAnswer> + Send + 'a>>
            {
                Box::pin(async { JudgeAnswer::CouldNotRun("no judge in this test".into()) })
            }
        }
        let judge = JudgeBridge {
            host: Arc::new(NoJudge),
            adapter: None,
            model: None,
            timeout: Duration::from_secs(1),
            nonce: false,
            max_calls: 1,
        };
        PluginState {
            plugin: "probe".into(),
            wasi: wasmtime_wasi::WasiCtxBuilder::new().build(),
            table: ResourceTable::new(),
            limiter: MemoryBudget {
                max_bytes: 1 << 20,
                used_bytes: 0,
                exceeded: false,
            },
            diffs: Arc::new(BTreeMap::from([("a.rs".to_string(), "+x\n".to_string())])),
            workspace: None,
            judge: (!ahead).then_some(judge),
            judge_calls: 0,
            judge_clock: Default::default(),
            deadline: None,
            bound_hit: None,
            logs: Vec::new(),
            logs_dropped: 0,
            called_ahead: false,
        }
    }

    /// A store made ahead of its evaluation answers no host import (it
    /// would answer from nothing, or from another evaluation) and records
    /// that it was asked; once taken by an evaluation it answers.
    #[tokio::test]
    async fn host_imports_refuse_ahead_of_the_evaluation() {
        let mut s = state(true);
        assert!(
            host::Host::log(&mut s, LogLevel::Info, "x".into())
                .await
                .is_err()
        );
        assert!(s.called_ahead);
        let mut s = state(true);
        assert!(host::Host::file_diff(&mut s, "a.rs".into()).await.is_err());
        assert!(s.called_ahead);
        let mut s = state(true);
        assert!(host::Host::judge(&mut s, "p".into()).await.is_err());
        let mut s = state(true);
        assert!(
            host::Host::judge_with_context(&mut s, "r".into(), "c".into())
                .await
                .is_err()
        );
        assert!(s.called_ahead);
        let mut s = state(true);
        assert!(host::Host::workspace_files(&mut s).await.is_err());
        let mut s = state(true);
        assert!(host::Host::read_files(&mut s, vec![], 1).await.is_err());
        assert!(s.called_ahead);

        let mut s = state(false);
        host::Host::log(&mut s, LogLevel::Info, "x".into())
            .await
            .expect("log");
        assert_eq!(s.logs, ["x"]);
        let diff = host::Host::file_diff(&mut s, "a.rs".into())
            .await
            .expect("call");
        assert_eq!(diff.as_deref(), Ok("+x\n"));
        let judged = host::Host::judge(&mut s, "p".into()).await.expect("call");
        assert!(judged.is_err(), "no judge here: {judged:?}");
        assert!(!s.called_ahead);
    }

    /// What a recording judge was asked.
    type Asked = std::sync::Mutex<Vec<(String, Option<String>)>>;

    /// Records each call's rubric and context, and answers FAIL.
    #[derive(Debug, Default)]
    struct Recording(Arc<Asked>);
    impl JudgeHost for Recording {
        fn judge<'a>(
            &'a self,
            call: JudgeCall<'a>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = JudgeAnswer> + Send + 'a>> {
            self.0
                .lock()
                .expect("lock")
                .push((call.rubric.into(), call.context.map(String::from)));
            Box::pin(async {
                JudgeAnswer::Decided {
                    pass: false,
                    output: "VERDICT: FAIL".into(),
                }
            })
        }
    }

    /// `judge-with-context` hands the host's judge the rubric and the
    /// (untrusted) context apart; `judge` hands it a rubric alone; both
    /// count against the same per-evaluation limit.
    #[tokio::test]
    async fn judge_with_context_keeps_the_context_out_of_the_rubric() {
        let asked = Arc::new(Asked::default());
        let mut s = state(false);
        s.judge = Some(JudgeBridge {
            host: Arc::new(Recording(asked.clone())),
            adapter: Some("j".into()),
            model: None,
            timeout: Duration::from_secs(1),
            nonce: false,
            max_calls: 2,
        });
        let reply = host::Host::judge_with_context(&mut s, "the rubric".into(), "STYLE.md".into())
            .await
            .expect("call")
            .expect("judged");
        assert_eq!(reply.decision, Some(Decision::Fail));
        host::Host::judge(&mut s, "a prompt".into())
            .await
            .expect("call")
            .expect("judged");
        assert_eq!(
            *asked.lock().expect("lock"),
            [
                ("the rubric".to_string(), Some("STYLE.md".to_string())),
                ("a prompt".to_string(), None),
            ]
        );
        // A third call of either kind is past the limit: the plugin stops.
        assert!(
            host::Host::judge_with_context(&mut s, "r".into(), "c".into())
                .await
                .is_err()
        );
        assert_eq!(s.bound_hit, Some(BoundHit::JudgeCalls));
        assert_eq!(asked.lock().expect("lock").len(), 2);
    }
}
