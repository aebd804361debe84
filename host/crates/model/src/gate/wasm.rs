//! The WASM gate's shape: a plugin (a name or a pinned path), its
//! configuration, its bounds and the judge it may call, as a gate file
//! writes it, and its checks. Loading and running it is the runner's
//! (gatehost's `gate::wasm`, over the WASM host).

use super::kind::truncate_label;
use super::kind::{Check, GateKind, MAX_TIMEOUT_MS, SpecError};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// The timeout of a gate of this kind that sets none.
pub const DEFAULT_WASM_TIMEOUT: Duration = Duration::from_secs(5);

/// The judge a WASM plugin's `judge` import uses.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginJudge {
    /// A judge adapter the host configures (`claude`, `codex`, `gemini`, …).
    pub adapter: String,
    /// The model the adapter is asked for (default: the adapter's
    /// `default_model`).
    #[serde(default)]
    pub model: Option<String>,
    /// Each judge call's timeout in ms (at most one day).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
    /// Opt-in: the verdict line must carry a per-run random code.
    #[serde(default)]
    pub nonce: bool,
}

/// A WASM gate: a plugin, its configuration and its bounds.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WasmGate {
    /// A plugin name (found in the host's plugin directories) or a path
    /// (absolute, or relative to the workspace).
    pub plugin: String,
    /// The plugin file's sha256, hex. Required for a file inside the workspace.
    #[serde(default)]
    pub sha256: Option<String>,
    /// The plugin's own configuration (a JSON object).
    #[serde(default)]
    pub config: Option<serde_json::Map<String, serde_json::Value>>,
    /// The evaluation's timeout in ms (default: `[wasm] default_timeout_ms`;
    /// past `max_timeout_ms` the gate is refused).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
    /// Instructions the evaluation may run, in wasmtime fuel (default:
    /// `[wasm] default_fuel`; at most `max_fuel`).
    #[serde(default)]
    pub fuel: Option<u64>,
    /// Linear memory summed over the plugin's memories, in MiB (default:
    /// `[wasm] default_memory_mib`; at most `max_memory_mib`).
    #[serde(default, rename = "memoryMiB")]
    pub memory_mib: Option<u64>,
    /// Bytes per output stream and for the returned verdict (default:
    /// `[wasm] default_output_bytes`; at most `max_output_bytes`).
    #[serde(default)]
    pub max_output_bytes: Option<u64>,
    /// Judge calls one evaluation may make (default: `[wasm]
    /// default_judge_calls`; at most `max_judge_calls`).
    #[serde(default)]
    pub max_judge_calls: Option<u32>,
    /// The judge the plugin's `judge` import uses.
    #[serde(default)]
    pub judge: Option<PluginJudge>,
}

/// A WASM gate object: `{"wasm": {…}}`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WasmWrapper {
    #[serde(default)]
    pub name: Option<String>,
    pub wasm: WasmGate,
    /// The workspace paths the gate needs (see `Gate::paths`).
    #[serde(default)]
    pub paths: Option<Vec<String>>,
}

impl GateKind for WasmGate {
    fn label(&self) -> String {
        truncate_label(format!("wasm: {}", self.plugin))
    }

    fn cost_class(&self) -> u8 {
        1
    }

    fn timeout(&self) -> Duration {
        self.timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_WASM_TIMEOUT)
    }

    /// A plugin runs in process, unless it may call a judge.
    fn is_native(&self) -> bool {
        self.judge.is_some()
    }

    fn sees_change(&self) -> bool {
        true
    }

    fn runs_plugin(&self) -> bool {
        true
    }

    fn validate(&self, check: &Check<'_>) -> Result<(), SpecError> {
        check.not_blank("wasm.plugin", &self.plugin)?;
        check.no_nul("wasm.plugin", &self.plugin)?;
        if let Some(d) = &self.sha256
            && (d.len() != 64 || !d.chars().all(|c| c.is_ascii_hexdigit()))
        {
            return Err(check.err("wasm.sha256", "must be 64 hexadecimal digits"));
        }
        check.timeout("wasm.timeoutMs", self.timeout_ms)?;
        for (name, v) in [
            ("wasm.fuel", self.fuel),
            ("wasm.memoryMiB", self.memory_mib),
            ("wasm.maxOutputBytes", self.max_output_bytes),
        ] {
            if v == Some(0) {
                return Err(check.err(name, "must be at least 1"));
            }
        }
        if let Some(j) = &self.judge {
            check.not_blank("wasm.judge.adapter", &j.adapter)?;
            check.timeout("wasm.judge.timeoutMs", j.timeout_ms)?;
        }
        Ok(())
    }
}
