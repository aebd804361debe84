//! The tests' git: a repository with one commit, git run so that nothing
//! a repository names runs (no hooks, no system or global config), as the
//! tests' own identity, and a diff compared without its function context.
//! Re-exported by `common::daemon`, where the daemon tests find it.

use std::path::Path;
use std::process::Command;

/// A scratch area whose workspace is a git repository (as [`git_repo`]).
pub fn git_scratch() -> super::Scratch {
    let s = super::Scratch::new();
    git_repo(&s.ws);
    s
}

/// A git repository at `dir` with one commit holding `README`.
pub fn git_repo(dir: &Path) {
    git_ok(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("README"), "hello\n").expect("write");
    git_ok(dir, &["add", "README"]);
    git_tester_ok(dir, &["commit", "-q", "-m", "init"]);
}

/// `git ARGS` in `dir`, run so that nothing the repo names runs.
fn git_run(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .arg("--no-pager")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git")
}

/// `git ARGS` output in `dir`, run so that nothing the repo names runs.
pub fn git_out(dir: &Path, args: &[&str]) -> String {
    String::from_utf8_lossy(&git_run(dir, args).stdout).into_owned()
}

/// As [`git_out`], and asserts that git succeeded.
pub fn git_ok(dir: &Path, args: &[&str]) -> String {
    let out = git_run(dir, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "git {args:?}: {err}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `args` after the options that make git run as the tests' own identity
/// with no hooks.
fn as_tester<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let identity = ["-c", "user.name=t", "-c", "user.email=t@t"];
    let mut all = vec!["-c", "core.hooksPath=/dev/null"];
    all.extend(identity);
    all.extend_from_slice(args);
    all
}

/// `git ARGS` in `dir` as the tests' own identity, with no hooks run.
pub fn git_as_tester(dir: &Path, args: &[&str]) -> String {
    git_out(dir, &as_tester(args))
}

/// As [`git_as_tester`], and asserts that git succeeded.
pub fn git_tester_ok(dir: &Path, args: &[&str]) -> String {
    git_ok(dir, &as_tester(args))
}

/// Commits everything in the workspace at `dir` (no hooks, a test identity).
pub fn git_commit_all(dir: &Path, message: &str) {
    git_out(dir, &["add", "-A"]);
    git_as_tester(dir, &["commit", "-q", "-m", message]);
}

/// `git diff`'s hunk headers carry a function context gatehost's patch
/// does not (it runs no diff driver): compared without it.
pub fn without_context(patch: &str) -> String {
    patch
        .lines()
        .map(|l| match l.strip_prefix("@@ ") {
            Some(rest) => match rest.find(" @@") {
                Some(n) => format!("@@ {} @@", &rest[..n]),
                None => l.to_string(),
            },
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}
