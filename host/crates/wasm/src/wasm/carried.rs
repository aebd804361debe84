//! The plugins carried in the binary: the shipped Rust plugins
//! (forbid-patterns, diff-budget, style-review, noop) that `host/crates/wasm/build.rs`
//! built for wasm32-wasip2 and included, with their SHA-256 (taken at
//! build time, so that resolving one never hashes it) and their `//!`
//! documentation (their configuration keys).
//!
//! It owns that list and what a binary without it says. It never reads a
//! file: a carried plugin's bytes are the binary's own and never change
//! while it runs. Whether one is used is `resolve`'s business: a plugin
//! directory's `<name>.wasm` always wins over a carried plugin of that name.

/// One carried plugin.
#[derive(Debug)]
pub struct Carried {
    /// The name a gate uses (`"plugin": "forbid-patterns"`).
    pub name: &'static str,
    /// The component, as built.
    pub bytes: &'static [u8],
    /// SHA-256 of `bytes`, lower-case hex.
    pub sha256: &'static str,
    /// The plugin's documentation: what it does and its `config` keys.
    pub doc: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/carried.rs"));

/// Every carried plugin (none when the binary was built without them).
pub fn all() -> &'static [Carried] {
    CARRIED
}

/// The carried plugin called `name`, if there is one.
pub fn find(name: &str) -> Option<&'static Carried> {
    CARRIED.iter().find(|c| c.name == name)
}

/// Why this binary carries no plugins, when it carries none.
pub fn missing() -> Option<&'static str> {
    MISSING
}

/// What a "not found" error says of the carried plugins.
pub(super) fn summary() -> String {
    match MISSING {
        Some(reason) => format!("this gatehost carries no plugins: {reason}"),
        None => format!(
            "nor carried by this gatehost (it carries {})",
            CARRIED
                .iter()
                .map(|c| c.name)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use sha2::Digest;

    #[test]
    fn every_carried_digest_is_its_bytes_digest() {
        for c in super::all() {
            assert_eq!(
                c.sha256,
                hex::encode(sha2::Sha256::digest(c.bytes)),
                "{}",
                c.name
            );
            assert!(
                c.bytes.starts_with(b"\0asm"),
                "{} is not WebAssembly",
                c.name
            );
            assert!(!c.doc.is_empty(), "{} has no documentation", c.name);
        }
    }
}
