//! A session key's form: how one is made (`gsk_` and 64 lowercase hex
//! digits, from two random v4 UUIDs), checked when a caller proposes its
//! own, digested for storage, and the header that carries keys
//! (`Gatehost-Session-Key`, comma-separated). Both the daemon (which issues
//! and checks keys, `engine::keys`) and the client (which may make the key
//! of a session it registers, so that a retried registration is its own)
//! use it; neither defines the form again.
//!
//! It owns the form only. It must never store, log or compare a key for a
//! decision (the engine's `keys` does, on digests).

use sha2::{Digest, Sha256};

/// The request header that carries a caller's session keys.
pub const HEADER: &str = "gatehost-session-key";

/// A fresh key.
pub fn new() -> String {
    format!(
        "gsk_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Whether `key` has the form [`new`] makes.
pub fn well_formed(key: &str) -> bool {
    key.strip_prefix("gsk_").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// The stored form of a key (SHA-256, hex).
pub fn digest(key: &str) -> String {
    hex::encode(Sha256::digest(key.trim().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_keys_are_well_formed_fresh_and_digested_apart() {
        let (a, b) = (new(), new());
        assert_ne!(a, b);
        assert!(well_formed(&a) && well_formed(&b), "{a} {b}");
        assert_eq!(a.len(), 68);
        assert_eq!(digest(&a).len(), 64);
        assert!(!digest(&a).contains(&a[4..]));
        for bad in [
            "",
            "gsk_",
            "gsk_short",
            &a.to_uppercase(),
            &format!("{a}0"),
            &a.replace("gsk_", "key_"),
            &format!("gsk_{}", "g".repeat(64)),
        ] {
            assert!(!well_formed(bad), "{bad}");
        }
    }
}
