//! gatehost's OpenCode plugin as `hook install opencode` writes it: the
//! shipped asset (`host/assets/opencode/gatehost.js`) with its one
//! configuration line, between `// gatehost-config-begin` and
//! `// gatehost-config-end`, set to the installed command (the absolute
//! program and its arguments; spawned without a shell) and its timeout.
//!
//! It owns recognising a file as gatehost's plugin (its first line and both
//! markers), so that install never overwrites another program's plugin and
//! uninstall never removes one. It must never read or write a file.

use super::InstallError;

/// The plugin as shipped: every stop refused until the installer writes
/// its command.
pub const PLUGIN_ASSET: &str = include_str!("../../../../assets/opencode/gatehost.js");

/// The file name the plugin is installed under, in OpenCode's `plugin/`.
pub const PLUGIN_FILE: &str = "gatehost.js";

const BEGIN: &str = "// gatehost-config-begin\n";
const END: &str = "// gatehost-config-end";

fn header() -> &'static str {
    PLUGIN_ASSET.lines().next().unwrap_or_default()
}

/// Whether `text` is a gatehost plugin (any version's configuration).
pub fn is_gatehost_plugin(text: &str) -> bool {
    text.lines().next() == Some(header()) && text.contains(BEGIN) && text.contains(END)
}

/// The plugin running `command` with `args`, waiting at most `timeout_ms`
/// for its answer.
pub fn opencode_plugin(
    command: &str,
    args: &[String],
    timeout_ms: u64,
) -> Result<String, InstallError> {
    let (head, rest) = PLUGIN_ASSET.split_once(BEGIN).ok_or_else(|| {
        InstallError::Parse("the shipped OpenCode plugin has no config block".into())
    })?;
    let (_, tail) = rest.split_once(END).ok_or_else(|| {
        InstallError::Parse("the shipped OpenCode plugin has no config end".into())
    })?;
    let config = serde_json::json!({"command": command, "args": args, "timeoutMs": timeout_ms});
    Ok(format!(
        "{head}{BEGIN}const GATEHOST = {config}\n{END}{tail}"
    ))
}

/// The command a gatehost plugin runs, as written in it: `(command, args)`,
/// `None` when it is not a gatehost plugin or its command is not written.
pub fn plugin_command(text: &str) -> Option<(String, Vec<String>)> {
    if !is_gatehost_plugin(text) {
        return None;
    }
    let block = text.split_once(BEGIN)?.1.split_once(END)?.0;
    let json = block.trim().strip_prefix("const GATEHOST = ")?;
    #[derive(serde::Deserialize)]
    struct Config {
        command: Option<String>,
        #[serde(default)]
        args: Vec<String>,
    }
    let c: Config = serde_json::from_str(json).ok()?;
    Some((c.command?, c.args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_is_written_into_the_one_config_line_and_read_back() {
        assert!(is_gatehost_plugin(PLUGIN_ASSET));
        assert_eq!(plugin_command(PLUGIN_ASSET), None, "as shipped: no command");
        let args = vec![
            "hook".to_string(),
            "opencode".into(),
            "--gates".into(),
            "/g \"x\".json".into(),
        ];
        let text = opencode_plugin("/usr/bin/gatehost", &args, 600_000).unwrap();
        assert!(is_gatehost_plugin(&text));
        assert_eq!(
            plugin_command(&text),
            Some(("/usr/bin/gatehost".into(), args.clone()))
        );
        // Nothing else changed: the same lines but the config line.
        let changed: Vec<_> = PLUGIN_ASSET
            .lines()
            .zip(text.lines())
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(PLUGIN_ASSET.lines().count(), text.lines().count());
        // Writing it again over itself gives the same bytes.
        assert_eq!(
            opencode_plugin("/usr/bin/gatehost", &args, 600_000).unwrap(),
            text
        );
    }

    #[test]
    fn another_programs_plugin_is_not_gatehosts() {
        assert!(!is_gatehost_plugin("export const X = async () => ({})\n"));
        assert!(!is_gatehost_plugin(""));
        // gatehost's header without its markers (edited by hand): not ours to touch.
        assert!(!is_gatehost_plugin(&format!(
            "{}\nexport default 1\n",
            header()
        )));
    }
}
