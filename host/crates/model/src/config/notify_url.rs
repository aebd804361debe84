//! Where a session's webhook (`notifyUrl`, chosen by the agent) may point:
//! the operator's `[daemon] notify_url_prefixes`, compared as parsed URLs.
//!
//! A URL is admitted only when its scheme, host and port equal a prefix's
//! and the prefix's path segments are the first segments of its path. A
//! string prefix is not enough: `…/hooks/../admin` starts with `…/hooks/`
//! but is posted to `/admin` (the URL parser, like every HTTP client and
//! server, resolves dot segments, and many servers decode `%2e`, `%2f`,
//! `%5c` before routing; Tomcat reads `..;` as `..`; many collapse `//`).
//! So before comparing, the raw text is refused if its path has a `.` or
//! `..` segment (or one of dots only), an empty segment (`//`), a `;` (a
//! path parameter) in any segment, a percent-encoded `.`, `/`, `\`, `%`,
//! `;`, control character or non-ASCII byte (`%2e`, `%2f`, `%5c`, `%25`,
//! `%3b`, `%00`, `%c0%ae`, any case: a double encoding is one decode away
//! from the others), a `%` not followed by two hex digits (`%u002e`), a
//! non-ASCII character, and anywhere a backslash, whitespace or a control
//! character (the parser drops tabs and newlines, which would join `.\t.`
//! into `..`), or userinfo (`user:pass@`). Each refusal names what it
//! refused. The prefixes themselves are
//! checked alike when the configuration loads. This module must never
//! admit a URL whose path the parser would change.

use reqwest::Url;
use std::fmt;

/// One of `[daemon] notify_url_prefixes`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyPrefix {
    text: String,
    scheme: String,
    host: String,
    port: Option<u16>,
    segments: Vec<String>,
    /// The prefix ended with `/`: a URL must go below it.
    dir: bool,
}

impl fmt::Display for NotifyPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The parts of a URL that are compared, after the raw text passed.
struct Checked {
    url: Url,
    segments: Vec<String>,
}

/// What follows `http://` or `https://` (any case).
fn after_scheme(raw: &str) -> Option<&str> {
    let (scheme, rest) = raw.split_once("://")?;
    (scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")).then_some(rest)
}

/// What a server may decode before routing, by the byte a `%XX` escape
/// stands for: why it is refused, or `None` for a byte that is kept.
fn encoded_refusal(byte: u8) -> Option<&'static str> {
    match byte {
        b'.' => Some("an encoded '.' (servers decode it into a dot segment)"),
        b'/' => Some("an encoded '/' (servers decode it into a segment break)"),
        b'\\' => Some("an encoded '\\' (servers read it as '/')"),
        b'%' => Some("an encoded '%' (one decode away from the others)"),
        b';' => Some("an encoded ';' (a path parameter once decoded)"),
        0x00..=0x1f | 0x7f => Some("an encoded control character (NUL included)"),
        0x80.. => Some(
            "an encoded non-ASCII byte (an overlong '.' such as %c0%ae, or a fullwidth one, once decoded)",
        ),
        _ => None,
    }
}

/// Why the path `path` (as written, before the query) could be moved by a
/// server that normalises it, or `None` when nothing in it can be: a `.`
/// or `..` segment (or one of dots only), an empty segment (`//`), a `;`
/// path parameter (`..;` is `..` to Tomcat), a percent escape of a byte
/// [`encoded_refusal`] refuses or one that is not two hex digits (`%u002e`
/// is a '.' to IIS), or a non-ASCII character.
fn path_refusal(path: &str) -> Option<String> {
    if path.contains("//") {
        return Some(
            "its path must not contain an empty segment ('//'): servers collapse it".into(),
        );
    }
    if let Some(c) = path.chars().find(|c| !c.is_ascii()) {
        return Some(format!(
            "its path must not contain the non-ASCII character {c:?} (servers may fold it into '.' or '/')"
        ));
    }
    for segment in path.split('/') {
        if segment == "." || segment == ".." {
            return Some("its path must not contain a '.' or '..' segment".into());
        }
        if !segment.is_empty() && segment.bytes().all(|b| b == b'.') {
            return Some(format!(
                "its path must not contain the segment {segment:?} (dots only: some servers trim it to '..')"
            ));
        }
        if segment.contains(';') {
            return Some(format!(
                "its path must not contain ';' (in the segment {segment:?}): a path parameter, which servers such as Tomcat drop ('..;' is '..')"
            ));
        }
        let bytes = segment.as_bytes();
        for (i, _) in segment.match_indices('%') {
            let hex = bytes
                .get(i + 1..i + 3)
                .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            let escape = segment.get(i..(i + 3).min(segment.len())).unwrap_or("%");
            match hex {
                None => {
                    return Some(format!(
                        "its path must not contain {escape:?}: a '%' not followed by two hex digits (%u002e is a '.' to some servers)"
                    ));
                }
                Some(b) => {
                    if let Some(why) = encoded_refusal(b) {
                        return Some(format!("its path must not contain {escape}: {why}"));
                    }
                }
            }
        }
    }
    None
}

/// Parses `raw` and refuses what could move its path once sent.
fn check(raw: &str) -> Result<Checked, String> {
    if let Some(c) = raw
        .chars()
        .find(|c| c.is_control() || c.is_whitespace() || *c == '\\')
    {
        return Err(format!("must not contain {c:?}"));
    }
    let rest = after_scheme(raw).ok_or("must be an http:// or https:// URL")?;
    // With no backslash or control character, the parser ends the
    // authority and the path where this does.
    let path_start = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let after = &rest[path_start..];
    let path = &after[..after.find(['?', '#']).unwrap_or(after.len())];
    if let Some(why) = path_refusal(path) {
        return Err(why);
    }
    let url = Url::parse(raw).map_err(|e| format!("is not a URL: {e}"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry a user name or password".into());
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".into());
    }
    let segments = url
        .path_segments()
        .map(|s| s.map(str::to_string).collect())
        .unwrap_or_default();
    Ok(Checked { url, segments })
}

impl NotifyPrefix {
    /// Parses a configured prefix, refusing what [`admit`] would refuse
    /// in a URL, and a query or fragment (a prefix is a place, not a
    /// request). The host must be ended by `/` (a bare
    /// `https://hooks.example` reads as a string prefix of
    /// `https://hooks.example.evil`, whatever this module does).
    pub fn parse(text: &str) -> Result<Self, String> {
        let Checked { url, mut segments } = check(text)?;
        if !after_scheme(text).is_some_and(|rest| rest.contains('/')) {
            return Err(
                "must end its host with '/' (for example https://hooks.example/gatehost/)".into(),
            );
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err("must not have a query or fragment".into());
        }
        // "/gatehost/" is the segments ["gatehost", ""]: a directory,
        // whose URLs have at least one segment more ("/gatehost" is not
        // under it).
        let dir = segments.last().is_some_and(String::is_empty);
        if dir {
            segments.pop();
        }
        Ok(NotifyPrefix {
            text: text.to_string(),
            scheme: url.scheme().to_string(),
            host: url.host_str().unwrap_or_default().to_string(),
            port: url.port_or_known_default(),
            segments,
            dir,
        })
    }

    fn admits(&self, url: &Url, segments: &[String]) -> bool {
        url.scheme() == self.scheme
            && url.host_str() == Some(self.host.as_str())
            && url.port_or_known_default() == self.port
            && segments.starts_with(&self.segments)
            && (!self.dir || segments.len() > self.segments.len())
    }
}

/// The URL a session's `notifyUrl` stands for, if one of `prefixes`
/// admits it (as the parser writes it: the text that is stored and
/// posted to is the text that was compared).
pub fn admit(raw: &str, prefixes: &[NotifyPrefix]) -> Result<String, String> {
    if prefixes.is_empty() {
        return Err("session webhooks are off on this daemon (the operator lists allowed URLs in [daemon] notify_url_prefixes)".into());
    }
    let Checked { url, segments } = check(raw)?;
    if !prefixes.iter().any(|p| p.admits(&url, &segments)) {
        let listed: Vec<&str> = prefixes.iter().map(|p| p.text.as_str()).collect();
        return Err(format!(
            "must be under one of: {} (same scheme, host and port, below its path)",
            listed.join(", ")
        ));
    }
    Ok(url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefixes() -> Vec<NotifyPrefix> {
        vec![NotifyPrefix::parse("https://hooks.example/hooks/").expect("prefix")]
    }

    #[test]
    fn hostile_urls_escaping_the_prefix_are_refused() {
        let p = prefixes();
        for url in [
            "https://hooks.example/hooks/../admin/delete?all=1",
            "https://hooks.example/hooks/%2e%2e/admin2",
            "https://hooks.example/hooks/%2E%2E/admin2",
            "https://hooks.example/hooks/.%2e/admin",
            "https://hooks.example/hooks/%2e./admin",
            "https://hooks.example/hooks/./../admin",
            "https://hooks.example/hooks/..",
            "https://hooks.example/hooks/..?x=1",
            "https://hooks.example/hooks/..#f",
            "https://hooks.example/hooks/x%2f..%2fadmin",
            "https://hooks.example/hooks/x%2F..%2Fadmin",
            "https://hooks.example/hooks/..%5cadmin",
            "https://hooks.example/hooks/..\\admin",
            "https://hooks.example/hooks\\..\\admin",
            "https://hooks.example/hooks/%252e%252e/admin",
            "https://hooks.example/hooks/.\t./admin",
            "https://hooks.example/hooks/.\n./admin",
            "https://hooks.example/hooks/. ./admin",
            "https://user:pw@hooks.example/hooks/x",
            "https://hooks.example@evil.example/hooks/x",
            "https://hooks.example.evil/hooks/x",
            "https://hooks.example:8443/hooks/x",
            "http://hooks.example/hooks/x",
            "https://hooks.example/hooksx/y",
            "https://hooks.example/hooks",
            "https://hooks.example/other/hooks/x",
            "file:///etc/passwd",
            "HTTPS://hooks.example/hooks/../admin",
            "https:/hooks.example/hooks/x",
            "",
        ] {
            assert!(admit(url, &p).is_err(), "{url:?} was admitted");
        }
    }

    /// Each form a server may normalise, refused with a reason naming what
    /// was refused (the reason is what the agent reads).
    #[test]
    fn every_form_a_server_may_normalise_is_refused_with_a_reason_naming_it() {
        let p = prefixes();
        for (url, named) in [
            ("https://hooks.example/hooks/..;/admin", "';'"),
            ("https://hooks.example/hooks/x/..;/..;/admin", "..;"),
            ("https://hooks.example/hooks/.;/x", "';'"),
            ("https://hooks.example/hooks/x;jsessionid=1", "';'"),
            ("https://hooks.example/hooks;x/y", "';'"),
            ("https://hooks.example/hooks//admin", "'//'"),
            ("https://hooks.example/hooks/x//", "'//'"),
            ("https://hooks.example//hooks/x", "'//'"),
            ("https://hooks.example/hooks/./x", "'.' or '..' segment"),
            ("https://hooks.example/hooks/../x", "'.' or '..' segment"),
            ("https://hooks.example/hooks/.../x", "\"...\""),
            ("https://hooks.example/hooks/%2e/x", "%2e"),
            ("https://hooks.example/hooks/%2E/x", "%2E"),
            ("https://hooks.example/hooks/%2e%2e/x", "%2e"),
            ("https://hooks.example/hooks/.%2e/x", "%2e"),
            ("https://hooks.example/hooks/%2e./x", "%2e"),
            ("https://hooks.example/hooks/x%2fy", "%2f"),
            ("https://hooks.example/hooks/x%2Fy", "%2F"),
            ("https://hooks.example/hooks/x%5cy", "%5c"),
            ("https://hooks.example/hooks/x%5Cy", "%5C"),
            ("https://hooks.example/hooks/x\\y", "'\\\\'"),
            ("https://hooks.example/hooks/x%3by", "%3b"),
            ("https://hooks.example/hooks/x%253b", "%25"),
            ("https://hooks.example/hooks/x%00y", "%00"),
            ("https://hooks.example/hooks/x%0ay", "%0a"),
            ("https://hooks.example/hooks/x%7fy", "%7f"),
            ("https://hooks.example/hooks/x\0y", "'\\0'"),
            ("https://hooks.example/hooks/x\u{1}y", "'\\u{1}'"),
            ("https://hooks.example/hooks/%c0%ae%c0%ae/x", "%c0"),
            ("https://hooks.example/hooks/%u002e%u002e/x", "%u0"),
            ("https://hooks.example/hooks/x%2", "%2"),
            ("https://hooks.example/hooks/x%", "'%'"),
            (
                "https://hooks.example/hooks/\u{ff0e}\u{ff0e}/x",
                "non-ASCII",
            ),
        ] {
            let err = admit(url, &p).expect_err(url);
            assert!(
                err.contains(named),
                "{url:?}: {err:?} does not name {named:?}"
            );
        }
        // A prefix is checked alike.
        for (prefix, named) in [
            ("https://hooks.example/hooks;x/", "';'"),
            ("https://hooks.example//hooks/", "'//'"),
            ("https://hooks.example/%3b/", "%3b"),
        ] {
            let err = NotifyPrefix::parse(prefix).expect_err(prefix);
            assert!(
                err.contains(named),
                "{prefix:?}: {err:?} does not name {named:?}"
            );
        }
    }

    #[test]
    fn urls_under_the_prefix_are_admitted_as_the_parser_writes_them() {
        let p = prefixes();
        for (url, stored) in [
            (
                "https://hooks.example/hooks/s1",
                "https://hooks.example/hooks/s1",
            ),
            (
                "https://HOOKS.example:443/hooks/a/b?session=1",
                "https://hooks.example/hooks/a/b?session=1",
            ),
            (
                "https://hooks.example/hooks/",
                "https://hooks.example/hooks/",
            ),
            (
                "HTTPS://hooks.example/hooks/x",
                "https://hooks.example/hooks/x",
            ),
            (
                "https://hooks.example/hooks/a..b/.x",
                "https://hooks.example/hooks/a..b/.x",
            ),
            (
                "https://hooks.example/hooks/a%20b/x/?q=a;b//c",
                "https://hooks.example/hooks/a%20b/x/?q=a;b//c",
            ),
        ] {
            assert_eq!(admit(url, &p).as_deref(), Ok(stored), "{url}");
        }
        let no_slash = [NotifyPrefix::parse("https://hooks.example/hooks").expect("prefix")];
        assert!(admit("https://hooks.example/hooks/x", &no_slash).is_ok());
        assert!(admit("https://hooks.example/hooksx", &no_slash).is_err());
        let root = [NotifyPrefix::parse("http://127.0.0.1:9/").expect("prefix")];
        assert!(admit("http://127.0.0.1:9/anything", &root).is_ok());
        assert!(admit("http://127.0.0.1:90/anything", &root).is_err());
        assert!(admit("http://127.0.0.1/anything", &root).is_err());
    }

    #[test]
    fn no_prefix_admits_nothing() {
        let err = admit("https://hooks.example/hooks/x", &[]).unwrap_err();
        assert!(err.contains("notify_url_prefixes"), "{err}");
    }

    #[test]
    fn hostile_prefixes_are_refused_at_load() {
        for p in [
            "https://hooks.example",
            "hooks.example/",
            "ftp://hooks.example/",
            "https://hooks.example/hooks/../admin/",
            "https://hooks.example/%2e%2e/",
            "https://hooks.example/a%2fb/",
            "https://u:p@hooks.example/",
            "https://hooks.example/?x=1",
            "https://hooks.example/#f",
            "https://hooks.example/a b/",
        ] {
            assert!(NotifyPrefix::parse(p).is_err(), "{p:?} was accepted");
        }
    }
}
