//! One evaluation: a fresh store with the WASI grants and the bounds (or a
//! spare made ahead, see `spare`), the call to `evaluate`, and the mapping
//! of its result (or trap) to a plugin verdict or a typed error. The store
//! is dropped afterwards, whatever happened, and never called again.

use super::bindings::gatehost::gate::types as wit;
use super::spare::SpareRecipe;
use super::state::{BoundHit, LOG_LINES_CAP, PluginState};
use super::store::{Prepared, StoreParts, new_store, set_deadline};
use super::{
    CapturedOutput, ChangeKind, Evaluation, LoadedPlugin, PluginContext, PluginError, PluginUsage,
    PluginVerdict, WasmHost,
};
use crate::config::PluginBounds;
use crate::verdict::{Finding, Severity};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::Trap;

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
        // Epochs stop guest code, and judge calls get only what is left of
        // the deadline. This outer bound is a backstop for anything else (a
        // WASI sleep or poll, a wait for a judge slot): timeoutMs + 500 ms,
        // past which the evaluation is dropped (a judge it was waiting on
        // is killed with it).
        let backstop = started + bounds.timeout + BACKSTOP_MARGIN;
        let result = {
            let evaluation = async {
                let instance = match instance {
                    Some(instance) => instance,
                    None => plugin.pre.instantiate_async(&mut store).await?,
                };
                instance.call_evaluate(&mut store, &ctx).await
            };
            tokio::time::timeout_at(backstop.into(), evaluation)
                .await
                .map_err(drop)
        };
        let finished = Instant::now();
        let fuel_used = bounds.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        let state = store.data();
        let judge_time = state.judge_clock.spent(finished);
        let usage = PluginUsage {
            bounds,
            elapsed: finished.saturating_duration_since(started),
            judge_time,
            judge_calls: state.judge_calls,
            fuel_used,
            memory_bytes: state.limiter.used_bytes,
        };
        let captured = CapturedOutput {
            stdout: stdout.contents().to_vec(),
            stderr: stderr.contents().to_vec(),
            usage: Some(usage),
        };
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
                after: crate::verdict::human_duration(started.elapsed()),
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
                        usage,
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
    match state.bound_hit {
        Some(BoundHit::JudgeCalls) => {
            return PluginError::JudgeCalls {
                plugin,
                calls: bounds.judge_calls,
            };
        }
        Some(BoundHit::Timeout) => {
            return PluginError::Timeout {
                plugin,
                after: crate::verdict::human_duration(bounds.timeout),
            };
        }
        None => {}
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => {
            return PluginError::Timeout {
                plugin,
                after: crate::verdict::human_duration(bounds.timeout),
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
