//! Whether `hook install claude` may write `"onFailure": "block"` on the
//! stop hooks: Claude Code 2.1.295 and later make a hook that crashes or
//! times out block the stop (fail closed); older versions reject the
//! unknown key. It owns finding every `claude` on the installer's PATH and
//! reading its `--version` (bounded), and the decision, which is pure
//! ([`decide`]). It must never write a file.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A version, `major.minor.patch`.
pub(crate) type Version = (u64, u64, u64);

/// A `claude` found on PATH, and the version it told (if it did).
pub(crate) type Found = (PathBuf, Option<Version>);

/// The first Claude Code that reads `onFailure`.
pub(crate) const SINCE: Version = (2, 1, 295);

/// How long one `claude --version` may take.
const PROBE: Duration = Duration::from_secs(10);

/// `2.1.332` from `claude --version`'s `2.1.332 (Claude Code)`.
pub(crate) fn parse_version(text: &str) -> Option<Version> {
    let word = text.split_whitespace().next()?;
    let mut parts = word.split('.').map(|p| p.parse::<u64>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

/// Every distinct `claude` on `path` (a `PATH` value) and its version, if
/// it told one.
pub(crate) fn claudes_on(path: &std::ffi::OsStr) -> Vec<Found> {
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut out = Vec::new();
    for dir in std::env::split_paths(path) {
        let candidate = dir.join("claude");
        let Ok(real) = std::fs::canonicalize(&candidate) else {
            continue;
        };
        if !real.is_file() || seen.contains(&real) {
            continue;
        }
        seen.push(real);
        let version = version_of(&candidate);
        out.push((candidate, version));
    }
    out
}

fn version_of(program: &Path) -> Option<Version> {
    let mut child = std::process::Command::new(program)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < PROBE => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut text = String::new();
    use std::io::Read;
    child.stdout.take()?.read_to_string(&mut text).ok()?;
    parse_version(&text)
}

/// `Ok(what to say)` when every `claude` found reads `onFailure`;
/// `Err(the warning)` otherwise (none found, one too old, one that told no
/// version). Pure.
pub(crate) fn decide(found: &[Found]) -> Result<String, String> {
    let show = |v: &Option<Version>| match v {
        Some((a, b, c)) => format!("{a}.{b}.{c}"),
        None => "no version".into(),
    };
    let list = found
        .iter()
        .map(|(p, v)| format!("{} ({})", p.display(), show(v)))
        .collect::<Vec<_>>()
        .join(", ");
    let since = format!("{}.{}.{}", SINCE.0, SINCE.1, SINCE.2);
    if found.is_empty() {
        return Err(format!(
            "no `claude` on PATH: onFailure is not written (Claude Code before {since} rejects it), so a crash or timeout of the hook lets the stop through"
        ));
    }
    if found.iter().all(|(_, v)| v.is_some_and(|v| v >= SINCE)) {
        Ok(format!(
            "onFailure: block on Stop and SubagentStop (a crash or timeout of the hook blocks the stop): every claude on PATH is {since} or later: {list}"
        ))
    } else {
        Err(format!(
            "a claude on PATH is older than {since} or told no version ({list}): onFailure is not written, so a crash or timeout of the hook lets the stop through"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_and_only_all_recent_claudes_get_on_failure() {
        assert_eq!(parse_version("2.1.332 (Claude Code)\n"), Some((2, 1, 332)));
        assert_eq!(parse_version("2.1.295"), Some((2, 1, 295)));
        assert_eq!(parse_version("Claude Code"), None);
        assert_eq!(parse_version(""), None);
        let p = |s: &str| PathBuf::from(s);
        assert!(decide(&[]).is_err());
        assert!(decide(&[(p("/a/claude"), Some((2, 1, 295)))]).is_ok());
        assert!(
            decide(&[
                (p("/a/claude"), Some((2, 2, 0))),
                (p("/b/claude"), Some((3, 0, 0)))
            ])
            .is_ok()
        );
        let old = decide(&[
            (p("/a/claude"), Some((2, 1, 332))),
            (p("/b/claude"), Some((2, 1, 294))),
        ]);
        assert!(old.unwrap_err().contains("/b/claude (2.1.294)"));
        assert!(decide(&[(p("/a/claude"), None)]).is_err());
    }

    // `claudes_on` runs programs: tested whole in tests/hooks/install.rs
    // (a process spawned here would share the unit tests' cgroup).
}
