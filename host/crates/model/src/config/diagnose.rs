//! Where a TOML error in the host configuration points: its line and
//! column, and the dotted key (`daemon.max_gating`) when it names one, with
//! a "did you mean" for a misspelt key; an unknown top-level table
//! (`[sandox]`) or key is told apart as one, never as a key of the table
//! above it. It must never decide whether a
//! configuration is valid: that is `toml` and serde's, in `config`.

/// An unknown name at the top of the file: a table (`[sandox]`) or a key
/// (`limit.output_cap_bytes = 1` before any table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TopLevelUnknown {
    /// `table` or `key`.
    pub kind: &'static str,
    pub name: String,
    pub line: usize,
    /// The known top-level name nearest to it, if one is near.
    pub suggestion: Option<String>,
}

/// `; did you mean `name`?`, or nothing.
pub(super) fn did_you_mean(suggestion: &Option<String>) -> String {
    suggestion
        .as_ref()
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default()
}

/// Where a spanned key sits: in a `[table]` header, whose part before it
/// (`shell.` of `[shell.alow]`) is given, or in an assignment under the
/// nearest header above (none: the top of the file).
enum KeyPlace<'a> {
    Header(&'a str),
    Under(Option<&'a str>),
}

fn key_place(before: &str) -> KeyPlace<'_> {
    let line = before.rsplit('\n').next().unwrap_or_default().trim_start();
    if line.starts_with('[') {
        return KeyPlace::Header(line.trim_start_matches('[').trim());
    }
    KeyPlace::Under(before.lines().rev().find_map(|l| {
        let l = l.trim();
        (l.starts_with('[') && l.ends_with(']')).then(|| l.trim_matches(['[', ']']).trim())
    }))
}

/// The unknown top-level table or key a TOML error reports, if it is one
/// (an unknown name inside a known table is not: [`toml_key`] names it).
pub(super) fn top_level_unknown(text: &str, e: &toml::de::Error) -> Option<TopLevelUnknown> {
    let (name, suggestion) = crate::suggest::unknown_and_nearest(e.message().trim())?;
    let span = e.span()?;
    let before = text.get(..span.start)?;
    let kind = match key_place(before) {
        KeyPlace::Header("") => "table",
        KeyPlace::Under(None) => "key",
        _ => return None,
    };
    Some(TopLevelUnknown {
        kind,
        name,
        line: before.matches('\n').count() + 1,
        suggestion,
    })
}

/// A TOML error as one line: where (line and column, from its span) and
/// what, with a "did you mean" for a misspelt key.
pub(super) fn toml_message(text: &str, e: &toml::de::Error) -> String {
    let what = crate::suggest::with_suggestion(e.message().trim());
    let Some(span) = e.span() else {
        return what;
    };
    let before = text.get(..span.start).unwrap_or_default();
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    match toml_key(text, e) {
        Some(key) => format!("{key} (line {line}, column {column}): {what}"),
        None => format!("line {line}, column {column}: {what}"),
    }
}

/// The dotted key a TOML error points at (`daemon.foo`): the spanned key
/// under the nearest `[table]` header above it.
pub(super) fn toml_key(text: &str, e: &toml::de::Error) -> Option<String> {
    let span = e.span()?;
    let is_key = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    let before = text.get(..span.start)?;
    let spanned = text.get(span.clone())?.trim();
    // The span is the key itself (an unknown key), or a value: then the
    // key is the one its line assigns.
    let name = if is_key(spanned) && !spanned.chars().all(|c| c.is_ascii_digit()) {
        spanned
    } else {
        let line = before.rsplit('\n').next().unwrap_or_default();
        let (key, _) = line.split_once('=')?;
        let key = key.trim();
        if !is_key(key) {
            return None;
        }
        key
    };
    // A name in a header is a table: its path is the header's up to it
    // (`[shell.alow]`: `shell.alow`), never the table above it.
    Some(match key_place(before) {
        KeyPlace::Header(prefix) => format!("{prefix}{name}"),
        KeyPlace::Under(Some(t)) if !t.is_empty() => format!("{t}.{name}"),
        KeyPlace::Under(_) => name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> toml::de::Error {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Daemon {
            max_gating: Option<u32>,
        }
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct File {
            daemon: Option<Daemon>,
        }
        toml::from_str::<File>(text).expect_err("an error")
    }

    #[test]
    fn a_misspelt_key_is_located_named_and_corrected() {
        let text = "# gatehost\n[daemon]\nmax_gatin = 1\n";
        let e = error(text);
        assert_eq!(toml_key(text, &e).as_deref(), Some("daemon.max_gatin"));
        let m = toml_message(text, &e);
        assert!(
            m.starts_with("daemon.max_gatin (line 3, column 1): unknown field `max_gatin`"),
            "{m}"
        );
        assert!(m.ends_with("(did you mean `max_gating`?)"), "{m}");
    }

    #[test]
    fn a_bad_value_names_the_key_that_holds_it() {
        let text = "[daemon]\nmax_gating = \"two\"\n";
        let e = error(text);
        assert_eq!(toml_key(text, &e).as_deref(), Some("daemon.max_gating"));
        assert!(toml_message(text, &e).starts_with("daemon.max_gating (line 2, column 14): "));
    }

    #[test]
    fn a_syntax_error_has_a_place_but_no_key() {
        let text = "[daemon]\n= 1\n";
        let e = error(text);
        assert_eq!(toml_key(text, &e), None);
        assert!(
            toml_message(text, &e).starts_with("line 2"),
            "{}",
            toml_message(text, &e)
        );
    }
}
