//! Which changed files a reviewer sees collapsed at first: those a tool
//! writes (lockfiles), those copied in from elsewhere (vendored
//! dependencies) and minified sources. A pure function of the path; the
//! page still shows each such file's name, counts and why, and opens it on
//! a click.
//!
//! It owns the list; it must never read a file (a `.gitattributes`
//! `linguist-generated` is not read: the agent writes the snapshot's, and
//! what it marks generated would be collapsed by its own word).

/// Lockfiles by name, wherever they are.
const LOCKFILES: &[&str] = &[
    "Cargo.lock",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "bun.lockb",
    "poetry.lock",
    "Pipfile.lock",
    "uv.lock",
    "Gemfile.lock",
    "composer.lock",
    "go.sum",
    "flake.lock",
    "mix.lock",
    "pubspec.lock",
    "Package.resolved",
];

/// Directories of vendored code, at any depth.
const VENDORED: &[&str] = &["vendor", "node_modules", "third_party", "third-party"];

/// Why `path` (workspace-relative, `/`-separated) is collapsed at first,
/// or `None` when it is shown open.
pub fn generated(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    if LOCKFILES.contains(&name) {
        return Some("a lockfile");
    }
    let mut dirs = path.split('/');
    dirs.next_back();
    if dirs.any(|d| VENDORED.contains(&d)) {
        return Some("vendored");
    }
    let lower = name.to_ascii_lowercase();
    if [".min.js", ".min.css", ".min.mjs", ".map"]
        .iter()
        .any(|s| lower.ends_with(s))
    {
        return Some("minified");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::generated;

    #[test]
    fn lockfiles_vendored_and_minified_files_are_collapsed_and_code_is_not() {
        for (path, why) in [
            ("Cargo.lock", Some("a lockfile")),
            ("web/package-lock.json", Some("a lockfile")),
            ("go.sum", Some("a lockfile")),
            ("vendor/github.com/x/y.go", Some("vendored")),
            ("web/node_modules/left-pad/index.js", Some("vendored")),
            ("static/app.min.js", Some("minified")),
            ("static/app.JS.map", Some("minified")),
            ("src/lib.rs", None),
            ("vendor.rs", None),
            ("src/vendor", None),
            ("docs/Cargo.lock.md", None),
        ] {
            assert_eq!(generated(path), why, "{path}");
        }
    }
}
