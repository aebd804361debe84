//! Making a plugin's store: the WASI grants (captured output, the
//! workspace read-only where the plugin imports the filesystem, nothing
//! else), the memory budget, the fuel and the epoch deadline. Used by an
//! evaluation made inline (`evaluate`) and by one made ahead (`spare`),
//! which import this module and never each other.
//!
//! It owns a store's construction; it must never call into a plugin.

use super::bindings::GatePlugin;
use super::state::{JudgeBridge, MemoryBudget, PluginState};
use super::{LoadedPlugin, PluginError};
use crate::config::PluginBounds;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::OwnedSemaphorePermit;
use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store, UpdateDeadline};
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
        deadline: None,
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
/// now, where it is interrupted. The same instant bounds the plugin's
/// `judge` calls (`PluginState::deadline`): the gate's timeout is a
/// wall-clock bound on everything the evaluation waits on.
pub(super) fn set_deadline(store: &mut Store<PluginState>, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    store.data_mut().deadline = Some(deadline);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        Ok(if Instant::now() >= deadline {
            UpdateDeadline::Interrupt
        } else {
            UpdateDeadline::Yield(1)
        })
    });
}
