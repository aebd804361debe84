//! The JavaScript plugin (plugins/js/no-debug-js, built with jco /
//! componentize-js by `scripts/build-plugins.sh`) through the real
//! `gatehost check`, the way the Python one is tested: its verdicts and
//! findings on real files and diffs, its config, and its bounds.

use crate::common::*;
use crate::gates::wasm::{gate, plugin_file, shared_cache, wasm_config_in};
use serde_json::json;

/// The file of the change, as it is in the workspace after the change.
const APP_JS: &str = "console.log(\"already there\");\nconst a = 1;\nconsole.log(a);\n// console.log(b);\nfunction f() {\n  debugger;\n}\nconsole.log(\"kept\"); // no-debug-js: allow\n";

/// Adds lines 3 to 8 of APP_JS, src/gone.js (not in the workspace: the
/// diff is stale), and a line to notes.md.
const FLAGGED_DIFF: &str = "diff --git a/src/app.js b/src/app.js
--- a/src/app.js
+++ b/src/app.js
@@ -1,2 +1,8 @@
 console.log(\"already there\");
 const a = 1;
+console.log(a);
+// console.log(b);
+function f() {
+  debugger;
+}
+console.log(\"kept\"); // no-debug-js: allow
diff --git a/src/gone.js b/src/gone.js
--- a/src/gone.js
+++ b/src/gone.js
@@ -0,0 +1 @@
+debugger;
diff --git a/notes.md b/notes.md
--- a/notes.md
+++ b/notes.md
@@ -1 +1,2 @@
 # Notes
+TODO: call console.log(x) here
";

/// Adds line 2 of src/clean.ts; line 1 (a console.log) was there before.
const CLEAN_DIFF: &str = "diff --git a/src/clean.ts b/src/clean.ts
--- a/src/clean.ts
+++ b/src/clean.ts
@@ -1 +1,2 @@
 console.log(\"already there\");
+export const b: number = 2;
";

/// A scratch workspace holding the changed files and an unchanged one
/// full of debugging statements, and the config naming the built plugins
/// (the 12 MB component compiled once into the cache the tests share).
fn workspace() -> (Scratch, String) {
    assert!(
        plugin_file("no-debug-js").is_file(),
        "the JavaScript plugin is not built (bash scripts/build-plugins.sh)"
    );
    let s = Scratch::new();
    s.write_ws("src/app.js", APP_JS);
    s.write_ws(
        "src/clean.ts",
        "console.log(\"already there\");\nexport const b: number = 2;\n",
    );
    s.write_ws("notes.md", "# Notes\nTODO: call console.log(x) here\n");
    s.write_ws("src/unchanged.js", "console.log(1);\ndebugger;\n");
    s.write("flagged.diff", FLAGGED_DIFF);
    s.write("clean.diff", CLEAN_DIFF);
    let cfg = wasm_config_in(&shared_cache(), "");
    // Compile once, before the tests' runs, so that two tests do not
    // compile the same component at once. Outside the runs' watchdog: a
    // debug build of the host under the load of a build alongside took
    // two minutes to compile it.
    static WARM: std::sync::Once = std::sync::Once::new();
    WARM.call_once(|| {
        let config = s.write("warm.toml", &cfg);
        let gate = s.write("warm.json", &js_gate(json!({})));
        let diff = s.etc.join("clean.diff").display().to_string();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gatehost"))
            .args(check_args(&config, &s.ws, &["--diff".into(), diff], &gate))
            .output()
            .expect("run gatehost");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    });
    (s, cfg)
}

fn diff_arg(s: &Scratch, name: &str) -> String {
    s.etc.join(name).display().to_string()
}

/// A gate with the given plugin config and a generous wall-clock bound
/// (the builds alongside the tests share two cores).
fn js_gate(config: serde_json::Value) -> String {
    gate("no-debug-js", config, json!({"timeoutMs": 60000}))
}

#[test]
fn the_javascript_plugin_flags_added_debug_statements_with_path_and_line() {
    let (s, cfg) = workspace();
    let flagged = diff_arg(&s, "flagged.diff");
    let run = s.check(&cfg, &js_gate(json!({})), &["--diff", &flagged]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.reason(), "2 debugging statement(s) left in 1 file(s)");
    // Only the lines the change adds to the .js file: not line 1 (there
    // before), not the commented-out call, not the allowed line, not
    // notes.md (not JavaScript), not src/unchanged.js (not changed).
    assert_eq!(
        run.gate0()["findings"],
        json!([
            {"path": "src/app.js", "line": 3, "severity": "error", "message": "[console-log] console.log( left in"},
            {"path": "src/app.js", "line": 6, "severity": "error", "message": "[debugger] debugger statement left in"},
            {"path": "src/gone.js", "severity": "warning", "message": "cannot be read: src/gone.js: No such file or directory (os error 2)"},
        ])
    );

    let clean = diff_arg(&s, "clean.diff");
    let run = s.check(&cfg, &js_gate(json!({})), &["--diff", &clean]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.reason(), "no debugging statement in 1 file(s)");
    assert_eq!(run.gate0().get("findings"), None, "{}", run.stdout);

    // Without a change it cannot decide: an error, never a pass.
    let run = s.check(&cfg, &js_gate(json!({})), &[]);
    assert_reason(
        &run,
        2,
        "plugin 'no-debug-js' reported an error: the host gave no changed files (pass the change with --diff)",
    );
}

#[test]
fn the_javascript_plugin_follows_its_config() {
    let (s, cfg) = workspace();
    let flagged = diff_arg(&s, "flagged.diff");
    let clean = diff_arg(&s, "clean.diff");

    // Every line of a changed file, not only the added ones; still only
    // the changed files.
    let run = s.check(
        &cfg,
        &js_gate(json!({"addedLinesOnly": false})),
        &["--diff", &clean],
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        run.gate0()["findings"],
        json!([{"path": "src/clean.ts", "line": 1, "severity": "error", "message": "[console-log] console.log( left in"}])
    );

    // Other files and patterns; a warning does not fail the gate.
    let config = json!({
        "extensions": [".md"],
        "patterns": [{"id": "todo", "pattern": "^TODO:", "message": "a TODO left in", "severity": "warning"}],
    });
    let run = s.check(&cfg, &js_gate(config), &["--diff", &flagged]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.reason(), "no debugging statement in 1 file(s)");
    assert_eq!(
        run.gate0()["findings"],
        json!([{"path": "notes.md", "line": 2, "severity": "warning", "message": "[todo] a TODO left in"}])
    );

    // Ignored directories are not read.
    let run = s.check(
        &cfg,
        &js_gate(json!({"ignore": ["src/"]})),
        &["--diff", &flagged],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.reason(), "no debugging statement in 0 file(s)");

    // A bad config is an error naming the cause.
    let run = s.check(
        &cfg,
        &js_gate(json!({"patterns": [{"id": "broken", "pattern": "("}]})),
        &["--diff", &flagged],
    );
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert_starts(
        &run.reason(),
        "plugin 'no-debug-js' reported an error: bad plugin config: pattern broken: ",
    );
    let run = s.check(
        &cfg,
        &js_gate(json!({"scope": "all"})),
        &["--diff", &flagged],
    );
    assert_refused(&run, "unknown key scope");
}

#[test]
fn the_javascript_plugin_scans_a_large_file_within_the_default_bounds() {
    let (s, cfg) = workspace();
    // 20,000 lines (about 1 MB), every one scanned.
    let big: String = (0..20_000)
        .map(|i| format!("export const v{i} = compute({i}); // value {i}\n"))
        .collect();
    s.write_ws("src/big.js", &big);
    let diff = s.write(
        "big.diff",
        "diff --git a/src/big.js b/src/big.js\n--- a/src/big.js\n+++ b/src/big.js\n@@ -1 +1 @@\n-x\n+export const v0 = compute(0); // value 0\n",
    );
    let diff = diff.display().to_string();
    let config = json!({"addedLinesOnly": false});
    // The default bounds: 5 s of evaluation, 5·10⁹ instructions, 128 MiB.
    let run = s.check(
        &cfg,
        &gate("no-debug-js", config.clone(), json!({})),
        &["--diff", &diff],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.reason(), "no debugging statement in 1 file(s)");
    // The bounds hold the JavaScript engine as they hold any plugin.
    let run = s.check(
        &cfg,
        &gate(
            "no-debug-js",
            config,
            json!({"timeoutMs": 60000, "fuel": 100_000_000}),
        ),
        &["--diff", &diff],
    );
    assert_reason(
        &run,
        2,
        "plugin 'no-debug-js' ran out of fuel (its budget is 100000000 instructions)",
    );
}
