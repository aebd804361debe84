//! What a gate's program needs to read, found without running it, and
//! whether the sandbox's read grants reach it.
//!
//! A program name resolves (on the PATH the gate sees) to a file that may
//! be a link, a `#!` script whose interpreter is elsewhere (`#!/usr/bin/env
//! NAME` looked up on that PATH), or a version manager's shim that runs
//! files from another tree: pyenv/rbenv/nodenv/asdf/mise `shims/` run what
//! their root holds, a rustup proxy in `~/.cargo/bin` runs a toolchain from
//! `$RUSTUP_HOME` (`~/.rustup`), a Python venv's interpreter needs its
//! `pyvenv.cfg` `home =` and that Python's `lib/`, an nvm install needs its
//! version's tree (npm is a script in its `lib/`), Volta's shims need
//! `~/.volta`. [`needs`] walks these (bounded, loops cut) and lists every
//! path with why it is needed; [`Sandbox::unreached`] says which one the
//! grants do not reach, with the `[sandbox] read` line that would.
//!
//! At run time, [`Sandbox::denied_outside`] reads a gate's stderr for a
//! "Permission denied" naming a path outside the grants (what a script
//! execs that no load-time walk can follow).
//!
//! This module reads file metadata and the first line of files; it must
//! never run a program to find out what it needs.

use super::{Sandbox, State};
use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};

/// How deep links, `#!` lines and shims are followed (the kernel itself
/// follows at most 4 nested interpreters).
const MAX_DEPTH: usize = 8;
/// How much of a file is read for its `#!` line.
const SHEBANG_BYTES: usize = 512;

/// What resolving names needs: the PATH the gate sees, its HOME, and the
/// host's variables naming version managers' roots.
pub struct Lookup<'a> {
    /// The gate's `PATH`, to find a bare program name on.
    pub path_var: Option<&'a OsStr>,
    /// The home directory (absolute), where version managers keep their
    /// roots by default.
    pub home: Option<PathBuf>,
    /// A variable of the host (`PYENV_ROOT`, `RUSTUP_HOME`, `NVM_DIR` …).
    pub var: &'a dyn Fn(&str) -> Option<OsString>,
}

impl Lookup<'_> {
    /// The host's: HOME and variables from this process's environment.
    pub fn host(path_var: Option<&OsStr>) -> Lookup<'_> {
        Lookup {
            path_var,
            home: std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute()),
            var: &host_var,
        }
    }

    /// `$name` if set, else `~/default` (None without a home).
    fn root(&self, name: &str, default: &str) -> Option<PathBuf> {
        (self.var)(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| self.home.as_ref().map(|h| h.join(default)))
    }
}

/// A variable of this process's environment, unless empty.
fn host_var(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// One path a program needs to read (or execute), canonical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The path needed (the program, its interpreter, a shim's target).
    pub path: PathBuf,
    /// Why, in words: "python3 is a pyenv shim, which runs it".
    pub why: String,
    /// The directory to grant so that it is reached.
    pub grant: PathBuf,
}

/// Every path `program` (spelled `name` in the configuration) needs, the
/// program itself first.
pub fn needs(name: &str, program: &Path, lookup: &Lookup<'_>) -> Vec<Need> {
    let mut walk = Walk {
        lookup,
        seen: BTreeSet::new(),
        out: Vec::new(),
    };
    walk.file(program, name, format!("the program of {name}"), 0);
    walk.out
}

struct Walk<'l, 'a> {
    lookup: &'l Lookup<'a>,
    seen: BTreeSet<PathBuf>,
    out: Vec<Need>,
}

impl Walk<'_, '_> {
    fn push(&mut self, path: PathBuf, why: String, grant: PathBuf) {
        if !self.out.iter().any(|n| n.path == path) {
            self.out.push(Need { path, why, grant });
        }
    }

    /// A file that is executed (or read as a program): its target, its
    /// layout, its `#!` interpreter. `who` names it in messages, `why`
    /// says why it is needed.
    fn file(&mut self, spelled: &Path, who: &str, why: String, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        // Landlock checks the file a path resolves to, not the links on
        // the way: the canonical path is what must be granted.
        let Ok(canonical) = std::fs::canonicalize(spelled) else {
            return;
        };
        if !self.seen.insert(canonical.clone()) {
            return;
        }
        self.push(canonical.clone(), why, install_root(&canonical));
        self.layouts(spelled, &canonical, who, depth);
        let Some((interpreter, via_env)) = shebang(&canonical) else {
            return;
        };
        let shown = interpreter.display().to_string();
        let Some(cmd) = via_env else {
            let next = format!("{shown} (the #! interpreter of {who})");
            let why = format!("{who} runs it from its #! line");
            self.file(&interpreter, &next, why, depth + 1);
            return;
        };
        // `env` is exec'd first: it needs its own grant too.
        let why = format!("{who} runs it from its #! line");
        self.file(
            &interpreter,
            &format!("{shown} (in the #! line of {who})"),
            why,
            depth + 1,
        );
        let found = if cmd.contains('/') {
            Some(PathBuf::from(&cmd))
        } else {
            on_path(&cmd, self.lookup.path_var)
        };
        if let Some(path) = found {
            let next = format!("{cmd} (the #! interpreter of {who})");
            let why = format!("{who} runs {cmd} from its #! line (`{shown} {cmd}`)");
            self.file(&path, &next, why, depth + 1);
        }
    }

    /// A directory a layout needs as a whole.
    fn dir(&mut self, dir: &Path, why: String) {
        if let Ok(canonical) = std::fs::canonicalize(dir)
            && canonical.is_dir()
        {
            self.push(canonical.clone(), why, canonical);
        }
    }

    /// Version managers' layouts, by where the program is (as spelled and
    /// as resolved).
    fn layouts(&mut self, spelled: &Path, canonical: &Path, who: &str, depth: usize) {
        for p in [spelled, canonical] {
            // pyenv, rbenv, nodenv, asdf, mise: `<root>/shims/<name>`.
            if let Some(root) = p
                .parent()
                .filter(|d| d.file_name() == Some(OsStr::new("shims")))
                .and_then(Path::parent)
            {
                let manager = shim_manager(root);
                let runs: Vec<PathBuf> = [
                    "libexec/pyenv",
                    "libexec/rbenv",
                    "libexec/nodenv",
                    "bin/asdf",
                    "bin/mise",
                ]
                .iter()
                .map(|r| root.join(r))
                .filter(|f| f.is_file())
                .collect();
                for f in runs {
                    let next = format!("{} (run by the {manager} shim {who})", f.display());
                    let why = format!("{who} is a {manager} shim, which runs it");
                    self.file(&f, &next, why, depth + 1);
                }
                self.dir(
                    root,
                    format!("{who} is a {manager} shim, which runs what this directory holds"),
                );
            }
            // A Python venv: `<venv>/bin/python` beside `<venv>/pyvenv.cfg`.
            if let Some(venv) = p
                .parent()
                .and_then(Path::parent)
                .filter(|v| v.join("pyvenv.cfg").is_file())
            {
                let venv = venv.to_path_buf();
                self.dir(
                    &venv,
                    format!("{who} is in this Python virtual environment"),
                );
                if let Some(home) = venv_home(&venv.join("pyvenv.cfg")) {
                    let shown = venv.display();
                    self.dir(
                        &home,
                        format!("{who} is in the venv {shown}, whose pyvenv.cfg says its base Python is here"),
                    );
                    if let Some(lib) = home.parent().map(|h| h.join("lib"))
                        && lib.is_dir()
                    {
                        self.dir(
                            &lib,
                            format!("{who} is in the venv {shown}, whose base Python reads its library here"),
                        );
                    }
                }
            }
        }
        // A rustup proxy: `<cargo home>/bin/<tool>`, the same file as
        // `rustup` beside it.
        if let Some(bin) = spelled.parent()
            && bin.file_name() == Some(OsStr::new("bin"))
        {
            let rustup = bin.join("rustup");
            if rustup.is_file()
                && same_file(&rustup, canonical)
                && let Some(home) = self.lookup.root("RUSTUP_HOME", ".rustup")
            {
                self.dir(
                    &home,
                    format!("{who} is a rustup proxy, which runs a toolchain from this directory"),
                );
            }
        }
        // nvm: `<nvm>/versions/node/<version>/...` (npm is a script in its
        // lib/node_modules).
        if let Some(nvm) = self.lookup.root("NVM_DIR", ".nvm")
            && let Ok(nvm) = std::fs::canonicalize(&nvm)
            && let Ok(rest) = canonical.strip_prefix(nvm.join("versions").join("node"))
            && let Some(version) = rest.components().next()
        {
            let dir = nvm.join("versions").join("node").join(version);
            self.dir(
                &dir,
                format!("{who} is in this nvm install, which it reads"),
            );
        }
        // Volta: its shims run the tools it keeps under its home.
        if let Some(volta) = self.lookup.root("VOLTA_HOME", ".volta")
            && let Ok(volta) = std::fs::canonicalize(&volta)
            && (canonical.starts_with(&volta) || spelled.starts_with(&volta))
        {
            self.dir(
                &volta,
                format!("{who} is a Volta shim, which runs what this directory holds"),
            );
        }
    }
}

/// `name` on `path_var`'s absolute directories, as the supervisor finds a
/// gate's program (`supervise::find_on_path`, which this module may not
/// import: the supervisor imports the sandbox).
fn on_path(name: &str, path_var: Option<&OsStr>) -> Option<PathBuf> {
    let absolute: Vec<PathBuf> = std::env::split_paths(path_var?)
        .filter(|p| p.is_absolute())
        .collect();
    let joined = std::env::join_paths(absolute).ok()?;
    which::which_in(name, Some(joined), "/").ok()
}

/// The name of the version manager whose root holds `shims/`.
fn shim_manager(root: &Path) -> String {
    for m in ["pyenv", "rbenv", "nodenv"] {
        if root.join("libexec").join(m).is_file() {
            return m.to_string();
        }
    }
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().trim_start_matches('.').to_string())
        .unwrap_or_default();
    if root.join("bin/asdf").is_file() || name == "asdf" {
        return "asdf".into();
    }
    if name == "mise" || name == "rtx" {
        return name;
    }
    "version manager".into()
}

/// `home = …` of a venv's `pyvenv.cfg`.
fn venv_home(cfg: &Path) -> Option<PathBuf> {
    let text = read_head(cfg, 64 * 1024)?;
    let text = String::from_utf8_lossy(&text);
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home")
            .then(|| PathBuf::from(v.trim()))
            .filter(|p| p.is_absolute())
    })
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

fn read_head(path: &Path, max: usize) -> Option<Vec<u8>> {
    let file = std::fs::File::open(path).ok()?;
    let mut buf = Vec::new();
    file.take(max as u64).read_to_end(&mut buf).ok()?;
    Some(buf)
}

/// A `#!` line: the interpreter and, when it is `env`, the command `env`
/// runs (its options and `NAME=value` words skipped; `-S` split).
fn shebang(path: &Path) -> Option<(PathBuf, Option<String>)> {
    if !path.is_file() {
        return None;
    }
    let head = read_head(path, SHEBANG_BYTES)?;
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|b| *b == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let interpreter = PathBuf::from(words.next()?);
    if !interpreter.is_absolute() {
        return None;
    }
    if interpreter.file_name() != Some(OsStr::new("env")) {
        return Some((interpreter, None));
    }
    let mut skip_value = false;
    for w in words {
        if skip_value {
            skip_value = false;
            continue;
        }
        match w {
            "-S" | "--split-string" | "-i" | "--ignore-environment" | "--" => continue,
            "-u" | "--unset" | "-C" | "--chdir" => {
                skip_value = true;
                continue;
            }
            w if w.starts_with("-S") => return Some((interpreter, Some(w[2..].to_string()))),
            w if w.starts_with('-') => continue,
            w if w.contains('=') => continue,
            w => return Some((interpreter, Some(w.to_string()))),
        }
    }
    Some((interpreter, None))
}

/// The directory to grant for a file: its install's root (the parent of a
/// `bin`, `sbin`, `libexec` or `shims` directory), else its directory.
fn install_root(file: &Path) -> PathBuf {
    let Some(dir) = file.parent() else {
        return file.to_path_buf();
    };
    let named = |n: &str| dir.file_name() == Some(OsStr::new(n));
    if ["bin", "sbin", "libexec", "shims"].iter().any(|n| named(n))
        && let Some(up) = dir.parent()
        && up != Path::new("/")
    {
        return up.to_path_buf();
    }
    dir.to_path_buf()
}

/// A path the sandbox does not let a gate read, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreached {
    /// The needed path the sandbox's read grants miss.
    pub need: Need,
    /// It lies in one of gatehost's own places: no grant can reach it.
    pub protected: Option<PathBuf>,
}

impl Unreached {
    /// The operator's message, naming the configuration file `file`.
    pub fn message(&self, file: &str) -> String {
        let n = &self.need;
        match &self.protected {
            Some(p) => format!(
                "the sandbox does not let gates read {} ({}): it lies in gatehost's own {}, which no gate may read",
                n.path.display(),
                n.why,
                p.display()
            ),
            None => format!(
                "the sandbox does not let gates read {} ({}): add `read = [\"{}\"]` to [sandbox] in {file}",
                n.path.display(),
                n.why,
                n.grant.display()
            ),
        }
    }
}

impl Sandbox {
    /// The first path `program` needs that the grants (the base ones,
    /// `extra` and the program itself) do not reach; `None` when all are
    /// reached or gates are not confined.
    pub fn unreached(
        &self,
        name: &str,
        program: &Path,
        extra: &[PathBuf],
        lookup: &Lookup<'_>,
    ) -> Option<Unreached> {
        if !matches!(self.state, State::Confined { .. }) {
            return None;
        }
        let mut granted = self.granted_with(extra);
        if let Ok(p) = std::fs::canonicalize(program)
            && !self.protected.iter().any(|x| p.starts_with(x))
        {
            granted.push(p);
        }
        needs(name, program, lookup)
            .into_iter()
            .find(|n| !granted.iter().any(|g| n.path.starts_with(g)))
            .map(|need| Unreached {
                protected: self
                    .protected
                    .iter()
                    .find(|p| need.path.starts_with(p))
                    .cloned(),
                need,
            })
    }

    /// The base read grants, and `extra` carved around the host's places.
    fn granted_with(&self, extra: &[PathBuf]) -> Vec<PathBuf> {
        let mut granted = self.read_paths.clone();
        granted.extend(super::grants_around(extra, &self.protected));
        granted
    }

    /// A path outside every grant (the base ones and `also`: the gate's
    /// program, workspace, write grants) that a line of `stderr` says was
    /// "Permission denied": what the sandbox refused at run time. `None`
    /// unless gates are confined.
    pub fn denied_outside(&self, stderr: &str, also: &[PathBuf]) -> Option<PathBuf> {
        if !matches!(self.state, State::Confined { .. }) {
            return None;
        }
        let mut granted = self.granted_with(&[]);
        granted.extend(also.iter().filter_map(|p| std::fs::canonicalize(p).ok()));
        denied_paths(stderr).into_iter().find(|p| {
            let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
            !granted.iter().any(|g| p.starts_with(g))
        })
    }
}

/// The absolute paths named on the lines of `stderr` that say
/// "Permission denied" (as bash, env, exec and Python print it).
pub fn denied_paths(stderr: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for line in stderr.lines().filter(|l| l.contains("Permission denied")) {
        for word in line.split_whitespace() {
            let w = word.trim_matches(|c: char| {
                matches!(
                    c,
                    '\'' | '"' | '`' | '‘' | '’' | ':' | ',' | ';' | '(' | ')' | '[' | ']'
                )
            });
            if w.starts_with('/') && w.len() > 1 {
                out.push(PathBuf::from(w));
            }
        }
    }
    out
}

/// The hint for a path the sandbox refused at run time.
pub fn denied_message(path: &Path, file: &str) -> String {
    format!(
        "the sandbox does not let gates read {} (refused at run time: Permission denied); \
         the gate could not run what it needed, so this is not a verdict on the work: \
         add `read = [\"{}\"]` to [sandbox] in {file}",
        path.display(),
        install_root(path).display()
    )
}

#[cfg(test)]
#[path = "reach_tests.rs"]
mod tests;
