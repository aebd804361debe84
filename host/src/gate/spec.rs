//! Gate objects: parsing and validating the JSON a gate file holds.
//!
//! The shapes are the agentproto policy engine's, so existing policies carry
//! over: shell `{"command", "args"?, "cwd"?, "timeoutMs"?, "env"?}`, judge
//! `{"judge": {"adapter", "model"?, "prompt", "timeoutMs"?, "nonce"?}}`.
//! Every gate may carry a `"name"` and the `"paths"` it needs. Unknown fields, wrong types, an empty
//! command and `timeoutMs: 0` are refused with an error naming the field,
//! before anything runs. This module never runs anything.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

pub const DEFAULT_SHELL_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_JUDGE_TIMEOUT: Duration = Duration::from_secs(120);
pub const DEFAULT_WASM_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest timeout a gate may ask for: one day.
pub const MAX_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SpecError {
    /// Where in the gate file, e.g. `[1].judge.timeoutMs` (empty: the file).
    pub field: String,
    pub message: String,
}

/// Extra environment for a shell gate: names passed through from the host,
/// or names with values.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum GateEnv {
    PassThrough(Vec<String>),
    Set(BTreeMap<String, String>),
}

impl Default for GateEnv {
    fn default() -> Self {
        GateEnv::PassThrough(Vec::new())
    }
}

/// A shell gate: an allowlisted program; exit 0 passes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ShellGate {
    #[serde(default)]
    pub name: Option<String>,
    /// A program in the host's allowlist (run by argv, never a shell, sandboxed).
    pub command: String,
    /// Its arguments (held to the allowlist entry's argument rules).
    #[serde(default)]
    pub args: Vec<String>,
    /// Workspace-relative working directory (default: the root).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Default 60000; at most one day.
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
    /// Variables to set (an object), or host variables to pass through (a
    /// list of names the host's `[shell] pass_env` lists).
    #[serde(default)]
    pub env: GateEnv,
    /// Workspace paths (files or directories) this gate needs: a policy
    /// gated on a snapshot checks out only the union of its gates' paths
    /// when every gate names some (a gate without `paths` needs everything).
    /// Repository-relative, no `..`, no `.git`.
    #[serde(default)]
    pub paths: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JudgeGate {
    /// A judge adapter the host configures (`claude`, `codex`, `gemini`, …).
    pub adapter: String,
    #[serde(default)]
    pub model: Option<String>,
    /// The rubric; the judge must end with `VERDICT: PASS` or `VERDICT: FAIL`.
    pub prompt: String,
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
    /// Opt-in: the verdict line must carry a per-run random code.
    #[serde(default)]
    pub nonce: bool,
}

/// The judge a WASM plugin's `judge` import uses.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginJudge {
    pub adapter: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub nonce: bool,
}

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
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub fuel: Option<u64>,
    #[serde(default, rename = "memoryMiB")]
    pub memory_mib: Option<u64>,
    #[serde(default)]
    pub max_output_bytes: Option<u64>,
    #[serde(default)]
    pub max_judge_calls: Option<u32>,
    #[serde(default)]
    pub judge: Option<PluginJudge>,
}

/// A WASM gate: `{"wasm": {…}}`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WasmWrapper {
    #[serde(default)]
    name: Option<String>,
    wasm: WasmGate,
    /// See [`ShellGate::paths`].
    #[serde(default)]
    paths: Option<Vec<String>>,
}

/// A judge gate: `{"judge": {…}}`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JudgeWrapper {
    #[serde(default)]
    name: Option<String>,
    judge: JudgeGate,
    /// See [`ShellGate::paths`].
    #[serde(default)]
    paths: Option<Vec<String>>,
}

/// One gate of any kind.
#[derive(Debug, Clone, PartialEq)]
pub enum GateSpec {
    Shell(ShellGate),
    Judge {
        name: Option<String>,
        judge: JudgeGate,
        /// See [`ShellGate::paths`].
        paths: Option<Vec<String>>,
    },
    Wasm {
        name: Option<String>,
        wasm: WasmGate,
        /// See [`ShellGate::paths`].
        paths: Option<Vec<String>>,
    },
}

impl GateSpec {
    /// A short label: `shell: cargo test`, `judge: claude (opus)`, or the
    /// gate's own `name`.
    pub fn label(&self) -> String {
        match self {
            GateSpec::Shell(s) => s.name.clone().unwrap_or_else(|| {
                let mut l = format!("shell: {}", s.command);
                for a in &s.args {
                    l.push(' ');
                    l.push_str(a);
                }
                truncate_label(l)
            }),
            GateSpec::Judge { name, judge, .. } => {
                name.clone().unwrap_or_else(|| match &judge.model {
                    Some(m) => format!("judge: {} ({m})", judge.adapter),
                    None => format!("judge: {}", judge.adapter),
                })
            }
            GateSpec::Wasm { name, wasm, .. } => name
                .clone()
                .unwrap_or_else(|| truncate_label(format!("wasm: {}", wasm.plugin))),
        }
    }

    /// The workspace paths the gate says it needs (`None`: everything).
    pub fn paths(&self) -> Option<&[String]> {
        match self {
            GateSpec::Shell(s) => s.paths.as_deref(),
            GateSpec::Judge { paths, .. } | GateSpec::Wasm { paths, .. } => paths.as_deref(),
        }
    }

    /// True when the gate starts host processes (a shell gate, a judge, or
    /// a plugin that may call a judge): those run in the sandbox.
    pub fn is_native(&self) -> bool {
        match self {
            GateSpec::Shell(_) | GateSpec::Judge { .. } => true,
            GateSpec::Wasm { wasm, .. } => wasm.judge.is_some(),
        }
    }

    /// Cost class for ordering a list of gates, cheapest first.
    pub fn cost_class(&self) -> u8 {
        match self {
            GateSpec::Shell(_) => 0,
            GateSpec::Wasm { .. } => 1,
            GateSpec::Judge { .. } => 2,
        }
    }

    pub fn timeout(&self) -> Duration {
        match self {
            GateSpec::Shell(s) => s
                .timeout_ms
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_SHELL_TIMEOUT),
            GateSpec::Judge { judge, .. } => judge
                .timeout_ms
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_JUDGE_TIMEOUT),
            GateSpec::Wasm { wasm, .. } => wasm
                .timeout_ms
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_WASM_TIMEOUT),
        }
    }
}

fn truncate_label(mut l: String) -> String {
    const MAX: usize = 80;
    if l.chars().count() > MAX {
        l = l.chars().take(MAX - 1).collect::<String>() + "…";
    }
    l
}

/// Parses a gate file: one gate object, or a list of them.
pub fn parse_gate_file(text: &str) -> Result<Vec<GateSpec>, SpecError> {
    let value: Value = serde_json::from_str(text).map_err(|e| SpecError {
        field: "gate file".into(),
        message: format!("not valid JSON: {e}"),
    })?;
    match value {
        Value::Array(items) => {
            if items.is_empty() {
                return Err(SpecError {
                    field: "gate file".into(),
                    message: "the list holds no gate".into(),
                });
            }
            items
                .into_iter()
                .enumerate()
                .map(|(i, v)| parse_gate(v, &format!("[{i}]")))
                .collect()
        }
        v => parse_gate(v, "").map(|g| vec![g]),
    }
}

/// Parses and validates one gate object; `at` prefixes field names.
pub fn parse_gate(value: Value, at: &str) -> Result<GateSpec, SpecError> {
    let Value::Object(map) = &value else {
        return Err(SpecError {
            field: if at.is_empty() {
                "gate".into()
            } else {
                at.to_string()
            },
            message: "a gate must be a JSON object".into(),
        });
    };
    let spec = if map.contains_key("judge") {
        let w: JudgeWrapper = deserialize(value, at)?;
        GateSpec::Judge {
            name: w.name,
            judge: w.judge,
            paths: w.paths,
        }
    } else if map.contains_key("wasm") {
        let w: WasmWrapper = deserialize(value, at)?;
        GateSpec::Wasm {
            name: w.name,
            wasm: w.wasm,
            paths: w.paths,
        }
    } else if map.contains_key("command") {
        GateSpec::Shell(deserialize(value, at)?)
    } else {
        let kinds = ["command", "judge", "wasm"];
        let misspelt = map
            .keys()
            .find_map(|k| crate::suggest::nearest(k, kinds).map(|near| (k, near)));
        let needs = "a gate needs \"command\" (a shell gate), \"judge\" (a judge gate) or \"wasm\" (a plugin)";
        return Err(match misspelt {
            Some((key, near)) => SpecError {
                field: join_field(at, key),
                message: format!("not a gate field (did you mean `{near}`?); {needs}"),
            },
            None => SpecError {
                field: if at.is_empty() {
                    "gate".into()
                } else {
                    at.to_string()
                },
                message: needs.into(),
            },
        });
    };
    validate(&spec, at)?;
    Ok(spec)
}

fn deserialize<T: serde::de::DeserializeOwned>(value: Value, at: &str) -> Result<T, SpecError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        SpecError {
            field: join_field(at, &path),
            message: crate::suggest::with_suggestion(&e.into_inner().to_string()),
        }
    })
}

fn join_field(at: &str, name: &str) -> String {
    match (at.is_empty(), name.is_empty()) {
        (true, true) => "gate".into(),
        (true, false) => name.to_string(),
        (false, true) => at.to_string(),
        (false, false) => format!("{at}.{name}"),
    }
}

fn validate(spec: &GateSpec, at: &str) -> Result<(), SpecError> {
    let err = |name: &str, message: &str| SpecError {
        field: join_field(at, name),
        message: message.to_string(),
    };
    let no_nul = |name: &str, s: &str| {
        if s.contains('\0') {
            Err(err(name, "must not contain a NUL byte"))
        } else {
            Ok(())
        }
    };
    let timeout = |name: &str, t: Option<u64>| match t {
        Some(0) => Err(err(name, "must be at least 1")),
        Some(ms) if ms > MAX_TIMEOUT_MS => Err(err(name, "must be at most 86400000 (one day)")),
        _ => Ok(()),
    };
    if let Some(paths) = spec.paths() {
        if paths.is_empty() {
            return Err(err("paths", "must name at least one path when given"));
        }
        for (i, p) in paths.iter().enumerate() {
            crate::commit::validate_commit_path(p)
                .map_err(|e| err(&format!("paths[{i}]"), &e.to_string()))?;
        }
    }
    match spec {
        GateSpec::Shell(s) => {
            if s.command.trim().is_empty() {
                return Err(err("command", "must not be empty"));
            }
            no_nul("command", &s.command)?;
            for (i, a) in s.args.iter().enumerate() {
                no_nul(&format!("args[{i}]"), a)?;
            }
            if let Some(cwd) = &s.cwd {
                no_nul("cwd", cwd)?;
            }
            timeout("timeoutMs", s.timeout_ms)?;
            let names: Vec<&String> = match &s.env {
                GateEnv::PassThrough(n) => n.iter().collect(),
                GateEnv::Set(m) => {
                    for (k, v) in m {
                        no_nul(&format!("env.{k}"), v)?;
                    }
                    m.keys().collect()
                }
            };
            for n in names {
                if n.is_empty() || n.contains('=') || n.contains('\0') {
                    return Err(err("env", &format!("'{n}' is not a valid variable name")));
                }
            }
        }
        GateSpec::Judge { judge, .. } => {
            if judge.adapter.trim().is_empty() {
                return Err(err("judge.adapter", "must not be empty"));
            }
            if judge.prompt.trim().is_empty() {
                return Err(err("judge.prompt", "must not be empty"));
            }
            if judge.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
                return Err(err("judge.model", "must not be empty when given"));
            }
            no_nul("judge.prompt", &judge.prompt)?;
            timeout("judge.timeoutMs", judge.timeout_ms)?;
        }
        GateSpec::Wasm { wasm, .. } => {
            if wasm.plugin.trim().is_empty() {
                return Err(err("wasm.plugin", "must not be empty"));
            }
            no_nul("wasm.plugin", &wasm.plugin)?;
            if let Some(d) = &wasm.sha256
                && (d.len() != 64 || !d.chars().all(|c| c.is_ascii_hexdigit()))
            {
                return Err(err("wasm.sha256", "must be 64 hexadecimal digits"));
            }
            timeout("wasm.timeoutMs", wasm.timeout_ms)?;
            for (name, v) in [
                ("wasm.fuel", wasm.fuel),
                ("wasm.memoryMiB", wasm.memory_mib),
                ("wasm.maxOutputBytes", wasm.max_output_bytes),
            ] {
                if v == Some(0) {
                    return Err(err(name, "must be at least 1"));
                }
            }
            if let Some(j) = &wasm.judge {
                if j.adapter.trim().is_empty() {
                    return Err(err("wasm.judge.adapter", "must not be empty"));
                }
                timeout("wasm.judge.timeoutMs", j.timeout_ms)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err_of(text: &str) -> SpecError {
        parse_gate_file(text).expect_err("must be refused")
    }

    /// `paths` on any kind of gate; an empty list, `..`, an absolute path
    /// and `.git` are refused, naming the entry.
    #[test]
    fn a_gate_may_name_the_paths_it_needs() {
        let g = parse_gate_file(
            r#"[{"command": "true", "paths": ["src/api", "Cargo.toml"]},
                {"judge": {"adapter": "a", "prompt": "p"}, "paths": ["docs"]},
                {"wasm": {"plugin": "p"}, "paths": ["src"]},
                {"command": "true"}]"#,
        )
        .unwrap();
        let paths: Vec<Option<&[String]>> = g.iter().map(GateSpec::paths).collect();
        assert_eq!(paths[0].unwrap(), ["src/api", "Cargo.toml"]);
        assert_eq!(paths[1].unwrap(), ["docs"]);
        assert_eq!(paths[2].unwrap(), ["src"]);
        assert_eq!(paths[3], None);
        for (bad, field) in [
            (r#"{"command": "true", "paths": []}"#, "paths"),
            (
                r#"{"command": "true", "paths": ["src", "../x"]}"#,
                "paths[1]",
            ),
            (r#"{"command": "true", "paths": ["/etc"]}"#, "paths[0]"),
            (
                r#"{"wasm": {"plugin": "p"}, "paths": [".git/config"]}"#,
                "paths[0]",
            ),
            (
                r#"[{"command": "true"}, {"judge": {"adapter": "a", "prompt": "p"}, "paths": [""]}]"#,
                "[1].paths[0]",
            ),
        ] {
            assert_eq!(err_of(bad).field, field, "{bad}");
        }
    }

    #[test]
    fn a_shell_gate_parses_with_defaults() {
        let g = parse_gate_file(r#"{"command": "cargo", "args": ["test"], "cwd": "sub"}"#).unwrap();
        let GateSpec::Shell(s) = &g[0] else {
            panic!("shell")
        };
        assert_eq!(s.command, "cargo");
        assert_eq!(s.args, vec!["test"]);
        assert_eq!(g[0].timeout(), Duration::from_secs(60));
        assert_eq!(g[0].label(), "shell: cargo test");
    }

    #[test]
    fn a_judge_gate_parses() {
        let g = parse_gate_file(
            r#"{"judge": {"adapter": "claude", "model": "opus", "prompt": "be strict", "timeoutMs": 5000, "nonce": true}}"#,
        )
        .unwrap();
        let GateSpec::Judge { judge, .. } = &g[0] else {
            panic!("judge")
        };
        assert!(judge.nonce);
        assert_eq!(g[0].timeout(), Duration::from_secs(5));
        assert_eq!(g[0].label(), "judge: claude (opus)");
    }

    #[test]
    fn a_list_parses_in_order() {
        let g =
            parse_gate_file(r#"[{"command": "true"}, {"judge": {"adapter": "a", "prompt": "p"}}]"#)
                .unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[1].cost_class(), 2);
    }

    #[test]
    fn unknown_fields_are_named() {
        let e = err_of(r#"{"command": "true", "timeout": 5}"#);
        assert!(e.message.contains("unknown field `timeout`"), "{e}");
        let e = err_of(
            r#"[{"command": "true"}, {"judge": {"adapter": "a", "prompt": "p", "temp": 1}}]"#,
        );
        assert!(e.field.starts_with("[1].judge"), "{e}");
        assert!(e.message.contains("temp"), "{e}");
    }

    #[test]
    fn misspelt_fields_get_the_nearest_name() {
        let e = err_of(r#"{"command": "true", "timeoutMS": 5}"#);
        assert!(e.message.ends_with("(did you mean `timeoutMs`?)"), "{e}");
        // No gate kind at all: the misspelt key is the field, and its
        // nearest kind is suggested.
        let e = err_of(r#"[{"command": "true"}, {"comand": "true"}]"#);
        assert_eq!(e.field, "[1].comand");
        assert!(
            e.message
                .starts_with("not a gate field (did you mean `command`?)"),
            "{e}"
        );
        let e = err_of(r#"{"name": "x"}"#);
        assert_eq!(e.field, "gate");
        assert!(!e.message.contains("did you mean"), "{e}");
    }

    #[test]
    fn wrong_types_name_the_field() {
        let e = err_of(r#"{"command": "true", "timeoutMs": "5"}"#);
        assert_eq!(e.field, "timeoutMs");
        let e = err_of(r#"{"command": "true", "args": [1]}"#);
        assert_eq!(e.field, "args[0]");
    }

    #[test]
    fn empty_command_and_zero_timeout_are_refused() {
        assert_eq!(err_of(r#"{"command": " "}"#).field, "command");
        let e = err_of(r#"{"command": "true", "timeoutMs": 0}"#);
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("timeoutMs", "must be at least 1")
        );
        let e = err_of(r#"{"judge": {"adapter": "a", "prompt": "p", "timeoutMs": 0}}"#);
        assert_eq!(e.field, "judge.timeoutMs");
        assert_eq!(
            err_of(r#"{"judge": {"adapter": "a", "prompt": ""}}"#).field,
            "judge.prompt"
        );
    }

    #[test]
    fn shapeless_input_is_refused() {
        assert!(err_of("[]").message.contains("no gate"));
        assert!(err_of("42").message.contains("JSON object"));
        assert!(err_of(r#"{"args": []}"#).message.contains("needs"));
        assert!(err_of("{nope").message.contains("not valid JSON"));
        assert!(
            err_of(r#"{"command": "true", "env": {"A=B": "x"}}"#)
                .message
                .contains("not a valid")
        );
    }

    #[test]
    fn env_takes_names_or_values() {
        let g = parse_gate_file(r#"{"command": "true", "env": ["CARGO_HOME"]}"#).unwrap();
        let GateSpec::Shell(s) = &g[0] else { panic!() };
        assert_eq!(s.env, GateEnv::PassThrough(vec!["CARGO_HOME".into()]));
        let g = parse_gate_file(r#"{"command": "true", "env": {"RUST_LOG": "debug"}}"#).unwrap();
        let GateSpec::Shell(s) = &g[0] else { panic!() };
        assert!(matches!(&s.env, GateEnv::Set(m) if m["RUST_LOG"] == "debug"));
    }
}
