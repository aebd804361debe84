//! Gate objects: parsing and validating the JSON a gate file holds, and
//! the registration of the gate kinds ([`Kind`]).
//!
//! The shapes are the agentproto policy engine's, so existing policies carry
//! over: shell `{"command", "args"?, "cwd"?, "timeoutMs"?, "env"?}`, judge
//! `{"judge": {"adapter", "model"?, "prompt", "timeoutMs"?, "nonce"?}}`,
//! plugin `{"wasm": {"plugin", …}}`.
//! Every gate may carry a `"name"` and the `"paths"` it needs. Unknown fields, wrong types, an empty
//! command and `timeoutMs: 0` are refused with an error naming the field,
//! before anything runs. Each kind's fields are its own file's (`shell`,
//! `judge`, `wasm`); this module never runs anything.

pub(crate) use super::judge::JudgeWrapper;
use super::kind::{Check, GateKind, join_field};
use super::shell::ShellObject;
use super::wasm::WasmWrapper;
use schemars::JsonSchema;
use serde_json::Value;
use std::time::Duration;

pub use super::judge::{DEFAULT_JUDGE_TIMEOUT, JudgeGate};
pub use super::kind::{MAX_TIMEOUT_MS, SpecError};
pub use super::shell::{DEFAULT_SHELL_TIMEOUT, GateEnv, ShellGate};
pub use super::wasm::{DEFAULT_WASM_TIMEOUT, PluginJudge, WasmGate};

/// One gate: its name, the workspace paths it needs, and what it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// The gate's own label, when its object names one.
    pub name: Option<String>,
    /// Workspace paths (files or directories) this gate needs: a policy
    /// gated on a snapshot checks out only the union of its gates' paths
    /// when every gate names some (a gate without `paths` needs
    /// everything). Repository-relative, no `..`, no `.git`.
    pub paths: Option<Vec<String>>,
    /// The kind of gate, with its own fields.
    pub kind: Kind,
}

/// The name this type had before gates were one struct over their kinds.
pub type GateSpec = Gate;

/// The registered gate kinds. A new kind is a file implementing
/// [`GateKind`] with its JSON shape, a variant here, its arm in
/// [`Kind::imp`], in [`GateObject`] and in [`parse_gate`].
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// Runs an allowlisted program; exit 0 passes.
    Shell(ShellGate),
    /// Asks an LLM CLI to judge the work against a rubric.
    Judge(JudgeGate),
    /// Runs a WASM plugin on the change.
    Wasm(WasmGate),
}

impl Kind {
    /// The kind's implementation: the one match every question goes
    /// through.
    pub fn imp(&self) -> &dyn GateKind {
        match self {
            Kind::Shell(k) => k,
            Kind::Judge(k) => k,
            Kind::Wasm(k) => k,
        }
    }
}

/// One gate object as JSON: a shell gate, `{"judge": …}` or `{"wasm": …}`.
/// Its schema is what `gatehost mcp` shows agents; [`parse_gate`] reads
/// each kind's shape by the key that marks it.
#[derive(JsonSchema)]
#[serde(untagged)]
pub(crate) enum GateObject {
    Shell(ShellObject),
    Judge(JudgeWrapper),
    Wasm(WasmWrapper),
}

impl From<GateObject> for Gate {
    fn from(object: GateObject) -> Gate {
        let (name, paths, kind) = match object {
            GateObject::Shell(o) => {
                let (name, paths, shell) = o.split();
                (name, paths, Kind::Shell(shell))
            }
            GateObject::Judge(w) => (w.name, w.paths, Kind::Judge(w.judge)),
            GateObject::Wasm(w) => (w.name, w.paths, Kind::Wasm(w.wasm)),
        };
        Gate { name, paths, kind }
    }
}

/// One gate object, or a list of them (run cheapest first).
// The JSON shape of `gate` in an attach, for its schema (`gatehost mcp`
// shows it to agents): [`parse_gate_file`] reads a file into it.
#[derive(JsonSchema)]
#[serde(untagged)]
pub(crate) enum GateSchema {
    One(Box<GateObject>),
    List(Vec<GateObject>),
}

impl GateSchema {
    fn into_gates(self) -> Vec<Gate> {
        match self {
            GateSchema::One(o) => vec![Gate::from(*o)],
            GateSchema::List(l) => l.into_iter().map(Gate::from).collect(),
        }
    }
}

impl Gate {
    /// The kind's implementation.
    pub fn imp(&self) -> &dyn GateKind {
        self.kind.imp()
    }

    /// A short label: `shell: cargo test`, `judge: claude (opus)`, or the
    /// gate's own `name`.
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.imp().label())
    }

    /// The workspace paths the gate says it needs (`None`: everything).
    pub fn paths(&self) -> Option<&[String]> {
        self.paths.as_deref()
    }

    /// True when the gate starts host processes (a shell gate, a judge, or
    /// a plugin that may call a judge): those run in the sandbox.
    pub fn is_native(&self) -> bool {
        self.imp().is_native()
    }

    /// Cost class for ordering a list of gates, cheapest first.
    pub fn cost_class(&self) -> u8 {
        self.imp().cost_class()
    }

    /// Its timeout: the one it sets, else its kind's default.
    pub fn timeout(&self) -> Duration {
        self.imp().timeout()
    }
}

/// Parses a gate file: one gate object, or a list of them.
pub fn parse_gate_file(text: &str) -> Result<Vec<Gate>, SpecError> {
    let value: Value = serde_json::from_str(text).map_err(|e| SpecError {
        field: "gate file".into(),
        message: format!("not valid JSON: {e}"),
    })?;
    let read = match value {
        Value::Array(items) => {
            if items.is_empty() {
                return Err(SpecError {
                    field: "gate file".into(),
                    message: "the list holds no gate".into(),
                });
            }
            GateSchema::List(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| parse_object(v, &format!("[{i}]")))
                    .collect::<Result<_, _>>()?,
            )
        }
        v => GateSchema::One(Box::new(parse_object(v, "")?)),
    };
    Ok(read.into_gates())
}

/// Parses and validates one gate object; `at` prefixes field names.
pub fn parse_gate(value: Value, at: &str) -> Result<Gate, SpecError> {
    parse_object(value, at).map(Gate::from)
}

fn parse_object(value: Value, at: &str) -> Result<GateObject, SpecError> {
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
    let object = if map.contains_key("judge") {
        GateObject::Judge(deserialize(value, at)?)
    } else if map.contains_key("wasm") {
        GateObject::Wasm(deserialize(value, at)?)
    } else if map.contains_key("command") {
        GateObject::Shell(deserialize(value, at)?)
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
    validate(&object, at)?;
    Ok(object)
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

/// The checks of every gate (its `paths`), then its kind's.
fn validate(object: &GateObject, at: &str) -> Result<(), SpecError> {
    let check = Check::new(at);
    let shell;
    let (paths, kind): (&Option<Vec<String>>, &dyn GateKind) = match object {
        GateObject::Shell(o) => {
            shell = o.kind();
            (&o.paths, &shell)
        }
        GateObject::Judge(w) => (&w.paths, &w.judge),
        GateObject::Wasm(w) => (&w.paths, &w.wasm),
    };
    if let Some(paths) = paths {
        if paths.is_empty() {
            return Err(check.err("paths", "must name at least one path when given"));
        }
        for (i, p) in paths.iter().enumerate() {
            crate::commit::validate_commit_path(p)
                .map_err(|e| check.err(&format!("paths[{i}]"), &e.to_string()))?;
        }
    }
    kind.validate(&check)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each registered kind answers for itself: shell first and blind to
    /// the change (a shell-only hook never opens the repository), plugins
    /// next and given the change as files, judges last.
    #[test]
    fn each_kind_is_its_own_implementation() {
        let g = parse_gate_file(
            r#"[{"judge": {"adapter": "a", "prompt": "p"}},
                {"wasm": {"plugin": "p"}},
                {"command": "true", "name": "t", "paths": ["src"]}]"#,
        )
        .unwrap();
        let facts: Vec<(u8, bool, bool, bool, Option<&str>)> = g
            .iter()
            .map(|g| {
                let k = g.imp();
                (
                    k.cost_class(),
                    k.sees_change(),
                    k.runs_plugin(),
                    k.is_native(),
                    k.allowlisted_command(),
                )
            })
            .collect();
        assert_eq!(
            facts,
            [
                (2, true, false, true, None),
                (1, true, true, false, None),
                (0, false, false, true, Some("true")),
            ]
        );
        assert!(matches!(g[0].kind, Kind::Judge(_)));
        assert!(matches!(g[1].kind, Kind::Wasm(_)));
        assert_eq!(g[2].name.as_deref(), Some("t"));
        assert_eq!(g[2].label(), "t");
        assert_eq!(g[2].imp().label(), "shell: true");
        assert_eq!(g[1].label(), "wasm: p");
        assert_eq!(g[1].timeout(), Duration::from_secs(5));
        let with_judge =
            parse_gate_file(r#"{"wasm": {"plugin": "p", "judge": {"adapter": "a"}}}"#).unwrap();
        assert!(with_judge[0].is_native(), "a plugin that may call a judge");
    }

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
        let paths: Vec<Option<&[String]>> = g.iter().map(Gate::paths).collect();
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
        let Kind::Shell(s) = &g[0].kind else {
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
        let Kind::Judge(judge) = &g[0].kind else {
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
        let Kind::Shell(s) = &g[0].kind else { panic!() };
        assert_eq!(s.env, GateEnv::PassThrough(vec!["CARGO_HOME".into()]));
        let g = parse_gate_file(r#"{"command": "true", "env": {"RUST_LOG": "debug"}}"#).unwrap();
        let Kind::Shell(s) = &g[0].kind else { panic!() };
        assert!(matches!(&s.env, GateEnv::Set(m) if m["RUST_LOG"] == "debug"));
    }
}
