//! Merging exactly gatehost's entries into an agent CLI's own configuration
//! text, and taking exactly them out again: hooks (Claude Code, Codex and
//! Gemini CLI group them as `hooks.<Event>[] = {matcher?, hooks: [...]}`;
//! Cursor lists them flat as `hooks.<event>[] = {command}`) and MCP servers
//! (`mcpServers.<name>`); and gatehost's own OpenCode plugin file
//! ([`opencode_plugin`]).
//!
//! It owns the edit: comments, key order and formatting of everything else
//! are kept (a concrete syntax tree, `jsonc-parser`), an entry already as
//! wanted is left alone (a second install changes no byte), an older
//! gatehost entry is replaced, another program's entry is never touched.
//! It must never read or write a file: the caller owns paths, backups and
//! atomic writes.

mod codex;
mod opencode;

pub use codex::{codex_config_mcp, codex_config_trust, codex_trust};
pub use opencode::{
    PLUGIN_ASSET, PLUGIN_FILE, is_gatehost_plugin, opencode_plugin, plugin_command,
};

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstArray, CstInputValue, CstNode, CstObject, CstRootNode};
use serde_json::Value;

/// Why `hook install` cannot merge its entries into a CLI's configuration
/// file; the file is then left as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstallError {
    /// The file does not parse as JSON with comments: the parser's message.
    #[error("not JSON (or JSON with comments) gatehost can edit: {0}")]
    Parse(String),
    /// The named value (the top level, `hooks`) holds something other
    /// than an object.
    #[error("'{0}' is not an object; edit it by hand, or move the file aside")]
    NotObject(String),
    /// The named event's hooks are something other than a list.
    #[error("'{0}' is not a list; edit it by hand, or move the file aside")]
    NotArray(String),
}

/// How a CLI's configuration lists hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `hooks.<Event>[] = {hooks: [{type: "command", command, timeout…}]}`.
    Grouped,
    /// `version: 1`, `hooks.<event>[] = {command, …}` (Cursor).
    Flat,
    /// `hooks.<event>[] = {command, …}` and no version key: a Kiro CLI
    /// agent configuration, whose schema has none.
    Bare,
}

/// The hooks to install: for each event, the hook object gatehost wants.
#[derive(Debug, Clone, PartialEq)]
pub struct HookSet {
    /// How the CLI's file lists them.
    pub layout: Layout,
    /// `(event name as the CLI spells it, gatehost's hook object)`, in the
    /// order they are written.
    pub entries: Vec<(String, Value)>,
}

/// True when `command` runs `gatehost hook …`: an entry gatehost owns.
pub fn is_gatehost_hook(command: &str) -> bool {
    let Some(words) = shlex::split(command) else {
        return false;
    };
    let program = words.first().map(|w| {
        std::path::Path::new(w)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    program.as_deref() == Some("gatehost") && words.get(1).map(String::as_str) == Some("hook")
}

fn parse(text: &str) -> Result<CstRootNode, InstallError> {
    let text = if text.trim().is_empty() { "{}\n" } else { text };
    CstRootNode::parse(text, &ParseOptions::default())
        .map_err(|e| InstallError::Parse(e.to_string()))
}

fn root_object(root: &CstRootNode) -> Result<CstObject, InstallError> {
    match root.value() {
        None => Ok(root.object_value_or_set()),
        Some(v) => v
            .as_object()
            .ok_or_else(|| InstallError::NotObject("the top level".into())),
    }
}

fn child_object(parent: &CstObject, name: &str) -> Result<CstObject, InstallError> {
    match parent.get(name).and_then(|p| p.value()) {
        None => Ok(parent.object_value_or_set(name)),
        Some(v) => v
            .as_object()
            .ok_or_else(|| InstallError::NotObject(name.into())),
    }
}

fn child_array(parent: &CstObject, name: &str, shown: &str) -> Result<CstArray, InstallError> {
    match parent.get(name).and_then(|p| p.value()) {
        None => Ok(parent.array_value_or_set(name)),
        Some(v) => v
            .as_array()
            .ok_or_else(|| InstallError::NotArray(shown.into())),
    }
}

/// Converts JSON to the syntax tree's input (keys in the value's order).
fn input(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(input).collect()),
        Value::Object(o) => {
            CstInputValue::Object(o.iter().map(|(k, v)| (k.clone(), input(v))).collect())
        }
    }
}

fn command_of(v: &Value) -> Option<&str> {
    v.get("command").and_then(Value::as_str)
}

/// The group an event's list holds for gatehost (Grouped layout).
fn group(hook: &Value) -> Value {
    serde_json::json!({ "hooks": [hook] })
}

/// gatehost's hooks in `text`, as `(event, command)` in file order (an
/// event registered twice appears twice). Reads only: nothing is edited.
pub fn gatehost_hooks(text: &str, layout: Layout) -> Result<Vec<(String, String)>, InstallError> {
    let root = parse(text)?;
    let value = root.to_serde_value().unwrap_or(Value::Null);
    let Some(hooks) = value.get("hooks").and_then(Value::as_object) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (event, list) in hooks {
        for entry in list.as_array().into_iter().flatten() {
            let commands: Vec<&Value> = match layout {
                Layout::Flat | Layout::Bare => vec![entry],
                Layout::Grouped => entry
                    .get("hooks")
                    .and_then(Value::as_array)
                    .map(|hs| hs.iter().collect())
                    .unwrap_or_default(),
            };
            out.extend(
                commands
                    .into_iter()
                    .filter_map(command_of)
                    .filter(|c| is_gatehost_hook(c))
                    .map(|c| (event.clone(), c.to_string())),
            );
        }
    }
    Ok(out)
}

/// `text` with gatehost's hooks as `set` wants them.
pub fn add_hooks(text: &str, set: &HookSet) -> Result<String, InstallError> {
    let root = parse(text)?;
    let top = root_object(&root)?;
    if set.layout == Layout::Flat && top.get("version").is_none() {
        top.insert(0, "version", CstInputValue::Number("1".into()));
    }
    let hooks = child_object(&top, "hooks")?;
    for (event, hook) in &set.entries {
        let list = child_array(&hooks, event, &format!("hooks.{event}"))?;
        let wanted = match set.layout {
            Layout::Grouped => group(hook),
            Layout::Flat | Layout::Bare => hook.clone(),
        };
        let mut present = false;
        for element in list.elements() {
            let Some(value) = element.to_serde_value() else {
                continue;
            };
            if !holds_ours(set.layout, &value) {
                continue;
            }
            if value == wanted && !present {
                present = true;
            } else {
                remove_ours(set.layout, &element, &value);
            }
        }
        if !present {
            list.append(input(&wanted));
        }
    }
    Ok(root.to_string())
}

/// `text` without any gatehost hook; lists and the `hooks` object left
/// empty by it are removed.
pub fn remove_hooks(text: &str, layout: Layout) -> Result<String, InstallError> {
    let root = parse(text)?;
    let top = root_object(&root)?;
    let Some(hooks) = top
        .get("hooks")
        .and_then(|p| p.value())
        .and_then(|v| v.as_object())
    else {
        return Ok(root.to_string());
    };
    for prop in hooks.properties() {
        let Some(list) = prop.value().and_then(|v| v.as_array()) else {
            continue;
        };
        let mut removed = false;
        for element in list.elements() {
            if let Some(value) = element.to_serde_value()
                && holds_ours(layout, &value)
            {
                remove_ours(layout, &element, &value);
                removed = true;
            }
        }
        if removed && list.elements().is_empty() {
            prop.remove();
        }
    }
    if hooks.properties().is_empty()
        && let Some(p) = top.get("hooks")
    {
        p.remove();
    }
    Ok(root.to_string())
}

fn holds_ours(layout: Layout, value: &Value) -> bool {
    match layout {
        Layout::Flat | Layout::Bare => command_of(value).is_some_and(is_gatehost_hook),
        Layout::Grouped => value
            .get("hooks")
            .and_then(Value::as_array)
            .is_some_and(|hs| {
                hs.iter()
                    .any(|h| command_of(h).is_some_and(is_gatehost_hook))
            }),
    }
}

/// Removes gatehost's hook from `element`: the whole element, unless it is
/// a group that also holds other hooks (then only gatehost's).
fn remove_ours(layout: Layout, element: &CstNode, value: &Value) {
    let others = match layout {
        Layout::Flat | Layout::Bare => 0,
        Layout::Grouped => value
            .get("hooks")
            .and_then(Value::as_array)
            .map_or(0, |hs| {
                hs.iter()
                    .filter(|h| !command_of(h).is_some_and(is_gatehost_hook))
                    .count()
            }),
    };
    if others == 0 {
        element.clone().remove();
        return;
    }
    let inner = element
        .as_object()
        .and_then(|o| o.get("hooks"))
        .and_then(|p| p.value())
        .and_then(|v| v.as_array());
    if let Some(inner) = inner {
        for h in inner.elements() {
            if h.to_serde_value()
                .as_ref()
                .and_then(command_of)
                .is_some_and(is_gatehost_hook)
            {
                h.remove();
            }
        }
    }
}

/// `text` with `mcpServers.<name>` set to `server`.
pub fn add_mcp_server(text: &str, name: &str, server: &Value) -> Result<String, InstallError> {
    let root = parse(text)?;
    let top = root_object(&root)?;
    let servers = child_object(&top, "mcpServers")?;
    match servers.get(name) {
        Some(p) if p.value().and_then(|v| v.to_serde_value()).as_ref() == Some(server) => {}
        Some(p) => p.set_value(input(server)),
        None => {
            servers.append(name, input(server));
        }
    }
    Ok(root.to_string())
}

/// `text` without `mcpServers.<name>` (and without `mcpServers` if that
/// leaves it empty).
pub fn remove_mcp_server(text: &str, name: &str) -> Result<String, InstallError> {
    let root = parse(text)?;
    let top = root_object(&root)?;
    if let Some(servers) = top
        .get("mcpServers")
        .and_then(|p| p.value())
        .and_then(|v| v.as_object())
    {
        if let Some(p) = servers.get(name) {
            p.remove();
        }
        if servers.properties().is_empty()
            && let Some(p) = top.get("mcpServers")
        {
            p.remove();
        }
    }
    Ok(root.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claude_set(cmd: &str) -> HookSet {
        HookSet {
            layout: Layout::Grouped,
            entries: ["Stop", "SessionStart"]
                .iter()
                .map(|e| {
                    (
                        e.to_string(),
                        json!({"type": "command", "command": cmd, "timeout": 600}),
                    )
                })
                .collect(),
        }
    }

    const USER_SETTINGS: &str = r#"{
  // my settings
  "model": "opus",
  "hooks": {
    "Stop": [
      { "hooks": [ { "type": "command", "command": "say done" } ] }
    ],
    "PreToolUse": [ { "matcher": "Bash", "hooks": [ { "type": "command", "command": "audit" } ] } ]
  },
  "permissions": { "allow": ["Bash(ls)"] }
}
"#;

    #[test]
    fn merges_beside_other_hooks_keeps_everything_else_and_is_idempotent() {
        let set = claude_set("/usr/bin/gatehost hook claude --gates /etc/g.json");
        let once = add_hooks(USER_SETTINGS, &set).unwrap();
        let v: Value = jsonc_parser::parse_to_serde_value(&once, &Default::default()).unwrap();
        assert_eq!(v["model"], "opus");
        assert_eq!(v["permissions"]["allow"][0], "Bash(ls)");
        assert_eq!(v["hooks"]["PreToolUse"][0]["hooks"][0]["command"], "audit");
        let stop = v["hooks"]["Stop"].as_array().unwrap();
        assert_eq!(stop.len(), 2);
        assert_eq!(stop[0]["hooks"][0]["command"], "say done");
        assert_eq!(
            stop[1]["hooks"][0]["command"],
            "/usr/bin/gatehost hook claude --gates /etc/g.json"
        );
        assert_eq!(v["hooks"]["SessionStart"].as_array().unwrap().len(), 1);
        assert!(once.contains("// my settings"), "{once}");
        assert_eq!(
            add_hooks(&once, &set).unwrap(),
            once,
            "a second install changes nothing"
        );
        // Taking ours out gives the original bytes back.
        assert_eq!(remove_hooks(&once, Layout::Grouped).unwrap(), USER_SETTINGS);
    }

    #[test]
    fn an_older_gatehost_entry_is_replaced_not_doubled() {
        let old = add_hooks("", &claude_set("gatehost hook claude --gates /a.json")).unwrap();
        let new = add_hooks(&old, &claude_set("gatehost hook claude --gates /b.json")).unwrap();
        let v: Value = serde_json::from_str(&new).unwrap();
        let stop = v["hooks"]["Stop"].as_array().unwrap();
        assert_eq!(stop.len(), 1, "{new}");
        assert_eq!(
            stop[0]["hooks"][0]["command"],
            "gatehost hook claude --gates /b.json"
        );
        let empty: Value =
            serde_json::from_str(&remove_hooks(&new, Layout::Grouped).unwrap()).unwrap();
        assert_eq!(empty, json!({}));
    }

    #[test]
    fn a_group_shared_with_another_program_keeps_the_other_hook() {
        let text = r#"{"hooks": {"Stop": [{"hooks": [
            {"type": "command", "command": "lint"},
            {"type": "command", "command": "'/opt/bin/gatehost' hook claude"}]}]}}"#;
        let out = remove_hooks(text, Layout::Grouped).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["hooks"]["Stop"][0]["hooks"],
            json!([{"type": "command", "command": "lint"}])
        );
    }

    #[test]
    fn cursor_flat_hooks_get_a_version_and_round_trip() {
        let set = HookSet {
            layout: Layout::Flat,
            entries: vec![("stop".into(), json!({"command": "gatehost hook cursor"}))],
        };
        let original =
            "{\n  \"hooks\": {\n    \"afterFileEdit\": [{ \"command\": \"fmt\" }]\n  }\n}\n";
        let once = add_hooks(original, &set).unwrap();
        let v: Value = serde_json::from_str(&once).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["hooks"]["stop"][0]["command"], "gatehost hook cursor");
        assert_eq!(v["hooks"]["afterFileEdit"][0]["command"], "fmt");
        assert_eq!(add_hooks(&once, &set).unwrap(), once);
    }

    #[test]
    fn a_kiro_agents_bare_hooks_get_no_version_and_round_trip() {
        let set = HookSet {
            layout: Layout::Bare,
            entries: vec![(
                "stop".into(),
                json!({"command": "/bin/gatehost hook kiro", "timeout_ms": 30000}),
            )],
        };
        let original = "{\n  \"name\": \"dev\",\n  \"tools\": [\"*\"]\n}\n";
        let once = add_hooks(original, &set).unwrap();
        let v: Value = serde_json::from_str(&once).unwrap();
        assert!(v.get("version").is_none(), "{once}");
        assert_eq!(v["hooks"]["stop"][0]["timeout_ms"], 30000);
        assert_eq!(v["tools"], json!(["*"]));
        assert_eq!(add_hooks(&once, &set).unwrap(), once);
        assert_eq!(
            gatehost_hooks(&once, Layout::Bare).unwrap(),
            [("stop".to_string(), "/bin/gatehost hook kiro".to_string())]
        );
        assert_eq!(remove_hooks(&once, Layout::Bare).unwrap(), original);
    }

    #[test]
    fn what_is_not_an_object_is_refused_not_overwritten() {
        assert!(matches!(
            add_hooks("[1]", &claude_set("gatehost hook claude")),
            Err(InstallError::NotObject(_))
        ));
        assert!(matches!(
            add_hooks(
                r#"{"hooks": {"Stop": 3}}"#,
                &claude_set("gatehost hook claude")
            ),
            Err(InstallError::NotArray(_))
        ));
        assert!(matches!(
            add_hooks("{oops", &claude_set("x")),
            Err(InstallError::Parse(_))
        ));
    }

    #[test]
    fn only_gatehost_hook_commands_are_ours() {
        assert!(is_gatehost_hook("gatehost hook claude"));
        assert!(is_gatehost_hook("'/a b/gatehost' hook codex --gates /g"));
        assert!(!is_gatehost_hook("gatehost check g.json"));
        assert!(!is_gatehost_hook("notgatehost hook claude"));
        assert!(!is_gatehost_hook("echo gatehost hook"));
    }

    #[test]
    fn mcp_servers_are_added_once_and_removed() {
        let server = json!({"command": "/usr/bin/gatehost", "args": ["mcp"]});
        let original = "{\n  \"theme\": \"dark\"\n}\n";
        let once = add_mcp_server(original, "gatehost", &server).unwrap();
        assert_eq!(add_mcp_server(&once, "gatehost", &server).unwrap(), once);
        let v: Value = serde_json::from_str(&once).unwrap();
        assert_eq!(v["mcpServers"]["gatehost"], server);
        assert_eq!(remove_mcp_server(&once, "gatehost").unwrap(), original);
    }
}
