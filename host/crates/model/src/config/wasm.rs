//! The `[wasm]` section: where plugins are found and cached, the
//! allocator, and the bounds a WASM gate gets by default and may ask for
//! at most (wall clock, fuel, memory, output, judge calls). It owns
//! reading and checking those numbers; it must never apply them (the WASM
//! host does).

use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WasmSection {
    #[serde(default)]
    plugin_dirs: Vec<String>,
    pooling: Option<bool>,
    spare_instances: Option<usize>,
    cache_dir: Option<String>,
    default_timeout_ms: Option<u64>,
    max_timeout_ms: Option<u64>,
    default_fuel: Option<u64>,
    max_fuel: Option<u64>,
    default_memory_mib: Option<u64>,
    max_memory_mib: Option<u64>,
    default_output_bytes: Option<u64>,
    max_output_bytes: Option<u64>,
    default_judge_calls: Option<u32>,
    max_judge_calls: Option<u32>,
    max_findings: Option<usize>,
    max_plugin_bytes: Option<u64>,
}

/// Bounds on one plugin evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PluginBounds {
    /// Wall-clock time one evaluation may take.
    pub timeout: Duration,
    /// Instructions (wasmtime fuel units).
    pub fuel: u64,
    /// Summed over all the plugin's linear memories.
    pub memory_bytes: u64,
    /// Per stream (stdout, stderr), and for the returned verdict.
    pub output_bytes: u64,
    /// Judge calls one evaluation may make.
    pub judge_calls: u32,
}

/// Where plugins come from and how far they may go.
#[derive(Debug, Clone)]
pub struct WasmConfig {
    /// Directories searched for `<name>.wasm` when a gate names a plugin.
    pub plugin_dirs: Vec<PathBuf>,
    /// Compiled components are cached here (never inside a workspace).
    pub cache_dir: Option<PathBuf>,
    /// Use wasmtime's pooling allocator (reserves address space up front;
    /// turn off where virtual memory is constrained).
    pub pooling: bool,
    /// How many plugin instances may be kept made ahead of their next
    /// evaluation (one per plugin, each holding a pool slot); 0 turns
    /// this off.
    pub spare_instances: usize,
    /// What a gate gets when it does not ask.
    pub defaults: PluginBounds,
    /// The most a gate may ask for.
    pub maxima: PluginBounds,
    /// The most findings one verdict may carry (more is an `error`).
    pub max_findings: usize,
    /// The largest plugin file read (a larger one is refused unread).
    pub max_plugin_bytes: u64,
}

impl Default for WasmConfig {
    fn default() -> Self {
        const MIB: u64 = 1024 * 1024;
        WasmConfig {
            plugin_dirs: Vec::new(),
            cache_dir: dirs::cache_dir().map(|d| d.join("gatehost").join("components")),
            pooling: true,
            spare_instances: 8,
            defaults: PluginBounds {
                timeout: Duration::from_secs(5),
                fuel: 5_000_000_000,
                memory_bytes: 128 * MIB,
                output_bytes: 64 * 1024,
                judge_calls: 4,
            },
            maxima: PluginBounds {
                timeout: Duration::from_secs(300),
                fuel: 500_000_000_000,
                memory_bytes: 2048 * MIB,
                output_bytes: 16 * MIB,
                judge_calls: 32,
            },
            max_findings: 1000,
            max_plugin_bytes: 64 * MIB,
        }
    }
}

impl WasmSection {
    /// Sets what the section gives on `config`; the key and why when a
    /// value is refused.
    pub(super) fn apply(self, config: &mut WasmConfig) -> Result<(), (&'static str, String)> {
        let w = self;
        config.plugin_dirs = w.plugin_dirs.iter().map(PathBuf::from).collect();
        if let Some(dir) = w.cache_dir {
            config.cache_dir = Some(PathBuf::from(dir));
        }
        if let Some(p) = w.pooling {
            config.pooling = p;
        }
        if let Some(n) = w.spare_instances {
            config.spare_instances = n;
        }
        if let Some(n) = w.max_findings {
            config.max_findings = n;
        }
        if let Some(n) = w.max_plugin_bytes {
            config.max_plugin_bytes = n;
        }
        let (d, m) = (&mut config.defaults, &mut config.maxima);
        const MIB: u64 = 1024 * 1024;
        let ms = Duration::from_millis;
        if let Some(v) = w.default_timeout_ms {
            d.timeout = ms(v);
        }
        if let Some(v) = w.max_timeout_ms {
            m.timeout = ms(v);
        }
        if let Some(v) = w.default_fuel {
            d.fuel = v;
        }
        if let Some(v) = w.max_fuel {
            m.fuel = v;
        }
        if let Some(v) = w.default_memory_mib {
            d.memory_bytes = v.saturating_mul(MIB);
        }
        if let Some(v) = w.max_memory_mib {
            m.memory_bytes = v.saturating_mul(MIB);
        }
        if let Some(v) = w.default_output_bytes {
            d.output_bytes = v;
        }
        if let Some(v) = w.max_output_bytes {
            m.output_bytes = v;
        }
        if let Some(v) = w.default_judge_calls {
            d.judge_calls = v;
        }
        if let Some(v) = w.max_judge_calls {
            m.judge_calls = v;
        }
        for (key, zero) in [
            ("wasm.default_timeout_ms", d.timeout.is_zero()),
            ("wasm.default_fuel", d.fuel == 0),
            ("wasm.default_memory_mib", d.memory_bytes == 0),
            ("wasm.default_output_bytes", d.output_bytes == 0),
        ] {
            if zero {
                return Err((key, "must be at least 1".into()));
            }
        }
        for (key, over) in [
            ("wasm.default_timeout_ms", d.timeout > m.timeout),
            ("wasm.default_fuel", d.fuel > m.fuel),
            ("wasm.default_memory_mib", d.memory_bytes > m.memory_bytes),
            ("wasm.default_output_bytes", d.output_bytes > m.output_bytes),
            ("wasm.default_judge_calls", d.judge_calls > m.judge_calls),
        ] {
            if over {
                return Err((key, "must not exceed its max_ counterpart".into()));
            }
        }
        Ok(())
    }
}
