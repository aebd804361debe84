//! The binary crate's shape, checked: no import cycle between its
//! top-level modules, none between sibling modules inside one (for example
//! `gate` and `engine`, `engine::machine` and `engine::sessions`), read
//! from the `crate::…` and `super::…` paths of `host/src`; the API's
//! client side importing nothing of the daemon's (`store`, `engine`,
//! `api`); no database driver named outside its store backend; and no
//! source file of any crate of `host/` over 700 lines. Between the crates
//! of `host/crates/` no check is needed: cargo refuses a cycle, and a
//! crate reaches only what its `Cargo.toml` names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file: `wasm/spare.rs` → `[wasm, spare]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// Module-to-module edges: `crate::a::b` from a file of module `m` is an
/// edge from `m` to the longest known module prefix of `a::b`; `super::x`
/// resolves against `m`'s parent.
fn edges() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(&src, f)).collect();
    let path_re = regex::Regex::new(r"\b(crate|super)((?:::[a-z_][a-z0-9_]*)+)").expect("regex");
    let mut out: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for f in &files {
        let me = module_of(&src, f);
        let text = std::fs::read_to_string(f).expect("read");
        // Unit tests inside a file may reach anywhere.
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        for c in path_re.captures_iter(text) {
            let mut target: Vec<String> = match &c[1] {
                "crate" => Vec::new(),
                _ => me[..me.len().saturating_sub(1)].to_vec(),
            };
            target.extend(
                c[2].split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            );
            while !target.is_empty() && !modules.contains(&target) {
                target.pop();
            }
            if !target.is_empty() && target != me {
                out.entry(me.clone()).or_default().insert(target);
            }
        }
    }
    out
}

/// A cycle in `graph`, if any (depth-first search).
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_import_cycle_between_top_level_modules() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in edges() {
        for to in tos {
            if from[0] != to[0] {
                graph
                    .entry(from[0].clone())
                    .or_default()
                    .insert(to[0].clone());
            }
        }
    }
    assert!(
        graph.contains_key("engine"),
        "the reader found no edges: {graph:?}"
    );
    assert_eq!(cycle(&graph), None, "an import cycle: {graph:#?}");
}

#[test]
fn no_import_cycle_between_sibling_modules() {
    // Siblings: modules with the same parent (a parent and its children
    // share items by design: `super::` from a child to its parent is not
    // a sibling edge).
    let mut by_parent: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, tos) in edges() {
        for to in tos {
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common < from.len() && common < to.len() {
                by_parent
                    .entry(from[..common].to_vec())
                    .or_default()
                    .entry(from[common].clone())
                    .or_default()
                    .insert(to[common].clone());
            }
        }
    }
    for (parent, graph) in by_parent {
        if parent.is_empty() {
            continue; // the top level, checked above
        }
        assert_eq!(
            cycle(&graph),
            None,
            "an import cycle inside {}: {graph:#?}",
            parent.join("::")
        );
    }
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let g = |edges: &[(&str, &str)]| {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            m.entry(a.to_string()).or_default().insert(b.to_string());
        }
        m
    };
    assert_eq!(cycle(&g(&[("a", "b"), ("b", "c")])), None);
    assert!(cycle(&g(&[("a", "b"), ("b", "a")])).is_some());
    assert!(cycle(&g(&[("a", "b"), ("b", "c"), ("c", "a")])).is_some());
}

/// No source file past what one person holds in mind (about 700 lines);
/// unit tests (`tests.rs` files) aside.
/// The modules of this crate on the API's client side: the command
/// line's client commands and renderers, and the MCP server (a client of
/// the API). The API's types and the typed client are gatehost-client's,
/// which depends on no daemon crate.
const CLIENT_SIDE: [&[&str]; 9] = [
    &["cli", "client"],
    &["cli", "client_args"],
    &["cli", "error"],
    &["cli", "render"],
    &["cli", "review"],
    &["cli", "routine"],
    &["cli", "standing"],
    &["cli", "ui"],
    &["mcp"],
];

/// The daemon's own modules, which the client side never imports: it
/// speaks the API's types only.
const DAEMON_SIDE: [&str; 3] = ["store", "engine", "api"];

/// The edges in `graph` from a client-side module (or one inside it, but
/// unit-test files) into the daemon's side.
fn client_imports_of_the_daemon(
    graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (from, tos) in graph {
        let test_file = from
            .last()
            .is_some_and(|m| m == "tests" || m.ends_with("_tests"));
        let client = CLIENT_SIDE
            .iter()
            .any(|c| from.starts_with(&c.iter().map(|s| s.to_string()).collect::<Vec<_>>()));
        if !client || test_file {
            continue;
        }
        for to in tos {
            if DAEMON_SIDE.contains(&to[0].as_str()) {
                out.push((from.join("::"), to.join("::")));
            }
        }
    }
    out
}

#[test]
fn the_client_side_depends_on_wire_not_on_the_daemon() {
    let graph = edges();
    assert!(
        graph.keys().any(|m| m.first().is_some_and(|f| f == "cli")),
        "the reader found no edge from the command line: {graph:?}"
    );
    let found = client_imports_of_the_daemon(&graph);
    assert!(
        found.is_empty(),
        "the API's client side imports the daemon's modules (it must use gatehost-client's `wire` only): {found:?}"
    );
}

#[test]
fn the_client_check_finds_an_import_of_the_daemon() {
    let edge = |from: &[&str], to: &[&str]| {
        let v = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        (v(from), BTreeSet::from([v(to)]))
    };
    for (from, to) in [
        (&["cli", "client"][..], &["store"][..]),
        (&["cli", "standing"], &["engine", "sessions"]),
        (&["cli", "ui"], &["api"]),
        (&["cli", "render"], &["engine", "chain"]),
        (&["mcp", "monitor"], &["store"]),
    ] {
        let graph = BTreeMap::from([edge(from, to)]);
        assert_eq!(
            client_imports_of_the_daemon(&graph),
            vec![(from.join("::"), to.join("::"))]
        );
    }
    // The daemon's side, other modules and unit-test files may.
    for (from, to) in [
        (&["api"][..], &["store"][..]),
        (&["cli", "serve"], &["engine"]),
        (&["mcp", "tests"], &["engine", "attach"]),
        (&["client"], &["wire"]),
    ] {
        let graph = BTreeMap::from([edge(from, to)]);
        assert_eq!(client_imports_of_the_daemon(&graph), vec![]);
    }
}

/// The sources of every crate of `host/`: its own `src/` and each
/// `crates/*/src/`.
fn all_sources() -> Vec<PathBuf> {
    let host = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&host.join("src"), &mut files);
    for entry in std::fs::read_dir(host.join("crates")).expect("read crates") {
        let src = entry.expect("entry").path().join("src");
        if src.is_dir() {
            sources(&src, &mut files);
        }
    }
    files
}

#[test]
fn no_source_file_is_over_700_lines() {
    let files = all_sources();
    let long: Vec<String> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "tests.rs"))
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).expect("read").lines().count();
            (n > 700).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(files.len() > 50, "the reader found no sources");
    assert!(long.is_empty(), "split these: {long:?}");
}

/// The crate's doc lists every top-level module (`- [`name`]: …`), and
/// every module has a doc comment saying what it owns.
#[test]
fn every_top_level_module_is_listed_and_documented() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
        .collect();
    // A module kept under its old name (`pub use model::report as verdict;`),
    // or one that moved to a crate of its own, re-exported at its old path
    // (`pub use gatehost_git::commit;`, `pub use gatehost_hook as hook;`).
    let renamed: Vec<&str> = lib
        .lines()
        .filter_map(|l| {
            let used = l.strip_prefix("pub use ")?.strip_suffix(';')?;
            match used.split_once(" as ") {
                Some((_, name)) => Some(name),
                None => used
                    .strip_prefix("gatehost_")?
                    .split_once("::")
                    .map(|(_, m)| m),
            }
        })
        .collect();
    assert!(
        modules.len() + renamed.len() > 20,
        "the reader found no modules"
    );
    let unlisted: Vec<&str> = modules
        .iter()
        .filter(|m| !lib.contains(&format!("//! - [`{m}`]:")))
        .copied()
        .collect();
    assert!(
        unlisted.is_empty(),
        "lib.rs's doc does not list {unlisted:?}"
    );
    let listed = lib.lines().filter(|l| l.starts_with("//! - [`")).count();
    assert_eq!(
        listed,
        modules.len() + renamed.len(),
        "lib.rs's doc lists a module that is gone"
    );
    let undocumented: Vec<&str> = modules
        .iter()
        .filter(|m| {
            let file = src.join(format!("{m}.rs"));
            let file = if file.exists() {
                file
            } else {
                src.join(m).join("mod.rs")
            };
            !std::fs::read_to_string(file).is_ok_and(|t| t.starts_with("//! "))
        })
        .copied()
        .collect();
    assert!(undocumented.is_empty(), "no module doc: {undocumented:?}");
}

/// Every crate of `host/crates/` says in its `lib.rs` what it owns.
#[test]
fn every_crate_is_documented() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut seen = 0;
    let mut undocumented = Vec::new();
    for entry in std::fs::read_dir(crates).expect("read crates") {
        let lib = entry.expect("entry").path().join("src/lib.rs");
        seen += 1;
        if !std::fs::read_to_string(&lib).is_ok_and(|t| t.starts_with("//! ")) {
            undocumented.push(lib.display().to_string());
        }
    }
    assert!(seen > 3, "the reader found no crates");
    assert!(undocumented.is_empty(), "no crate doc: {undocumented:?}");
}

/// The store's backends keep their database drivers to themselves: no
/// source file of gatehost-store outside a backend's module
/// (`store/sqlite/`) names a driver's crate in code (comments aside), so
/// the rest of the store sees only its interface (`store::interface`). No
/// crate above the store can name one: the driver is gatehost-store's
/// dependency (gatehost's tests aside), checked below. A new backend adds
/// its driver here and its module to `BACKENDS`.
#[test]
fn no_driver_type_above_the_store() {
    const DRIVERS: &[&str] = &["rusqlite", "tokio_postgres", "deadpool_postgres"];
    const BACKENDS: &[&str] = &["store/sqlite/", "store/postgres/"];
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/store/src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut inside = 0;
    let mut leaks = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(f).expect("read");
        let code: Vec<&str> = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect();
        let named = DRIVERS
            .iter()
            .filter(|d| code.iter().any(|l| l.contains(**d)))
            .count();
        if BACKENDS.iter().any(|b| rel.starts_with(b)) {
            inside += named;
        } else if named > 0 {
            leaks.push(rel);
        }
    }
    assert!(inside > 0, "the reader found no backend naming its driver");
    // gatehost's own sources name none.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    for f in &files {
        let rel = f.strip_prefix(&src).expect("under src").to_string_lossy();
        if rel == "structure_tests.rs" {
            continue;
        }
        let text = std::fs::read_to_string(f).expect("read");
        let names = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .any(|l| DRIVERS.iter().any(|d| l.contains(*d)));
        if names {
            leaks.push(format!("gatehost: {rel}"));
        }
    }
    assert!(
        leaks.is_empty(),
        "a database driver named outside its store backend (use the store's interface): {leaks:?}"
    );
}
