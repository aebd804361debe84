//! "Did you mean": the known name nearest to a misspelt one, for error
//! messages about gate files, the host configuration and API bodies. It
//! owns only the comparison (Jaro-Winkler, from `strsim`) and reading the
//! names out of serde's "unknown field" messages; it must never decide
//! whether a name is valid.

use regex::Regex;
use std::sync::LazyLock;

/// How alike two names must be to be suggested (Jaro-Winkler, 0 to 1).
const MIN_SIMILARITY: f64 = 0.8;

/// The known name most like `unknown`, if one is alike enough.
pub fn nearest<'a>(unknown: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let unknown = unknown.to_ascii_lowercase();
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(&unknown, &k.to_ascii_lowercase()), k))
        .filter(|(score, _)| *score >= MIN_SIMILARITY)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

static UNKNOWN: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"unknown (?:field|variant) `([^`]*)`, expected (.*)").ok());
static QUOTED: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"`([^`]*)`").ok());

/// The unknown name in serde's "unknown field `comand`, expected one of
/// `command`, …" message and the known name nearest to it, if one is near.
pub fn unknown_and_nearest(message: &str) -> Option<(String, Option<String>)> {
    let (unknown, quoted) = (UNKNOWN.as_ref()?, QUOTED.as_ref()?);
    let caps = unknown.captures(message)?;
    let (name, rest) = (caps.get(1)?, caps.get(2)?);
    let known: Vec<&str> = quoted
        .captures_iter(rest.as_str())
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect();
    Some((
        name.as_str().to_string(),
        nearest(name.as_str(), known).map(str::to_string),
    ))
}

/// serde's "unknown field `comand`, expected one of `command`, …" message
/// with " (did you mean `command`?)" added when a name is near; any other
/// message as it is.
pub fn with_suggestion(message: &str) -> String {
    if message.contains("did you mean") {
        return message.to_string();
    }
    match unknown_and_nearest(message) {
        Some((_, Some(k))) => format!("{message} (did you mean `{k}`?)"),
        _ => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_names_are_suggested_and_far_ones_are_not() {
        let known = ["command", "judge", "wasm"];
        assert_eq!(nearest("comand", known), Some("command"));
        assert_eq!(nearest("Judg", known), Some("judge"));
        assert_eq!(nearest("wsam", known), Some("wasm"));
        assert_eq!(nearest("timeout", known), None);
        assert_eq!(nearest("x", known), None);
    }

    #[test]
    fn serde_messages_get_the_nearest_name() {
        let m = "unknown field `timeoutMS`, expected one of `command`, `args`, `timeoutMs`";
        assert_eq!(
            with_suggestion(m),
            format!("{m} (did you mean `timeoutMs`?)")
        );
        let m = "unknown variant `turn-ended`, expected one of `turn-start`, `turn-end`";
        assert!(with_suggestion(m).ends_with("(did you mean `turn-end`?)"));
        let m = "unknown field `zzz`, expected `approve`";
        assert_eq!(with_suggestion(m), m);
        let m = "missing field `cwd`";
        assert_eq!(with_suggestion(m), m);
        let once = with_suggestion("unknown field `comand`, expected `command`");
        assert_eq!(with_suggestion(&once), once);
    }
}
