use super::*;
use crate::config::WasmConfig;

/// A host whose one plugin directory is a fresh temporary directory, with
/// no compile cache (nothing outside the test's directory is written).
fn host_with_dir() -> (tempfile::TempDir, WasmHost) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = WasmConfig {
        plugin_dirs: vec![tmp.path().to_path_buf()],
        cache_dir: None,
        pooling: false,
        ..WasmConfig::default()
    };
    let host = WasmHost::new(config).expect("host");
    (tmp, host)
}

fn noop() -> &'static Carried {
    carried::find("noop").unwrap_or_else(|| {
        panic!(
            "this test binary carries no noop plugin: {:?}",
            carried::missing()
        )
    })
}

#[test]
fn a_carried_plugin_is_found_when_no_directory_has_it() {
    let (_tmp, host) = host_with_dir();
    let c = noop();
    match host.find_named("noop").expect("found") {
        Located::Carried(found) => assert_eq!(found.sha256, c.sha256),
        Located::File(p) => panic!("found a file {}", p.display()),
    }
    let named = host.find_named_cached("noop").expect("found");
    assert!(
        !named.inside(Path::new("/")),
        "a carried plugin lies in no workspace"
    );
    assert_eq!(named.describe(), "the carried noop");
}

#[test]
fn a_plugin_directory_beats_the_carried_plugin_of_that_name() {
    let (tmp, host) = host_with_dir();
    noop();
    // Both spellings of the file replace the carried one.
    for file in ["noop.wasm", "diff_budget.wasm"] {
        std::fs::write(tmp.path().join(file), b"an operator's own build").expect("write");
    }
    for (name, file) in [("noop", "noop.wasm"), ("diff-budget", "diff_budget.wasm")] {
        match host.find_named(name).expect("found") {
            Located::File(p) => assert_eq!(p, tmp.path().join(file)),
            Located::Carried(_) => panic!("the carried {name} was preferred to the directory's"),
        }
    }
}

#[test]
fn a_pin_that_is_not_the_carried_plugins_digest_is_refused() {
    let (_tmp, host) = host_with_dir();
    let c = noop();
    let wrong = "0".repeat(64);
    let named = host.find_named_cached("noop").expect("found");
    match host.load_named("noop", &named, Some(&wrong)) {
        Err(PluginError::DigestMismatch { plugin, expected }) => {
            assert_eq!(plugin, "noop");
            assert_eq!(expected, wrong);
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("a carried plugin loaded against a wrong pin"),
    }
    // The right pin (upper case too) loads it, from the binary's bytes.
    let plugin = host
        .load_named("noop", &named, Some(&c.sha256.to_ascii_uppercase()))
        .expect("loads")
        .expect("a carried plugin is never stale");
    assert_eq!(plugin.digest, c.sha256);
    assert_eq!(plugin.size, c.bytes.len());
}

#[test]
fn a_carried_plugin_larger_than_max_plugin_bytes_is_refused() {
    let c = noop();
    let config = WasmConfig {
        cache_dir: None,
        pooling: false,
        max_plugin_bytes: c.bytes.len() as u64 - 1,
        ..WasmConfig::default()
    };
    let host = WasmHost::new(config).expect("host");
    match host.load_carried("noop", c, None) {
        Err(PluginError::Unreadable { message, .. }) => {
            assert!(message.contains("max_plugin_bytes"), "{message}");
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("loaded past max_plugin_bytes"),
    }
}

#[test]
fn not_found_says_what_is_carried_and_points_to_plugin_list() {
    let (_tmp, host) = host_with_dir();
    noop();
    let e = host.find_named("no-such-plugin").expect_err("not found");
    let text = e.to_string();
    assert!(text.contains("nor carried by this gatehost"), "{text}");
    assert!(text.contains("forbid-patterns"), "{text}");
    assert!(text.contains("gatehost plugin list"), "{text}");
}
