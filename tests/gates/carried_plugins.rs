//! The plugins carried in the binary, beside plugin directories: a
//! directory's file of a name wins over the carried plugin of that name
//! (at the gate and in `plugin list`). The install of gatehost with no
//! checkout is `tests/install.rs`.

use crate::common::*;
use crate::gates::wasm::plugin_dir;
use serde_json::json;

/// A plugin directory's file beats the plugin of that name carried in the
/// binary: here a `noop.wasm` that is really diff-budget, which fails a
/// change the carried noop would pass; `plugin list` says which one a gate
/// gets.
#[test]
fn a_plugin_directory_replaces_a_carried_plugin_of_the_same_name() {
    let s = Scratch::new();
    let dir = etc_dir(&s, "plugins");
    std::fs::copy(plugin_dir().join("diff_budget.wasm"), dir.join("noop.wasm")).expect("copy");
    let diff = s.write(
        "change.diff",
        "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n",
    );
    let config = format!(
        "[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n",
        dir.display(),
        s.etc.join("cache").display()
    );
    let gate = json!({"wasm": {"plugin": "noop", "config": {"maxFiles": 0, "maxLines": 0}}});
    let run = s.check(
        &config,
        &gate.to_string(),
        &["--diff", diff.to_str().unwrap()],
    );
    assert_eq!(run.outcome(), "fail", "{}", run.stdout);
    // Without the directory, the carried noop answers the same gate.
    let carried_only = format!(
        "[wasm]\ncache_dir = \"{}\"\n",
        s.etc.join("cache").display()
    );
    let run = s.check(
        &carried_only,
        &gate.to_string(),
        &["--diff", diff.to_str().unwrap()],
    );
    assert_eq!(run.outcome(), "pass", "{}", run.stdout);

    let cfg = s.write("list.toml", &config);
    let run = gatehost(&["plugin", "list", "--json", "--config", &arg(&cfg)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let listing = run.json();
    let noops: Vec<(String, bool)> = listing["plugins"]
        .as_array()
        .expect("plugins")
        .iter()
        .filter(|p| p["name"] == "noop")
        .map(|p| (str_of(&p["from"]).to_string(), p["used"] == true))
        .collect();
    assert_eq!(
        noops,
        [
            (dir.display().to_string(), true),
            ("carried".to_string(), false)
        ],
        "{listing}"
    );
}
