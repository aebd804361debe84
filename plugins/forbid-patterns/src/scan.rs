//! Finding a rule's matches in a file, fast inside WebAssembly.
//!
//! The regex crate picks its fastest literal searches (Teddy, for a handful
//! of literals) only on x86_64 and aarch64. Inside a WASI component a
//! pattern such as `dbg!\(|FIXME[0-9]+` is therefore run through a lazy DFA
//! byte by byte, several nanoseconds a byte: most of a scan's time. What
//! this module does instead, when the pattern allows it: every match of a
//! pattern starts with one of a few literals (`dbg!(`, `FIXME`), found by
//! regex-syntax's literal extractor; each literal is searched with
//! `memchr::memmem` (SIMD with `simd128`), and the regex is run *anchored*
//! at each place a literal starts, so it looks only at the bytes of a
//! candidate match.
//!
//! It must find exactly what `Regex::find_iter` finds (leftmost-first,
//! non-overlapping, the same starts): a pattern whose prefixes are not a
//! small finite set of non-empty literals is searched the plain way. The
//! unit tests compare both on many patterns and texts.

use memchr::memmem;
use regex_automata::meta::Regex;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input};
use regex_syntax::hir::literal::{ExtractKind, Extractor};

/// More literals than this and separate `memmem` passes cost more than the
/// lazy DFA they replace.
const MAX_LITERALS: usize = 6;
/// The largest character class that the literal extractor expands.
const MAX_CLASS: usize = 3;

/// A compiled pattern and, where it has one, its set of starting literals.
pub struct Matcher {
    regex: Regex,
    literals: Option<Vec<memmem::Finder<'static>>>,
}

impl Matcher {
    /// Compiles `pattern` with `^`/`$` matching at line boundaries.
    pub fn new(pattern: &str) -> Result<Matcher, String> {
        let config = syntax::Config::new().multi_line(true);
        let regex = Regex::builder()
            .syntax(config)
            .build(pattern)
            .map_err(|e| e.to_string())?;
        let hir = regex_syntax::ParserBuilder::new()
            .multi_line(true)
            .build()
            .parse(pattern)
            .map_err(|e| e.to_string())?;
        // Classes of more than a few characters end a literal (`FIXME[0-9]`
        // gives `FIXME`, not ten literals).
        let seq = Extractor::new()
            .kind(ExtractKind::Prefix)
            .limit_class(MAX_CLASS)
            .extract(&hir);
        let literals = seq.literals().and_then(|lits| {
            let usable = !lits.is_empty()
                && lits.len() <= MAX_LITERALS
                && lits.iter().all(|l| !l.as_bytes().is_empty());
            usable.then(|| {
                lits.iter()
                    .map(|l| memmem::Finder::new(l.as_bytes()).into_owned())
                    .collect()
            })
        });
        Ok(Matcher { regex, literals })
    }

    /// Whether matches are found through the literal prefilter.
    #[cfg(test)]
    fn uses_literals(&self) -> bool {
        self.literals.is_some()
    }

    /// The start offsets of the leftmost-first, non-overlapping matches in
    /// `bytes` (searched as bytes, as ripgrep does: nothing is copied or
    /// validated first; an invalid UTF-8 sequence matches no character).
    pub fn match_starts(&self, bytes: &[u8]) -> Vec<usize> {
        let Some(finders) = &self.literals else {
            return self.regex.find_iter(bytes).map(|m| m.start()).collect();
        };
        // A literal is valid UTF-8 and starts where a match starts, so its
        // first byte is never a continuation byte: every candidate is on a
        // character boundary.
        let mut candidates: Vec<usize> =
            finders.iter().flat_map(|f| overlapping(f, bytes)).collect();
        if candidates.is_empty() {
            return Vec::new();
        }
        candidates.sort_unstable();
        candidates.dedup();
        let mut starts = Vec::new();
        let mut resume = 0;
        for at in candidates {
            if at < resume {
                continue;
            }
            let input = Input::new(bytes).range(at..).anchored(Anchored::Yes);
            if let Some(m) = self.regex.search(&input) {
                starts.push(m.start());
                // Literals are non-empty, so a match is never empty and the
                // next one starts at or after its end.
                resume = m.end();
            }
        }
        starts
    }
}

/// Every place `finder`'s literal starts, overlaps included (`aba` twice
/// in `ababa`: `find_iter` would report it once).
fn overlapping<'a>(
    finder: &'a memmem::Finder<'_>,
    bytes: &'a [u8],
) -> impl Iterator<Item = usize> + 'a {
    let mut from = 0;
    std::iter::from_fn(move || {
        let at = from + finder.find(bytes.get(from..)?)?;
        from = at + 1;
        Some(at)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(pattern: &str, text: &str) -> Vec<usize> {
        regex::RegexBuilder::new(pattern)
            .multi_line(true)
            .build()
            .expect("pattern")
            .find_iter(text)
            .map(|m| m.start())
            .collect()
    }

    fn plain_bytes(pattern: &str, bytes: &[u8]) -> Vec<usize> {
        regex::bytes::RegexBuilder::new(pattern)
            .multi_line(true)
            .build()
            .expect("pattern")
            .find_iter(bytes)
            .map(|m| m.start())
            .collect()
    }

    const TEXTS: &[&str] = &[
        "",
        "fn main() { dbg!(x); }\n// FIXME12 and FIXME\nTODO: later\nTODO(#12): ok\n",
        "dbg!(dbg!(1))dbg!(",
        "aaaa aaa aa a\nab abab aba\n",
        "FIXME1FIXME2 FIXMEX FIXME\n  FIXME99\n",
        "é dbg!( ü TODO — FIXME7 😀 secret_key = \"AKIAABCDEFGHIJKLMNOP\"\n",
        "password=hunter2\nPASSWORD = x\napi_key: 'k'\n",
        "line\n\nline2\r\nend",
        "\u{1F600}\u{1F600}ab\u{1F600}",
    ];

    const PATTERNS: &[&str] = &[
        r"dbg!\(",
        r"dbg!\(|FIXME[0-9]+",
        r"FIXME[0-9]*",
        r"TODO(?!\()",
        r"TODO[^(]",
        r"^TODO",
        r"TODO$",
        r"\bFIXME\b",
        r"(?i)todo",
        r"(?i)password\s*=",
        r"AKIA[0-9A-Z]{16}",
        r"a+",
        r"ab|aba|abab",
        r"(ab)+",
        r"a*",
        r"x?",
        r"[a-z]+_key\s*[:=]",
        r"😀a?",
        r"é|ü",
        r"\n\n",
        r"^$",
    ];

    #[test]
    fn finds_exactly_what_find_iter_finds() {
        for pattern in PATTERNS {
            let Ok(m) = Matcher::new(pattern) else {
                // Look-around is not supported by the regex crate either.
                assert!(regex::Regex::new(pattern).is_err(), "{pattern}");
                continue;
            };
            for text in TEXTS {
                assert_eq!(
                    m.match_starts(text.as_bytes()),
                    plain(pattern, text),
                    "pattern {pattern:?} text {text:?}"
                );
            }
        }
    }

    #[test]
    fn invalid_utf8_is_searched_like_regex_bytes() {
        let texts: &[&[u8]] = &[
            b"dbg!(\xff\xfe) FIXME9 \xc3 dbg!(",
            b"\xff\xffdbg!(\x80FIXME1\n\xe2\x82TODO x",
            b"\xf0\x9f\x98FIXME\xf0\x9f\x98\x80dbg!(",
        ];
        for pattern in [
            r"dbg!\(",
            r"dbg!\(|FIXME[0-9]+",
            r"FIXME.",
            r"\bTODO\b",
            r"(?i)todo",
        ] {
            let m = Matcher::new(pattern).expect("pattern");
            for text in texts {
                assert_eq!(
                    m.match_starts(text),
                    plain_bytes(pattern, text),
                    "pattern {pattern:?} text {text:?}"
                );
            }
        }
    }

    #[test]
    fn literal_patterns_take_the_fast_path_and_others_do_not() {
        for fast in [
            r"dbg!\(",
            r"dbg!\(|FIXME[0-9]+",
            r"AKIA[0-9A-Z]{16}",
            r"TODO[^(]",
        ] {
            assert!(
                Matcher::new(fast).expect("pattern").uses_literals(),
                "{fast}"
            );
        }
        // Can match empty, or starts with a class too large to list.
        for slow in [r"a*", r"x?", r"[a-z]+_key", r"\w+@\w+", r"^$"] {
            assert!(
                !Matcher::new(slow).expect("pattern").uses_literals(),
                "{slow}"
            );
        }
    }

    /// Patterns and texts put together from pieces that overlap in tricky
    /// ways (repeats, alternations sharing prefixes, line anchors, word
    /// boundaries, multi-byte characters), compared on every pair.
    #[test]
    fn generated_patterns_and_texts_agree() {
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let atoms = [
            "ab", "a", "b", "ba", "aba", "x", "é", "\\n", "\\b", "^", "$", "[0-9]", "\\s*",
            "(?:ab|a)", "(?:b|ba)", "c+", "a?", "[ab]", "\\w", ".",
        ];
        let pieces = [
            "a", "b", "ab", "ba", "c", "x", "é", "1", "\n", " ", "abab", "\r\n",
        ];
        let mut checked_fast = 0;
        for _ in 0..400 {
            let mut pattern = String::new();
            for _ in 0..1 + next(4) {
                pattern.push_str(atoms[next(atoms.len())]);
            }
            if next(3) == 0 {
                pattern = format!("{pattern}|{}", atoms[next(atoms.len())]);
            }
            let m = Matcher::new(&pattern).expect("pattern");
            checked_fast += usize::from(m.uses_literals());
            for _ in 0..20 {
                let text: String = (0..next(40)).map(|_| pieces[next(pieces.len())]).collect();
                assert_eq!(
                    m.match_starts(text.as_bytes()),
                    plain(&pattern, &text),
                    "pattern {pattern:?} text {text:?}"
                );
            }
        }
        assert!(
            checked_fast > 50,
            "only {checked_fast} patterns took the fast path"
        );
    }

    #[test]
    fn long_generated_text_agrees() {
        let mut text = String::new();
        for i in 0..2000 {
            text.push_str(&format!("pub fn f_{i}(x: u32) -> u32 {{ x + {i} }}\n"));
            if i % 97 == 0 {
                text.push_str("    dbg!(x); // FIXME42\n");
            }
            if i % 131 == 0 {
                text.push_str("FIXMEFIXME7dbg!(dbg!(\n");
            }
        }
        for pattern in [r"dbg!\(|FIXME[0-9]+", r"FIXME[0-9]+", r"\bdbg!\(x\)"] {
            let m = Matcher::new(pattern).expect("pattern");
            let found = m.match_starts(text.as_bytes());
            assert!(!found.is_empty());
            assert_eq!(found, plain(pattern, &text), "{pattern}");
        }
    }
}
