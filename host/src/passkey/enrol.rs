//! The one-time enrolment code the first passkey needs: what a holder of
//! the operator token lacks. `gatehost passkey enrol-code`, run on the
//! daemon's machine as the daemon's user, makes a random code, prints it
//! on that terminal and leaves only its SHA-256 and an expiry in
//! [`ENROL_FILE`] in the data directory (owner-only, beside the store);
//! the page sends the code with the first registration, and the daemon
//! compares its digest with the file's. Nothing the API answers contains
//! the code or the file, so a process that holds the operator token and
//! can call the API, but cannot read or write the data directory, cannot
//! obtain one.
//!
//! It owns the code's making, its file and its check. It must never keep
//! the code itself anywhere (only its digest), and never accept an expired
//! or a different code; spending it (removing the file once the first
//! passkey is stored) is its caller's, after the store said yes.

use sha2::{Digest, Sha256};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The file, in the data directory, holding the code's digest.
pub const ENROL_FILE: &str = "passkey-enrol.json";
/// How long a code can be used.
pub const ENROL_TTL: Duration = Duration::from_secs(15 * 60);
/// The code's alphabet (Crockford's base32: no I, L, O, U).
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// The code's length in characters (5 bits each: 100 bits).
const CODE_CHARS: usize = 20;

/// Why an enrolment code was refused or could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EnrolError {
    #[error(
        "no passkey is registered yet: the first one needs an enrolment code; run `gatehost passkey enrol-code` on the daemon's machine as its user and enter the code on the page"
    )]
    Missing,
    #[error(
        "the enrolment code is wrong, expired or already used: run `gatehost passkey enrol-code` again (each code lasts {} minutes and registers one passkey)",
        ENROL_TTL.as_secs() / 60
    )]
    Refused,
    #[error("cannot write the enrolment code's file {path}: {why}")]
    Write { path: String, why: String },
}

/// The stored half of a code.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Stored {
    /// SHA-256 of the normalised code, hex.
    sha256: String,
    /// Milliseconds since the epoch.
    expires_at_ms: u64,
}

/// A code checked against the file: what a registration begun with it
/// carries (its digest only), to be checked again when the passkey is
/// stored. Made only by [`check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    digest: String,
}

#[cfg(test)]
impl Checked {
    /// A code's digest as if checked (for the ceremonies' unit tests).
    pub fn for_tests(code: &str) -> Checked {
        Checked {
            digest: digest(code),
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The code as compared: upper case, without the dashes and spaces a
/// person may type.
fn normalise(code: &str) -> String {
    code.chars()
        .filter(|c| !matches!(c, '-' | ' ' | '\t'))
        .flat_map(char::to_uppercase)
        .collect()
}

fn digest(code: &str) -> String {
    hex::encode(Sha256::digest(normalise(code).as_bytes()))
}

/// The file in `data_dir`.
pub fn file(data_dir: &Path) -> PathBuf {
    data_dir.join(ENROL_FILE)
}

/// Makes a new code for the daemon of `data_dir` (replacing any earlier
/// one): its digest is written owner-only, the code returned, shown in
/// groups of five.
pub fn make(data_dir: &Path) -> Result<String, EnrolError> {
    let path = file(data_dir);
    let fail = |why: String| EnrolError::Write {
        path: path.display().to_string(),
        why,
    };
    let mut bytes = Vec::with_capacity(32);
    bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
    // Version and variant bits are fixed in a v4 UUID: take the bytes
    // clear of them (0..6 and 9..16 of each).
    let random: Vec<u8> = bytes
        .chunks(16)
        .flat_map(|u| u[..6].iter().chain(&u[9..]).copied().collect::<Vec<u8>>())
        .collect();
    let code: String = random
        .iter()
        .take(CODE_CHARS)
        .map(|b| ALPHABET[usize::from(b & 31)] as char)
        .collect();
    let shown = code
        .as_bytes()
        .chunks(5)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join("-");
    let stored = Stored {
        sha256: digest(&code),
        expires_at_ms: now_ms() + ENROL_TTL.as_millis() as u64,
    };
    let text = serde_json::to_vec(&stored).map_err(|e| fail(e.to_string()))?;
    // Owner-only from the start (tempfile makes it 0600), then renamed
    // over the old one.
    let mut tmp = tempfile::NamedTempFile::new_in(data_dir).map_err(|e| fail(e.to_string()))?;
    tmp.write_all(&text).map_err(|e| fail(e.to_string()))?;
    tmp.as_file().sync_all().map_err(|e| fail(e.to_string()))?;
    tmp.persist(&path).map_err(|e| fail(e.error.to_string()))?;
    Ok(shown)
}

/// Checks `code` against the file in `data_dir`: the same code, not
/// expired. Anything else (no file, a damaged one) is refused.
pub fn check(data_dir: &Path, code: &str) -> Result<Checked, EnrolError> {
    if normalise(code).is_empty() {
        return Err(EnrolError::Missing);
    }
    let wanted = digest(code);
    let ok = read(data_dir).is_some_and(|s| {
        s.expires_at_ms > now_ms() && s.sha256.len() == wanted.len() && s.sha256 == wanted
    });
    if ok {
        Ok(Checked { digest: wanted })
    } else {
        tracing::warn!("a wrong, expired or spent passkey enrolment code was refused");
        Err(EnrolError::Refused)
    }
}

/// Whether `checked` is still the code in force (not spent, replaced or
/// expired since it was checked).
pub fn still(data_dir: &Path, checked: &Checked) -> bool {
    read(data_dir).is_some_and(|s| s.expires_at_ms > now_ms() && s.sha256 == checked.digest)
}

/// Spends the code in force: its file is removed (logged when it cannot
/// be: the code still cannot register a second passkey, since only the
/// first needs one).
pub fn spend(data_dir: &Path) {
    let path = file(data_dir);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::error!(file = %path.display(), error = %e, "cannot remove the spent passkey enrolment code's file");
        }
    }
}

fn read(data_dir: &Path) -> Option<Stored> {
    let path = file(data_dir);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::error!(file = %path.display(), error = %e, "cannot read the passkey enrolment code's file");
            return None;
        }
    };
    match serde_json::from_slice(&text) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::error!(file = %path.display(), error = %e, "the passkey enrolment code's file is damaged");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_is_accepted_as_typed_until_spent_and_no_other_is() {
        let dir = tempfile::tempdir().expect("dir");
        assert!(matches!(check(dir.path(), "ABC"), Err(EnrolError::Refused)));
        assert!(matches!(check(dir.path(), " - "), Err(EnrolError::Missing)));
        let code = make(dir.path()).expect("made");
        assert_eq!(code.len(), CODE_CHARS + 3, "{code}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(file(dir.path()))
            .expect("file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "owner-only: {mode:o}");
        let text = std::fs::read_to_string(file(dir.path())).expect("read");
        assert!(!text.contains(&normalise(&code)), "only its digest is kept");
        let checked = check(dir.path(), &code.to_lowercase().replace('-', " ")).expect("ok");
        assert!(still(dir.path(), &checked));
        assert!(check(dir.path(), "0000-0000-0000-0000-0000").is_err());
        // A new code replaces the old one.
        let newer = make(dir.path()).expect("made");
        assert_ne!(newer, code);
        assert!(!still(dir.path(), &checked));
        assert!(check(dir.path(), &code).is_err());
        spend(dir.path());
        assert!(check(dir.path(), &newer).is_err());
    }

    #[test]
    fn an_expired_or_damaged_file_refuses_every_code() {
        let dir = tempfile::tempdir().expect("dir");
        let code = make(dir.path()).expect("made");
        let stored = Stored {
            sha256: digest(&code),
            expires_at_ms: now_ms() - 1,
        };
        std::fs::write(file(dir.path()), serde_json::to_vec(&stored).expect("json"))
            .expect("write");
        assert!(check(dir.path(), &code).is_err());
        std::fs::write(file(dir.path()), b"{").expect("write");
        assert!(check(dir.path(), &code).is_err());
    }
}
