//! WASM gate plugins through the real `gatehost check`: the shipped
//! plugins on real files, the load-time refusals, and the hostile corpus
//! (tests/support/hostile-plugins/), each with its outcome, reason and time bound.
//! Plugins are built by `scripts/build-plugins.sh` (the test script runs it).

use crate::common;
use common::*;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

mod hostile;
mod loading;
mod shipped;

pub(crate) fn plugin_dir() -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/target/wasm32-wasip2/release");
    assert!(
        dir.join("noop.wasm").is_file(),
        "plugins are not built: run `bash scripts/build-plugins.sh` (scripts/test.sh does)"
    );
    dir
}

pub(crate) fn plugin_file(name: &str) -> PathBuf {
    plugin_dir().join(format!("{}.wasm", name.replace('-', "_")))
}

/// A config with the built plugins, a private cache, and the `say` judge.
fn wasm_config(s: &Scratch, extra: &str) -> String {
    wasm_config_in(&s.etc.join("cache"), extra)
}

/// The same, with the compiled components cached in `cache`.
pub(crate) fn wasm_config_in(cache: &std::path::Path, extra: &str) -> String {
    format!(
        "[wasm]\nplugin_dirs = [\"{}\"]\ncache_dir = \"{}\"\n{extra}\n[judge.adapters.yes]\ncommand = [\"bash\", \"{}\", \"VERDICT: PASS\"]\n",
        plugin_dir().display(),
        cache.display(),
        fixture_str("judges/say.sh"),
    )
}

fn sha256_of(path: &std::path::Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(
        std::fs::read(path).expect("read plugin"),
    ))
}

pub(crate) fn gate(plugin: &str, config: serde_json::Value, extra: serde_json::Value) -> String {
    let mut w = json!({"plugin": plugin, "config": config});
    if let (Some(o), Some(e)) = (w.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            o.insert(k.clone(), v.clone());
        }
    }
    json!({ "wasm": w }).to_string()
}

/// Every hostile plugin must be dealt with within this bound (the tight
/// time limits have their own tests); the compiled component comes from a
/// cache shared by the test runs, so compilation is not in the bound.
const HOSTILE_BOUND: Duration = Duration::from_secs(10);

pub(crate) fn shared_cache() -> PathBuf {
    plugin_dir().join("../../gatehost-test-cache")
}

fn hostile(s: &Scratch, mode: &str, arg: &str, extra: serde_json::Value) -> CliRun {
    let config = wasm_config_in(&shared_cache(), "");
    // The first run compiles the plugin into the shared cache (hundreds of
    // MiB for cranelift): done once, before anything is measured.
    static WARM: std::sync::Once = std::sync::Once::new();
    WARM.call_once(|| {
        let warm = Scratch::new();
        warm.check(
            &config,
            &gate("hostile", json!({"mode": "error"}), json!({})),
            &[],
        );
    });
    let run = s.check(
        &config,
        &gate("hostile", json!({"mode": mode, "arg": arg}), extra),
        &[],
    );
    assert!(
        run.elapsed < HOSTILE_BOUND,
        "hostile mode {mode} took {:?}",
        run.elapsed
    );
    run
}

const LIB_DIFF: &str = "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -0,0 +1,2 @@\n+fn BadName() {}\n+fn good() {}\n";
