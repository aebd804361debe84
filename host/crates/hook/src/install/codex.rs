//! Codex's own configuration: the trust it needs before it runs a hook
//! (`[hooks.state."KEY"] trusted_hash`) and its MCP servers
//! (`[mcp_servers.NAME]`), both in `config.toml` (TOML, edited in place by
//! `toml_edit`, everything else kept as written). Like its parent module it
//! must never read or write a file.

use super::{InstallError, ParseOptions, Value, command_of, is_gatehost_hook};

/// Codex's trust of gatehost's hooks: for each of gatehost's handlers in
/// `hooks_json` (the text of the file at `path`), the `hooks.state` key
/// (`<path>:<event in snake case>:<group>:<handler>`) and the hash Codex
/// trusts (`sha256:` of the handler's identity as compact JSON with sorted
/// keys). Codex skips, without a word, a hook whose hash it was not given.
pub fn codex_trust(
    path: &std::path::Path,
    hooks_json: &str,
) -> Result<Vec<(String, String)>, InstallError> {
    use sha2::{Digest, Sha256};
    if hooks_json.trim().is_empty() {
        return Ok(Vec::new());
    }
    let v: Value = jsonc_parser::parse_to_serde_value(hooks_json, &ParseOptions::default())
        .map_err(|e| InstallError::Parse(e.to_string()))?;
    let mut out = Vec::new();
    let Some(events) = v.get("hooks").and_then(Value::as_object) else {
        return Ok(out);
    };
    for (event, groups) in events {
        let label = snake_case(event);
        for (g, group) in groups.as_array().into_iter().flatten().enumerate() {
            for (h, handler) in group
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let Some(command) = command_of(handler).filter(|c| is_gatehost_hook(c)) else {
                    continue;
                };
                let mut hook = serde_json::json!({
                    "async": handler.get("async").and_then(Value::as_bool).unwrap_or(false),
                    "command": command,
                    "timeout": handler.get("timeout").and_then(Value::as_u64).unwrap_or(600).max(1),
                    "type": "command",
                });
                if let Some(m) = handler.get("statusMessage") {
                    hook["statusMessage"] = m.clone();
                }
                let mut identity = serde_json::json!({"event_name": label, "hooks": [hook]});
                if let Some(m) = group.get("matcher") {
                    identity["matcher"] = m.clone();
                }
                // serde_json's maps are sorted by key: this is the sorted form.
                let hash = hex::encode(Sha256::digest(identity.to_string().as_bytes()));
                out.push((
                    format!("{}:{label}:{g}:{h}", path.display()),
                    format!("sha256:{hash}"),
                ));
            }
        }
    }
    Ok(out)
}

fn snake_case(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Codex's `config.toml` with the trust keys `remove` taken out and `add`
/// put in (`[hooks.state."KEY"] trusted_hash = "HASH"`), everything else
/// kept as written.
pub fn codex_config_trust(
    text: &str,
    remove: &[String],
    add: &[(String, String)],
) -> Result<String, InstallError> {
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| InstallError::Parse(e.to_string()))?;
    let unchanged = {
        let state = doc.get("hooks").and_then(|h| h.get("state"));
        let has = |k: &str, hash: &str| {
            state
                .and_then(|s| s.get(k))
                .and_then(|t| t.get("trusted_hash"))
                .and_then(|h| h.as_str())
                == Some(hash)
        };
        add.iter().all(|(k, h)| has(k, h))
            && remove
                .iter()
                .all(|k| add.iter().any(|(a, _)| a == k) || state.and_then(|s| s.get(k)).is_none())
    };
    if unchanged {
        return Ok(text.to_string());
    }
    let hooks = doc
        .entry("hooks")
        .or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        })
        .as_table_mut()
        .ok_or_else(|| InstallError::NotObject("hooks".into()))?;
    let state = hooks
        .entry("state")
        .or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        })
        .as_table_mut()
        .ok_or_else(|| InstallError::NotObject("hooks.state".into()))?;
    for k in remove {
        state.remove(k);
    }
    for (k, hash) in add {
        let mut t = toml_edit::Table::new();
        t["trusted_hash"] = toml_edit::value(hash.as_str());
        state.insert(k, toml_edit::Item::Table(t));
    }
    if state.is_empty() {
        hooks.remove("state");
    }
    if hooks.is_empty() {
        doc.remove("hooks");
    }
    Ok(doc.to_string())
}

#[cfg(test)]
mod codex_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_trust_hash_is_codexs_for_a_measured_hook() {
        // The identity Codex 0.169.0 hashes: for hooks like this one its
        // own `currentHash` (`codex app-server`, hooks/list) matched it,
        // by hand; tests/agents/codex.rs shows Codex running what
        // `hook install codex` trusted.
        let hooks = json!({"hooks": {"Stop": [
            {"hooks": [{"type": "command", "command": "say"}]},
            {"hooks": [{"type": "command", "command": "/bin/gatehost hook codex", "timeout": 600}]}
        ]}});
        let t = codex_trust(std::path::Path::new("/h/hooks.json"), &hooks.to_string()).unwrap();
        assert_eq!(t.len(), 1, "only gatehost's hooks: {t:?}");
        assert_eq!(t[0].0, "/h/hooks.json:stop:1:0");
        let identity = r#"{"event_name":"stop","hooks":[{"async":false,"command":"/bin/gatehost hook codex","timeout":600,"type":"command"}]}"#;
        use sha2::Digest;
        assert_eq!(
            t[0].1,
            format!("sha256:{}", hex::encode(sha2::Sha256::digest(identity)))
        );
        assert_eq!(snake_case("UserPromptSubmit"), "user_prompt_submit");
    }

    #[test]
    fn trust_entries_go_in_and_out_of_config_toml_keeping_the_rest() {
        let original = "# mine\nmodel = \"gpt-5.5\"\n\n[features]\nplugins = false\n";
        let add = vec![(
            "/h/hooks.json:stop:0:0".to_string(),
            "sha256:ab".to_string(),
        )];
        let once = codex_config_trust(original, &[], &add).unwrap();
        assert!(
            once.contains("[hooks.state.\"/h/hooks.json:stop:0:0\"]"),
            "{once}"
        );
        assert!(once.contains("trusted_hash = \"sha256:ab\""), "{once}");
        assert!(once.starts_with(original), "{once}");
        assert_eq!(
            codex_config_trust(&once, &[add[0].0.clone()], &add).unwrap(),
            once
        );
        assert_eq!(
            codex_config_trust(&once, &[add[0].0.clone()], &[]).unwrap(),
            original
        );
    }
}

/// Codex's `config.toml` with `[mcp_servers.<name>]` running `command`
/// with `args` (`Some`), or without it (`None`; and without `mcp_servers`
/// if that leaves it empty), everything else kept as written.
pub fn codex_config_mcp(
    text: &str,
    name: &str,
    command: Option<(&str, &[String])>,
) -> Result<String, InstallError> {
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| InstallError::Parse(e.to_string()))?;
    let current = doc.get("mcp_servers").and_then(|s| s.get(name)).map(|t| {
        (
            t.get("command")
                .and_then(|c| c.as_str())
                .map(str::to_string),
            t.get("args").and_then(|a| a.as_array()).map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect::<Vec<_>>()
            }),
        )
    });
    match command {
        Some((cmd, words)) => {
            if current == Some((Some(cmd.to_string()), Some(words.to_vec()))) {
                return Ok(text.to_string());
            }
            let servers = doc
                .entry("mcp_servers")
                .or_insert_with(|| {
                    let mut t = toml_edit::Table::new();
                    t.set_implicit(true);
                    toml_edit::Item::Table(t)
                })
                .as_table_mut()
                .ok_or_else(|| InstallError::NotObject("mcp_servers".into()))?;
            let mut t = toml_edit::Table::new();
            t["command"] = toml_edit::value(cmd);
            let args: toml_edit::Array = words.iter().map(String::as_str).collect();
            t["args"] = toml_edit::value(args);
            servers.insert(name, toml_edit::Item::Table(t));
        }
        None => {
            if current.is_none() {
                return Ok(text.to_string());
            }
            if let Some(servers) = doc.get_mut("mcp_servers").and_then(|s| s.as_table_mut()) {
                servers.remove(name);
                if servers.is_empty() {
                    doc.remove("mcp_servers");
                }
            }
        }
    }
    Ok(doc.to_string())
}

#[cfg(test)]
mod codex_mcp_tests {
    use super::*;

    #[test]
    fn the_mcp_server_goes_in_once_and_out_again() {
        let original = "model = \"gpt-5.5\"\n\n[mcp_servers.other]\ncommand = \"x\"\n";
        let mcp = ["mcp".to_string()];
        let once = codex_config_mcp(original, "gatehost", Some(("/bin/gatehost", &mcp))).unwrap();
        assert!(
            once.contains("[mcp_servers.gatehost]") && once.contains("args = [\"mcp\"]"),
            "{once}"
        );
        assert!(once.contains("[mcp_servers.other]"), "{once}");
        assert_eq!(
            codex_config_mcp(&once, "gatehost", Some(("/bin/gatehost", &mcp))).unwrap(),
            once
        );
        assert_eq!(codex_config_mcp(&once, "gatehost", None).unwrap(), original);
        // Other arguments (a daemon on another data directory) replace the
        // entry, not double it.
        let dir = ["mcp".to_string(), "--data-dir".into(), "/d".into()];
        let moved = codex_config_mcp(&once, "gatehost", Some(("/bin/gatehost", &dir))).unwrap();
        assert!(
            moved.contains("args = [\"mcp\", \"--data-dir\", \"/d\"]"),
            "{moved}"
        );
        assert_eq!(
            moved.matches("[mcp_servers.gatehost]").count(),
            1,
            "{moved}"
        );
    }
}
