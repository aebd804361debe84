//! Builds the shipped Rust gate plugins (`plugins/`: forbid-patterns,
//! diff-budget, style-review, noop) for `wasm32-wasip2` and carries them in
//! the binary (this crate's, gatehost-wasm's), so that `cargo install
//! --path host` gives a `gatehost` whose named plugins work with no
//! checkout beside it.
//!
//! The nested cargo runs from `plugins/` (so `plugins/.cargo/config.toml`
//! applies), `--release --locked`, into `plugins/target` (the directory
//! `scripts/build-plugins.sh` builds into: each makes the other a no-op),
//! with the outer build's environment cleared (its RUSTFLAGS, target dir,
//! target, wrappers and CARGO_* variables are this build's, not the
//! plugins'). Its output is copied into OUT_DIR, hashed (SHA-256, so that
//! resolving a carried plugin never hashes it at run time) and included by
//! `src/wasm/carried.rs`, with each plugin's `//!` doc comment (its
//! configuration keys) for `gatehost plugin list --long`.
//!
//! Without the wasm32-wasip2 target (or with GATEHOST_CARRY_PLUGINS=0) the
//! binary carries none: a `cargo:warning` says so at build time, and the
//! binary says so in `plugin list` and in every "not found" error. A
//! nested build that fails for any other reason fails this build.

use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The carried plugins: (name a gate uses, crate folder, file cargo writes).
const PLUGINS: [(&str, &str); 4] = [
    ("forbid-patterns", "forbid_patterns"),
    ("diff-budget", "diff_budget"),
    ("style-review", "style_review"),
    ("noop", "noop"),
];

/// What the nested cargo keeps of this build's environment (anything else
/// is the outer build's business: its flags, target, profile, wrappers).
const KEEP: [&str; 15] = [
    "PATH",
    "HOME",
    "TMPDIR",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "CARGO_MAKEFLAGS",
    "CARGO_NET_OFFLINE",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "http_proxy",
    "https_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "no_proxy",
];

fn main() {
    let manifest = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env("OUT_DIR"));
    // host/crates/wasm: the checkout is three folders up.
    let checkout = manifest.join("..").join("..").join("..");
    let plugins = checkout.join("plugins");
    watch(&checkout, &plugins);
    let generated = match carried_reason(&plugins) {
        None => {
            build(&plugins);
            carried(&plugins, &out)
        }
        Some(reason) => {
            println!("cargo:warning=gatehost will carry no plugins: {reason}");
            format!(
                "pub(super) const CARRIED: &[Carried] = &[];\n\
                 pub(super) const MISSING: Option<&str> = Some({reason:?});\n"
            )
        }
    };
    if let Err(e) = std::fs::write(out.join("carried.rs"), generated) {
        panic!("cannot write {}: {e}", out.join("carried.rs").display());
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name} for build scripts"))
}

/// What reruns this script: the plugins' sources, their lock file and
/// cargo configuration, the WIT, and the toolchain's component list (a
/// wasm32-wasip2 target added later is then picked up).
fn watch(checkout: &Path, plugins: &Path) {
    println!("cargo:rerun-if-env-changed=GATEHOST_CARRY_PLUGINS");
    for p in ["Cargo.toml", "Cargo.lock", ".cargo/config.toml", "kit"] {
        println!("cargo:rerun-if-changed={}", plugins.join(p).display());
    }
    for (name, _) in PLUGINS {
        println!("cargo:rerun-if-changed={}", plugins.join(name).display());
    }
    println!("cargo:rerun-if-changed={}", checkout.join("wit").display());
    if let Some(components) = sysroot().map(|s| s.join("lib/rustlib/components"))
        && components.is_file()
    {
        println!("cargo:rerun-if-changed={}", components.display());
    }
}

/// The outer compiler's sysroot (the nested build uses the same rustc).
fn sysroot() -> Option<PathBuf> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Why the plugins cannot be carried, if they cannot.
fn carried_reason(plugins: &Path) -> Option<String> {
    if std::env::var("GATEHOST_CARRY_PLUGINS").is_ok_and(|v| v == "0") {
        return Some("it was built with GATEHOST_CARRY_PLUGINS=0".into());
    }
    if !plugins.join("Cargo.toml").is_file() {
        return Some(format!(
            "it was built without the plugins' sources ({} is missing)",
            plugins.display()
        ));
    }
    let has_target = sysroot().is_some_and(|s| s.join("lib/rustlib/wasm32-wasip2").is_dir());
    (!has_target).then(|| {
        "it was built without the wasm32-wasip2 target \
         (`rustup target add wasm32-wasip2`, then build or install gatehost again)"
            .to_string()
    })
}

/// Runs the nested `cargo build` of the carried plugins.
fn build(plugins: &Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(plugins).env_clear();
    for (k, v) in std::env::vars_os() {
        if k.to_str().is_some_and(|k| KEEP.contains(&k)) {
            cmd.env(k, v);
        }
    }
    // The same compiler as the outer build (whose sysroot was checked).
    if let Ok(rustc) = std::env::var("RUSTC") {
        cmd.env("RUSTC", rustc);
    }
    cmd.args([
        "build",
        "--release",
        "--locked",
        "--target",
        "wasm32-wasip2",
        "--target-dir",
    ])
    .arg(plugins.join("target"));
    for (name, _) in PLUGINS {
        cmd.args(["-p", name]);
    }
    // Its stdout would be read as this script's `cargo:` directives.
    cmd.stdout(std::io::stderr());
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "building the carried plugins failed ({s}): run `cd plugins && cargo build --release \
             --locked --target wasm32-wasip2` to see why, or build gatehost with \
             GATEHOST_CARRY_PLUGINS=0 to carry none"
        ),
        Err(e) => panic!("cannot run {cargo} to build the carried plugins: {e}"),
    }
}

/// Copies the built plugins into OUT_DIR and writes the Rust that carries
/// them.
fn carried(plugins: &Path, out: &Path) -> String {
    let built = plugins.join("target/wasm32-wasip2/release");
    let mut code = String::from("pub(super) const CARRIED: &[Carried] = &[\n");
    for (name, file) in PLUGINS {
        let from = built.join(format!("{file}.wasm"));
        let to = out.join(format!("{file}.wasm"));
        let bytes =
            std::fs::read(&from).unwrap_or_else(|e| panic!("cannot read {}: {e}", from.display()));
        if std::fs::read(&to).ok().as_deref() != Some(&bytes[..])
            && let Err(e) = std::fs::write(&to, &bytes)
        {
            panic!("cannot write {}: {e}", to.display());
        }
        let digest = Sha256::digest(&bytes)
            .iter()
            .fold(String::new(), |mut s, b| {
                let _ = write!(s, "{b:02x}");
                s
            });
        let doc = doc_comment(&plugins.join(name).join("src/lib.rs"));
        let _ = writeln!(
            code,
            "    Carried {{ name: {name:?}, bytes: include_bytes!({to:?}), sha256: {digest:?}, doc: {doc:?} }},",
        );
    }
    code.push_str("];\npub(super) const MISSING: Option<&str> = None;\n");
    code
}

/// The leading `//!` lines of a plugin's `lib.rs`: what it does and its
/// configuration keys.
fn doc_comment(lib: &Path) -> String {
    let text = std::fs::read_to_string(lib)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", lib.display()));
    text.lines()
        .map_while(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}
