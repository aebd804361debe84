//! The WASM gate host: runs third-party gate plugins (WASI components built
//! against `wit/v0.1`) in wasmtime, confined and bounded.
//!
//! Owns one engine per host (with an epoch ticker), the on-disk cache of
//! compiled components, and an `InstancePre` per plugin. Every evaluation
//! gets a fresh store, which is dropped afterwards: a store that trapped is
//! never reused. Grants: the workspace preopened read-only at `/workspace`,
//! captured stdout/stderr, the `gatehost:gate/host` imports; nothing else
//! (no environment, arguments, network or inherited stdio). Bounds: wall
//! clock (epochs), instructions (fuel), memory summed over all memories,
//! output, and judge calls; each has its own typed error.
//!
//! It must never let a plugin's failure become a pass, and never let one
//! plugin's trap affect another evaluation.

mod load;
mod state;

pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/v0.1",
        world: "gate-plugin",
        imports: { default: async | trappable },
        exports: { default: async },
    });
}

pub use load::PluginFile;
pub use state::JudgeBridge;

use crate::config::{PluginBounds, WasmConfig};
use crate::verdict::{Finding, Severity};
use bindings::gatehost::gate::types as wit;
use state::{BoundHit, MemoryBudget, PluginState};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap,
    UpdateDeadline,
};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

/// Evaluations that can be in flight at once with the pooling allocator.
const POOL_INSTANCES: u32 = 64;

/// Epoch tick: the wall-clock bound's resolution.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Why a plugin could not give a verdict. Each is an `error` outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    #[error("plugin '{plugin}' cannot be read: {message}")]
    Unreadable { plugin: String, message: String },
    #[error("plugin '{plugin}' was not found in the plugin directories ({dirs})")]
    NotFound { plugin: String, dirs: String },
    #[error("plugin '{plugin}': sha256 is {actual}, the gate pins {expected}")]
    DigestMismatch {
        plugin: String,
        expected: String,
        actual: String,
    },
    #[error(
        "plugin '{plugin}' lies inside the workspace, where the agent can swap it; pin it with \"sha256\""
    )]
    UnpinnedInWorkspace { plugin: String },
    #[error("plugin '{plugin}' is not a WebAssembly component: {message}")]
    NotAComponent { plugin: String, message: String },
    #[error("plugin '{plugin}' is not a valid component: {message}")]
    Invalid { plugin: String, message: String },
    #[error("plugin '{plugin}' imports {import}, which gatehost does not grant")]
    ForbiddenImport { plugin: String, import: String },
    #[error("plugin '{plugin}' does not target the gatehost:gate@0.1 gate-plugin world: {message}")]
    WrongWorld { plugin: String, message: String },
    #[error("plugin '{plugin}': {bound} {asked} exceeds the host's maximum of {max}")]
    OverMaximum {
        plugin: String,
        bound: &'static str,
        asked: u64,
        max: u64,
    },
    #[error("plugin '{plugin}' timed out after {after}")]
    Timeout { plugin: String, after: String },
    #[error("plugin '{plugin}' ran out of fuel (its budget is {fuel} instructions)")]
    OutOfFuel { plugin: String, fuel: u64 },
    #[error("plugin '{plugin}' exceeded its memory limit of {mib} MiB")]
    Memory { plugin: String, mib: u64 },
    #[error("plugin '{plugin}' exceeded its output limit of {bytes} bytes")]
    Output { plugin: String, bytes: u64 },
    #[error("plugin '{plugin}' exceeded its limit of {calls} judge call(s) per evaluation")]
    JudgeCalls { plugin: String, calls: u32 },
    #[error("plugin '{plugin}' trapped: {message}")]
    Trap { plugin: String, message: String },
    #[error("plugin '{plugin}' reported an error: {message}")]
    Reported { plugin: String, message: String },
    #[error("the WASM engine cannot start: {0}")]
    Engine(String),
}

/// A compiled plugin, ready to instantiate.
pub struct LoadedPlugin {
    pub name: String,
    pub digest: String,
    pub size: usize,
    pre: bindings::GatePluginPre<PluginState>,
}

/// What an evaluation is given.
pub struct Evaluation {
    pub context: PluginContext,
    pub bounds: PluginBounds,
    pub workspace_root: std::path::PathBuf,
    pub diffs: Arc<BTreeMap<String, String>>,
    pub judge: JudgeBridge,
}

/// The context record handed to `evaluate`.
#[derive(Debug, Clone, Default)]
pub struct PluginContext {
    pub session_id: Option<String>,
    pub policy_id: Option<String>,
    pub config: Vec<(String, String)>,
    pub config_json: String,
    pub last_message: Option<String>,
    /// Workspace-relative paths and how they changed.
    pub changed_files: Vec<(String, ChangeKind)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
    Renamed,
}

/// A plugin's answer.
#[derive(Debug, Clone)]
pub struct PluginVerdict {
    pub passed: bool,
    pub summary: String,
    pub findings: Vec<Finding>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub fuel_used: u64,
}

/// The output captured from a plugin whose evaluation failed.
#[derive(Debug, Clone, Default)]
pub struct CapturedOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
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
}

impl Drop for WasmHost {
    fn drop(&mut self) {
        self.ticker_stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl WasmHost {
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
        Ok(WasmHost {
            engine,
            linker,
            config,
            loaded: Mutex::new(HashMap::new()),
            by_path: Mutex::new(HashMap::new()),
            ticker_stop,
            pooling,
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
                .max_memory_size(usize::try_from(config.maxima.memory_bytes).unwrap_or(usize::MAX));
            c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        Engine::new(&c)
    }

    pub fn config(&self) -> &WasmConfig {
        &self.config
    }

    /// "pooling" or "on-demand": how instances are allocated.
    pub fn allocation(&self) -> &'static str {
        if self.pooling { "pooling" } else { "on-demand" }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Loads (compiling or reading from the cache) and checks a plugin
    /// file. Returns the loaded plugin and whether it came from a cache.
    pub fn load(&self, file: PluginFile) -> Result<(Arc<LoadedPlugin>, bool), PluginError> {
        if let Some(p) = self
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&file.digest)
        {
            return Ok((p.clone(), true));
        }
        load::check_header(&file)?;
        let (component, from_disk) =
            load::compile_cached(&self.engine, self.config.cache_dir.as_deref(), &file)?;
        load::check_imports(&file, &self.engine, &component)?;
        let wrong_world = |e: wasmtime::Error| PluginError::WrongWorld {
            plugin: file.name.clone(),
            message: format!("{e:#}"),
        };
        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(wrong_world)?;
        let pre = bindings::GatePluginPre::new(instance_pre).map_err(wrong_world)?;
        let plugin = Arc::new(LoadedPlugin {
            name: file.name.clone(),
            digest: file.digest.clone(),
            size: file.bytes.len(),
            pre,
        });
        self.loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(file.digest, plugin.clone());
        Ok((plugin, from_disk))
    }

    /// Loads the plugin at `path`, checking its digest against `pinned`
    /// when given. An unchanged file (same identity as when it was last
    /// read) is served from memory without reading or hashing it again.
    pub fn load_path(
        &self,
        name: &str,
        path: &std::path::Path,
        pinned: Option<&str>,
    ) -> Result<Arc<LoadedPlugin>, PluginError> {
        let identity = FileIdentity::of(path);
        let known = identity.and_then(|id| {
            let by_path = self.by_path.lock().unwrap_or_else(|p| p.into_inner());
            by_path
                .get(path)
                .filter(|(cached, _)| *cached == id)
                .map(|(_, p)| p.clone())
        });
        let plugin = match known {
            Some(p) => p,
            None => {
                let file = PluginFile::read(name, path)?;
                check_pin(name, pinned, &file.digest)?;
                let (plugin, _) = self.load(file)?;
                // Record the identity seen *before* reading: if the file
                // changed meanwhile, the next run reads it again.
                if let Some(id) = identity {
                    self.by_path
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(path.to_path_buf(), (id, plugin.clone()));
                }
                return Ok(plugin);
            }
        };
        check_pin(name, pinned, &plugin.digest)?;
        Ok(plugin)
    }

    /// Imports and exports of a component file (for `plugin inspect`).
    pub fn interface(&self, file: &PluginFile) -> Result<(Vec<String>, Vec<String>), PluginError> {
        load::check_header(file)?;
        let (component, _) =
            load::compile_cached(&self.engine, self.config.cache_dir.as_deref(), file)?;
        Ok(load::interface_of(&self.engine, &component))
    }

    /// Runs one evaluation in a fresh store.
    pub async fn evaluate(
        &self,
        plugin: &LoadedPlugin,
        eval: Evaluation,
    ) -> Result<PluginVerdict, (PluginError, CapturedOutput)> {
        let name = plugin.name.clone();
        let bounds = eval.bounds;
        let fail = |e: PluginError| (e, CapturedOutput::default());
        let out_cap = usize::try_from(bounds.output_bytes).unwrap_or(usize::MAX);
        let stdout = MemoryOutputPipe::new(out_cap);
        let stderr = MemoryOutputPipe::new(out_cap);
        let mut builder = WasiCtxBuilder::new();
        // File reads are short and local: do them on the evaluating thread
        // instead of a round trip through the blocking pool per call.
        builder
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_blocking_current_thread(true);
        builder
            .preopened_dir(&eval.workspace_root, "/workspace", FsPerms::ReadOnly)
            .map_err(|e| {
                fail(PluginError::Engine(format!(
                    "cannot preopen the workspace {}: {e:#}",
                    eval.workspace_root.display()
                )))
            })?;
        let state = PluginState {
            plugin: name.clone(),
            wasi: builder.build(),
            table: ResourceTable::new(),
            limiter: MemoryBudget {
                max_bytes: bounds.memory_bytes,
                used_bytes: 0,
                exceeded: false,
            },
            diffs: eval.diffs,
            judge: eval.judge,
            judge_calls: 0,
            bound_hit: None,
            logs: Vec::new(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store
            .set_fuel(bounds.fuel)
            .map_err(|e| fail(PluginError::Engine(format!("{e:#}"))))?;
        // Every epoch tick the guest yields to the executor (so that a
        // looping plugin never holds up other tasks on its thread), until
        // the wall-clock deadline, where it is interrupted.
        let deadline = Instant::now() + bounds.timeout;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            Ok(if Instant::now() >= deadline {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Yield(1)
            })
        });

        let ctx = to_wit_context(&eval.context);
        let started = Instant::now();
        // Epochs stop guest code; host calls (the judge) bound themselves.
        // This outer timeout is a backstop for anything else.
        let backstop = bounds.timeout + Duration::from_secs(2) + eval_judge_budget(&store);
        let result = tokio::time::timeout(backstop, async {
            let instance = plugin.pre.instantiate_async(&mut store).await?;
            instance.call_evaluate(&mut store, &ctx).await
        })
        .await;
        let captured = CapturedOutput {
            stdout: stdout.contents().to_vec(),
            stderr: stderr.contents().to_vec(),
        };
        let fuel_used = bounds.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        let state = store.data();
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
                let size = verdict.summary.len()
                    + verdict
                        .findings
                        .iter()
                        .map(|f| f.message.len() + f.path.as_ref().map_or(0, String::len))
                        .sum::<usize>();
                if size as u64 > bounds.output_bytes {
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
        match outcome {
            Ok(mut v) => {
                v.stdout = captured.stdout;
                v.stderr = captured.stderr;
                Ok(v)
            }
            Err(e) => Err((e, captured)),
        }
    }

    /// Where a named plugin's file is: `<dir>/<name>.wasm` in the first
    /// plugin directory that has it.
    pub fn find_named(&self, name: &str) -> Result<std::path::PathBuf, PluginError> {
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if valid {
            for dir in &self.config.plugin_dirs {
                for file in [
                    format!("{name}.wasm"),
                    format!("{}.wasm", name.replace('-', "_")),
                ] {
                    let p = dir.join(file);
                    if p.is_file() {
                        return Ok(p);
                    }
                }
            }
        }
        Err(PluginError::NotFound {
            plugin: name.to_string(),
            dirs: if self.config.plugin_dirs.is_empty() {
                "none configured: set [wasm] plugin_dirs".to_string()
            } else {
                self.config
                    .plugin_dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        })
    }
}

fn check_pin(name: &str, pinned: Option<&str>, digest: &str) -> Result<(), PluginError> {
    match pinned {
        Some(expected) if !expected.eq_ignore_ascii_case(digest) => {
            Err(PluginError::DigestMismatch {
                plugin: name.to_string(),
                expected: expected.to_ascii_lowercase(),
                actual: digest.to_string(),
            })
        }
        _ => Ok(()),
    }
}

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl FileIdentity {
    fn of(path: &std::path::Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(FileIdentity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            ctime_ns: m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128,
        })
    }
}

/// Extra backstop time for judge calls: each is bounded by its own timeout.
fn eval_judge_budget(store: &Store<PluginState>) -> Duration {
    let j = &store.data().judge;
    (j.timeout + Duration::from_secs(3)).saturating_mul(j.max_calls)
}

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
