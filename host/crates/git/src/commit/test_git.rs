//! The commit module's unit tests' `git`: the real git, with no hook,
//! no user or system configuration and a fixed identity, so that what it
//! writes is the reference the in-process code is compared with.

use crate::supervise::reaper::TrackedCommand as _;
use std::path::Path;
use std::process::Command;

/// Runs `git ARGS` in `dir`, asserts it succeeded, returns its stdout.
pub(super) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "core.hooksPath=/dev/null", "-c", "user.name=t"])
        .args(["-c", "user.email=t@t", "-c", "diff.noprefix=false"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(std::process::Stdio::null())
        .tracked_output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
