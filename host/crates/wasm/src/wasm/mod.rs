//! The WASM gate host: runs third-party gate plugins (WASI components built
//! against `wit/v0.1`) in wasmtime, confined and bounded.
//!
//! Owns one engine per host (with an epoch ticker), the on-disk cache of
//! compiled components, and an `InstancePre` per plugin. Every evaluation
//! gets a fresh store, which is dropped afterwards: a store that trapped is
//! never reused. For a plugin without the filesystem import, that store may
//! have been instantiated ahead, after the plugin's previous evaluation
//! (`spare`): still never called before, and never called again. Grants: the workspace preopened read-only at `/workspace`,
//! captured stdout/stderr, the `gatehost:gate/host` imports; nothing else
//! (no environment, arguments, network or inherited stdio). Bounds: wall
//! clock (epochs), instructions (fuel), memory summed over all memories,
//! output, and judge calls; each has its own typed error.
//!
//! It must never let a plugin's failure become a pass, and never let one
//! plugin's trap affect another evaluation.

pub mod carried;
mod digests;
mod error;
mod evaluate;
pub mod files;
mod grants;
mod guarded_fs;
mod judge_host;
mod load;
mod resolve;
mod spare;
mod state;
mod store;

mod wit;
pub(crate) use wit::v0_1 as bindings;

pub use error::PluginError;
pub use judge_host::{JudgeAnswer, JudgeCall, JudgeHost};
pub use load::PluginFile;
pub use resolve::{FileIdentity, Located, NamedPlugin};
pub use state::JudgeBridge;

use crate::config::{PluginBounds, WasmConfig};
use crate::verdict::Finding;
use state::PluginState;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Bytes of a pooled memory reset by zeroing rather than unmapping.
const KEEP_RESIDENT: usize = 2 * 1024 * 1024;

/// Evaluations that can be in flight at once with the pooling allocator.
const POOL_INSTANCES: u32 = 64;

/// Epoch tick: the wall-clock bound's resolution.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// A component's interface, and why gatehost would refuse it.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The interfaces (and functions) it imports, by their WIT names.
    pub imports: Vec<String>,
    /// The interfaces (and functions) it exports, by their WIT names.
    pub exports: Vec<String>,
    /// Why gatehost would refuse it (a forbidden import, the wrong
    /// world); `None`: it would load.
    pub problem: Option<PluginError>,
}

/// A compiled plugin, ready to instantiate.
pub struct LoadedPlugin {
    /// The plugin as the gate named it (its name, or its path).
    pub name: String,
    /// The sha256 of its file, lower-case hex.
    pub digest: String,
    /// Its file's size (bytes).
    pub size: usize,
    /// Which of the workspace's doors it imports (else that door is not
    /// opened for its evaluations).
    pub uses: grants::Uses,
    pre: bindings::GatePluginPre<PluginState>,
}

/// What an evaluation is given.
pub struct Evaluation {
    /// The record its `evaluate` is called with.
    pub context: PluginContext,
    /// Its time, fuel, memory and output bounds.
    pub bounds: PluginBounds,
    /// The workspace's path (for messages; the plugin reads through
    /// `workspace_dir`).
    pub workspace_root: std::path::PathBuf,
    /// The workspace as the anchor opened it, for `workspace-files` and
    /// `read-files` (set when the plugin imports the host interface).
    pub workspace_dir: Option<cap_std::fs::Dir>,
    /// The unified diff of each changed file, by workspace-relative path,
    /// for `file-diff`.
    pub diffs: Arc<BTreeMap<String, String>>,
    /// How its `judge` calls reach the host's judge.
    pub judge: JudgeBridge,
}

/// The context record handed to `evaluate`.
#[derive(Debug, Clone, Default)]
pub struct PluginContext {
    /// The agent session the gate runs for (`None` for `gatehost check`).
    pub session_id: Option<String>,
    /// The policy the gate belongs to (`None` for `gatehost check`).
    pub policy_id: Option<String>,
    /// The gate object's `config`, as string keys and values: strings as
    /// they are, other JSON values as JSON text.
    pub config: Vec<(String, String)>,
    /// The whole gate object's `config` as JSON text (`{}` when absent).
    pub config_json: String,
    /// The agent's last message, when the host knows it.
    pub last_message: Option<String>,
    /// Workspace-relative paths and how they changed.
    pub changed_files: Vec<(String, ChangeKind)>,
}

pub use crate::change::ChangeKind;

/// A plugin's answer.
#[derive(Debug, Clone)]
pub struct PluginVerdict {
    /// Whether it decided `pass`.
    pub passed: bool,
    /// Its one line a person understands.
    pub summary: String,
    /// Its findings (at most `[wasm] max_findings`).
    pub findings: Vec<Finding>,
    /// What it wrote to stdout, within its output bound.
    pub stdout: Vec<u8>,
    /// What it wrote to stderr, within its output bound.
    pub stderr: Vec<u8>,
    /// What the evaluation used.
    pub usage: PluginUsage,
}

/// The output captured from a plugin whose evaluation failed.
#[derive(Debug, Clone, Default)]
pub struct CapturedOutput {
    /// What it wrote to stdout before it failed, within its output bound.
    pub stdout: Vec<u8>,
    /// What it wrote to stderr before it failed, within its output bound.
    pub stderr: Vec<u8>,
    /// What the evaluation used, when it got as far as a store (`None`
    /// when it failed before one was made).
    pub usage: Option<PluginUsage>,
}

/// What one evaluation used, beside the bounds it ran under: read from
/// the store once the call is over (nothing is measured on the way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginUsage {
    /// The bounds it ran under.
    pub bounds: PluginBounds,
    /// Wall-clock time from instantiation (or the call, for an instance
    /// made ahead) to the answer, judge calls included, as the time bound
    /// counts it.
    pub elapsed: std::time::Duration,
    /// Of `elapsed`, the time spent in judge calls.
    pub judge_time: std::time::Duration,
    /// Judge calls it made.
    pub judge_calls: u32,
    /// Fuel consumed (the whole bound when it ran out).
    pub fuel_used: u64,
    /// Bytes of linear memory and table entries held at the end, as the
    /// memory bound counts them: neither ever shrinks, so this is the peak.
    pub memory_bytes: u64,
}

/// One per host.
pub struct WasmHost {
    engine: Engine,
    linker: Linker<PluginState>,
    config: WasmConfig,
    loaded: Mutex<HashMap<String, Arc<LoadedPlugin>>>,
    /// Plugin files already read and hashed, by path, with the identity of
    /// the file then (device, inode, size, mtime, ctime): an unchanged file
    /// is not read and hashed again. Replacing or rewriting the file changes
    /// its identity (ctime cannot be set back), so the new bytes are read.
    by_path: Mutex<HashMap<std::path::PathBuf, (FileIdentity, Arc<LoadedPlugin>)>>,
    ticker_stop: Arc<std::sync::atomic::AtomicBool>,
    pooling: bool,
    /// One permit per pooled instance slot: an evaluation waits for a free
    /// slot instead of failing to instantiate when all are taken.
    slots: Arc<tokio::sync::Semaphore>,
    /// Named plugins already found in the plugin directories, with the
    /// canonical path of their file (for the "inside the workspace" check),
    /// so that a warm evaluation does no path walk. A name's file is looked
    /// up again when its identity changes or it is gone (`load_named`).
    named: Mutex<HashMap<String, NamedPlugin>>,
    /// Instances made ahead for the next evaluation of a plugin.
    spares: spare::Spares,
    /// The compiled-component cache, opened (and its key read) on first
    /// use; `None` when there is none or it cannot be used.
    cache: std::sync::OnceLock<Option<load::Cache>>,
}

impl Drop for WasmHost {
    fn drop(&mut self) {
        self.ticker_stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl WasmHost {
    /// The host for `config`: its wasmtime engine (with the pooling
    /// allocator when configured and available, else on-demand instances)
    /// and its epoch ticker. Fails only when no engine can be made.
    pub fn new(config: WasmConfig) -> Result<Self, PluginError> {
        let (engine, pooling) = match Self::build_engine(&config, config.pooling) {
            Ok(e) if !config.pooling => (e, false),
            Ok(e) => (e, true),
            Err(e) => {
                tracing::info!(error = %e, "pooling allocator unavailable; allocating instances on demand");
                let engine = Self::build_engine(&config, false)
                    .map_err(|e| PluginError::Engine(format!("{e:#}")))?;
                (engine, false)
            }
        };
        let mut linker: Linker<PluginState> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|e| PluginError::Engine(format!("{e:#}")))?;
        guarded_fs::shadow_filesystem(&mut linker)
            .map_err(|e| PluginError::Engine(format!("{e:#}")))?;
        bindings::GatePlugin::add_to_linker::<_, HasSelf<PluginState>>(&mut linker, |s| s)
            .map_err(|e| PluginError::Engine(format!("{e:#}")))?;
        let ticker_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let weak = engine.weak();
        let stop = ticker_stop.clone();
        std::thread::Builder::new()
            .name("gatehost-epoch".into())
            .spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(|e| PluginError::Engine(format!("cannot start the epoch ticker: {e}")))?;
        let spares = spare::Spares::new(config.spare_instances);
        Ok(WasmHost {
            engine,
            linker,
            config,
            loaded: Mutex::new(HashMap::new()),
            by_path: Mutex::new(HashMap::new()),
            ticker_stop,
            pooling,
            slots: Arc::new(tokio::sync::Semaphore::new(POOL_INSTANCES as usize)),
            named: Mutex::new(HashMap::new()),
            spares,
            cache: std::sync::OnceLock::new(),
        })
    }

    /// The engine: fuel, epochs, a 1 MiB wasm stack, and (where the
    /// address space allows) the pooling allocator, which makes a fresh
    /// instance per evaluation cheap by reusing memory slots and stacks.
    fn build_engine(config: &WasmConfig, pooling: bool) -> wasmtime::Result<Engine> {
        let mut c = Config::new();
        c.consume_fuel(true);
        c.epoch_interruption(true);
        c.max_wasm_stack(1024 * 1024);
        if pooling {
            let mut pool = PoolingAllocationConfig::new();
            pool.total_component_instances(POOL_INSTANCES)
                .total_core_instances(POOL_INSTANCES * 8)
                .total_memories(POOL_INSTANCES * 2)
                .total_tables(POOL_INSTANCES * 8)
                .total_stacks(POOL_INSTANCES)
                .max_core_instances_per_component(64)
                .max_memories_per_component(8)
                .max_tables_per_component(32)
                .table_elements(200_000)
                .max_memory_size(usize::try_from(config.maxima.memory_bytes).unwrap_or(usize::MAX))
                // Reset a reused slot by zeroing the pages an evaluation
                // dirtied (found with PAGEMAP_SCAN where the kernel has it)
                // instead of unmapping them: no madvise, no TLB shootdown,
                // no page faults on the next evaluation.
                .pagemap_scan(wasmtime::Enabled::Auto)
                .linear_memory_keep_resident(KEEP_RESIDENT)
                .table_keep_resident(KEEP_RESIDENT / 16)
                .decommit_batch_size(8);
            c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        Engine::new(&c)
    }

    /// The `[wasm]` configuration it was made with.
    pub fn config(&self) -> &WasmConfig {
        &self.config
    }

    /// "pooling" or "on-demand": how instances are allocated.
    pub fn allocation(&self) -> &'static str {
        if self.pooling { "pooling" } else { "on-demand" }
    }

    /// Loads (compiling, or reading from the on-disk cache) and checks a
    /// plugin file.
    pub fn load(&self, file: PluginFile) -> Result<Arc<LoadedPlugin>, PluginError> {
        if let Some(p) = self
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&file.digest)
        {
            return Ok(p.clone());
        }
        let component = self.compile(&file)?;
        let plugin = Arc::new(self.prepare(&file, &component)?);
        self.loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(file.digest, plugin.clone());
        Ok(plugin)
    }

    /// The compiled-component cache, if there is a usable one.
    fn cache(&self) -> Option<&load::Cache> {
        self.cache
            .get_or_init(|| {
                self.config
                    .cache_dir
                    .as_deref()
                    .and_then(load::Cache::open_reporting)
            })
            .as_ref()
    }

    /// Checks the header and compiles (or reads from the cache).
    fn compile(&self, file: &PluginFile) -> Result<Component, PluginError> {
        load::check_header(file)?;
        load::compile_with(&self.engine, self.cache(), file).map(|(component, _)| component)
    }

    /// The plugin whose SHA-256 is `digest`, from memory or from a cache
    /// entry, without its file's bytes; `None` when neither has it.
    fn load_known(
        &self,
        name: &str,
        digest: &str,
        size: u64,
    ) -> Result<Option<Arc<LoadedPlugin>>, PluginError> {
        if let Some(p) = self
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(digest)
        {
            return Ok(Some(p.clone()));
        }
        let Some(component) = self
            .cache()
            .and_then(|cache| load::cached_only(&self.engine, cache, digest))
        else {
            return Ok(None);
        };
        let plugin = Arc::new(self.prepare_parts(name, digest, size, &component)?);
        self.loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(digest.to_string(), plugin.clone());
        Ok(Some(plugin))
    }

    /// Refuses ungranted imports and a wrong world; pre-instantiates.
    fn prepare(
        &self,
        file: &PluginFile,
        component: &Component,
    ) -> Result<LoadedPlugin, PluginError> {
        self.prepare_parts(&file.name, &file.digest, file.bytes.len() as u64, component)
    }

    /// [`WasmHost::prepare`] for the plugin `name` whose file has `digest`
    /// and `size`.
    fn prepare_parts(
        &self,
        name: &str,
        digest: &str,
        size: u64,
        component: &Component,
    ) -> Result<LoadedPlugin, PluginError> {
        let uses = grants::check_imports(name, &self.engine, component)?;
        let wrong_world = |e: wasmtime::Error| PluginError::WrongWorld {
            plugin: name.to_string(),
            message: format!("{e:#}"),
        };
        let instance_pre = self
            .linker
            .instantiate_pre(component)
            .map_err(wrong_world)?;
        let pre = bindings::GatePluginPre::new(instance_pre).map_err(wrong_world)?;
        Ok(LoadedPlugin {
            name: name.to_string(),
            digest: digest.to_string(),
            size: usize::try_from(size).unwrap_or(usize::MAX),
            uses,
            pre,
        })
    }

    /// What `plugin inspect` shows: the component's imports and exports,
    /// and why it would be refused, if it would. Compiles once.
    pub fn inspect(&self, file: &PluginFile) -> Result<Inspection, PluginError> {
        let component = self.compile(file)?;
        let (imports, exports) = load::interface_of(&self.engine, &component);
        let problem = self.prepare(file, &component).err();
        Ok(Inspection {
            imports,
            exports,
            problem,
        })
    }
}
