//! One evaluation: a fresh store with the WASI grants and the bounds (or a
//! spare made ahead, see `spare`), the call to `evaluate`, and the mapping
//! of its result (or trap) to a plugin verdict or a typed error. The store
//! is dropped afterwards, whatever happened, and never called again.

use super::bindings::GatePlugin;
use super::bindings::gatehost::gate::types as wit;
use super::spare::SpareRecipe;
use super::state::{BoundHit, JudgeBridge, LOG_LINES_CAP, MemoryBudget, PluginState};
use super::{
    CapturedOutput, ChangeKind, Evaluation, LoadedPlugin, PluginContext, PluginError,
    PluginVerdict, WasmHost,
};
use crate::config::PluginBounds;
use crate::verdict::{Finding, Severity};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::OwnedSemaphorePermit;
use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, Trap, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

/// File reads are short and local: WASI does them on the evaluating thread
/// instead of a round trip through the blocking pool per call (opens never
/// block, see `guarded_fs`).
pub(super) const BLOCKING_FILE_IO: bool = true;

/// A store with its instance, not yet called: made for one evaluation,
/// inline or ahead of it (a spare).
pub(super) struct Prepared {
    pub store: Store<PluginState>,
    pub instance: GatePlugin,
    pub stdout: MemoryOutputPipe,
    pub stderr: MemoryOutputPipe,
    /// The pool slot, released after the store (fields drop in order).
    pub slot: OwnedSemaphorePermit,
}

/// What a store is made from.
pub(super) struct StoreParts<'a> {
    pub plugin: &'a LoadedPlugin,
    pub bounds: PluginBounds,
    /// The workspace to preopen (read-only), for plugins that import
    /// `wasi:filesystem`.
    pub workspace_root: Option<&'a Path>,
    pub workspace_dir: Option<cap_std::fs::Dir>,
    pub diffs: Arc<BTreeMap<String, String>>,
    /// `None` for a store made ahead (a spare): host imports refuse.
    pub judge: Option<JudgeBridge>,
}

/// A fresh store: the WASI grants (captured stdout and stderr, the
/// workspace read-only where the plugin imports the filesystem, nothing
/// else), the memory budget and the fuel.
pub(super) fn new_store(
    engine: &Engine,
    parts: StoreParts<'_>,
) -> Result<(Store<PluginState>, MemoryOutputPipe, MemoryOutputPipe), PluginError> {
    let bounds = parts.bounds;
    let out_cap = usize::try_from(bounds.output_bytes).unwrap_or(usize::MAX);
    let stdout = MemoryOutputPipe::new(out_cap);
    let stderr = MemoryOutputPipe::new(out_cap);
    let mut builder = WasiCtxBuilder::new();
    builder
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_blocking_current_thread(BLOCKING_FILE_IO);
    // A plugin without the filesystem import could not use the preopen:
    // it is not opened.
    if parts.plugin.uses.filesystem {
        let root = parts
            .workspace_root
            .ok_or_else(|| PluginError::Engine("no workspace to preopen for this plugin".into()))?;
        builder
            .preopened_dir(root, "/workspace", FsPerms::ReadOnly)
            .map_err(|e| {
                PluginError::Engine(format!(
                    "cannot preopen the workspace {}: {e:#}",
                    root.display()
                ))
            })?;
    }
    let state = PluginState {
        plugin: parts.plugin.name.clone(),
        wasi: builder.build(),
        table: ResourceTable::new(),
        limiter: MemoryBudget {
            max_bytes: bounds.memory_bytes,
            used_bytes: 0,
            exceeded: false,
        },
        diffs: parts.diffs,
        workspace: parts.workspace_dir,
        judge: parts.judge,
        judge_calls: 0,
        judge_clock: Default::default(),
        bound_hit: None,
        logs: Vec::new(),
        logs_dropped: 0,
        called_ahead: false,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store
        .set_fuel(bounds.fuel)
        .map_err(|e| PluginError::Engine(format!("{e:#}")))?;
    Ok((store, stdout, stderr))
}

/// Every epoch tick the guest yields to the executor (so that a looping
/// plugin never holds up other tasks on its thread), until `timeout` from
/// now, where it is interrupted.
pub(super) fn set_deadline(store: &mut Store<PluginState>, timeout: Duration) {
    let start = Instant::now();
    let clock = store.data().judge_clock.clone();
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        let now = Instant::now();
        Ok(if now >= start + timeout + clock.spent(now) {
            UpdateDeadline::Interrupt
        } else {
            UpdateDeadline::Yield(1)
        })
    });
}

impl WasmHost {
    /// Runs one evaluation in a fresh store: a spare made ahead for this
    /// plugin and these bounds when there is one, else one made here.
    pub async fn evaluate(
        &self,
        plugin: &Arc<LoadedPlugin>,
        eval: Evaluation,
    ) -> Result<PluginVerdict, (PluginError, CapturedOutput)> {
        let name = plugin.name.clone();
        let bounds = eval.bounds;
        let fail = |e: PluginError| (e, CapturedOutput::default());
        let out_cap = usize::try_from(bounds.output_bytes).unwrap_or(usize::MAX);
        let spares_wanted = self.spares.eligible(plugin);
        let (mut store, stdout, stderr, slot, instance) = match self.spares.take(plugin, bounds) {
            Some(spare) => {
                let Prepared {
                    mut store,
                    instance,
                    stdout,
                    stderr,
                    slot,
                } = spare;
                let state = store.data_mut();
                state.diffs = eval.diffs;
                state.workspace = eval.workspace_dir;
                state.judge = Some(eval.judge);
                (store, stdout, stderr, slot, Some(instance))
            }
            None => {
                // Held until the store is dropped. The semaphore is
                // never closed; if it were, the evaluation says so.
                let slot = match self.slots.clone().try_acquire_owned() {
                    Ok(slot) => slot,
                    Err(_) => {
                        // Spares hold slots too: give them up first.
                        self.spares.clear();
                        self.slots.clone().acquire_owned().await.map_err(|e| {
                            fail(PluginError::Engine(format!("no instance slot: {e}")))
                        })?
                    }
                };
                let parts = StoreParts {
                    plugin,
                    bounds,
                    workspace_root: Some(&eval.workspace_root),
                    workspace_dir: eval.workspace_dir,
                    diffs: eval.diffs,
                    judge: Some(eval.judge),
                };
                let (store, stdout, stderr) = new_store(&self.engine, parts).map_err(fail)?;
                (store, stdout, stderr, slot, None)
            }
        };
        set_deadline(&mut store, bounds.timeout);

        let ctx = to_wit_context(&eval.context);
        let started = Instant::now();
        // Epochs stop guest code; judge calls bound themselves. This outer
        // bound is a backstop for anything else (a WASI sleep or poll):
        // timeoutMs + 500 ms, plus the time spent in judge calls.
        let clock = store.data().judge_clock.clone();
        let backstop = |now: Instant| started + bounds.timeout + BACKSTOP_MARGIN + clock.spent(now);
        let result = {
            let evaluation = async {
                let instance = match instance {
                    Some(instance) => instance,
                    None => plugin.pre.instantiate_async(&mut store).await?,
                };
                instance.call_evaluate(&mut store, &ctx).await
            };
            tokio::pin!(evaluation);
            loop {
                let deadline = backstop(Instant::now());
                match tokio::time::timeout_at(deadline.into(), &mut evaluation).await {
                    Ok(done) => break Ok(done),
                    // A judge call meanwhile moved the bound: wait on.
                    Err(_) if Instant::now() < backstop(Instant::now()) => continue,
                    Err(_) => break Err(()),
                }
            }
        };
        let captured = CapturedOutput {
            stdout: stdout.contents().to_vec(),
            stderr: stderr.contents().to_vec(),
        };
        let fuel_used = bounds.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        let state = store.data();
        if state.logs_dropped > 0 {
            tracing::warn!(
                plugin = %name,
                dropped = state.logs_dropped,
                "log lines past the first {LOG_LINES_CAP} of this evaluation were dropped"
            );
        }
        let output_full = captured.stdout.len() >= out_cap || captured.stderr.len() >= out_cap;
        let outcome = match result {
            Err(_) => Err(PluginError::Timeout {
                plugin: name.clone(),
                after: crate::gate::human_duration(started.elapsed()),
            }),
            Ok(Err(e)) => Err(classify_trap(&name, &e, state, bounds, output_full)),
            Ok(Ok(Err(message))) => Err(PluginError::Reported {
                plugin: name.clone(),
                message: message.chars().take(2000).collect(),
            }),
            Ok(Ok(Ok(verdict))) => {
                // What the verdict costs once serialised: every finding
                // counts its fields' fixed share, not only its strings.
                let size = verdict.summary.len()
                    + verdict
                        .findings
                        .iter()
                        .map(|f| {
                            FINDING_OVERHEAD
                                + f.message.len()
                                + f.path.as_ref().map_or(0, String::len)
                        })
                        .sum::<usize>();
                if output_full {
                    // The plugin went on after its writes failed: reaching
                    // the output bound is an error, whatever it answers.
                    Err(PluginError::Output {
                        plugin: name.clone(),
                        bytes: bounds.output_bytes,
                    })
                } else if verdict.findings.len() > self.config.max_findings {
                    Err(PluginError::Findings {
                        plugin: name.clone(),
                        count: verdict.findings.len(),
                        max: self.config.max_findings,
                    })
                } else if size as u64 > bounds.output_bytes {
                    Err(PluginError::Output {
                        plugin: name.clone(),
                        bytes: bounds.output_bytes,
                    })
                } else {
                    Ok(PluginVerdict {
                        passed: verdict.decision == wit::Decision::Pass,
                        summary: one_line(&verdict.summary),
                        findings: verdict.findings.into_iter().map(from_wit_finding).collect(),
                        stdout: Vec::new(),
                        stderr: Vec::new(),
                        fuel_used,
                    })
                }
            }
        };
        if spares_wanted {
            let recipe = SpareRecipe {
                engine: self.engine.clone(),
                plugin: plugin.clone(),
                bounds,
                slots: self.slots.clone(),
            };
            self.spares.replenish((store, slot), recipe);
        } else {
            // The store first, then its slot.
            drop((store, slot));
        }
        match outcome {
            Ok(mut v) => {
                v.stdout = captured.stdout;
                v.stderr = captured.stderr;
                Ok(v)
            }
            Err(e) => Err((e, captured)),
        }
    }
}

/// What one finding costs in a serialised verdict beyond its strings
/// (keys, severity, line, punctuation).
const FINDING_OVERHEAD: usize = 64;

/// How long past `timeoutMs` the backstop waits for a plugin stuck in a
/// host call (a WASI sleep or poll) that epochs cannot interrupt.
const BACKSTOP_MARGIN: Duration = Duration::from_millis(500);

fn classify_trap(
    name: &str,
    e: &wasmtime::Error,
    state: &PluginState,
    bounds: PluginBounds,
    output_full: bool,
) -> PluginError {
    let plugin = name.to_string();
    if state.bound_hit == Some(BoundHit::JudgeCalls) {
        return PluginError::JudgeCalls {
            plugin,
            calls: bounds.judge_calls,
        };
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => {
            return PluginError::Timeout {
                plugin,
                after: crate::gate::human_duration(bounds.timeout),
            };
        }
        Some(Trap::OutOfFuel) => {
            return PluginError::OutOfFuel {
                plugin,
                fuel: bounds.fuel,
            };
        }
        _ => {}
    }
    if state.limiter.exceeded {
        return PluginError::Memory {
            plugin,
            mib: bounds.memory_bytes / (1024 * 1024),
        };
    }
    if output_full {
        return PluginError::Output {
            plugin,
            bytes: bounds.output_bytes,
        };
    }
    let message = match e.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => format!("{e:#}"),
    };
    PluginError::Trap {
        plugin,
        message: one_line(&message),
    }
}

fn one_line(s: &str) -> String {
    let line = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    line.chars().take(500).collect()
}

fn to_wit_context(c: &PluginContext) -> wit::Context {
    wit::Context {
        session_id: c.session_id.clone(),
        policy_id: c.policy_id.clone(),
        config: c.config.clone(),
        config_json: c.config_json.clone(),
        last_message: c.last_message.clone(),
        changed_files: c
            .changed_files
            .iter()
            .map(|(path, kind)| wit::ChangedFile {
                path: path.clone(),
                kind: match kind {
                    ChangeKind::Added => wit::ChangeKind::Added,
                    ChangeKind::Modified => wit::ChangeKind::Modified,
                    ChangeKind::Deleted => wit::ChangeKind::Deleted,
                    ChangeKind::Renamed => wit::ChangeKind::Renamed,
                },
            })
            .collect(),
    }
}

fn from_wit_finding(f: wit::Finding) -> Finding {
    Finding {
        path: f.path,
        line: f.line,
        severity: match f.severity {
            wit::Severity::Info => Severity::Info,
            wit::Severity::Warning => Severity::Warning,
            wit::Severity::Error => Severity::Error,
        },
        message: one_line(&f.message),
    }
}
