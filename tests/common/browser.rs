//! The browser tests' shared parts: the Python (with Playwright) that
//! drives Debian's headless Chromium, where screenshots go, and one run of
//! a browser script bounded in time.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The python of the venv scripts/install-browser.sh makes (with
/// Playwright), or `$GATEHOST_BROWSER_PYTHON`.
pub fn browser_python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = std::env::var_os("GATEHOST_BROWSER_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/browser-venv/bin/python"));
    assert!(
        Path::new("/usr/bin/chromium").exists() && python.exists(),
        "the browser tests need Debian's Chromium (/usr/bin/chromium) and Playwright for Python \
         ({}): run scripts/install-browser.sh (scripts/test.sh does)",
        python.display()
    );
    python
}

/// Where the browser tests leave their screenshots (docs/img/ has copies).
pub fn shots_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ui-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshots dir");
    dir
}

/// Starts tests/support/browser/`script` with `args` (its stderr in `log`,
/// the process marked with `marker`, `stdin` as given, stdout piped).
pub fn spawn_script(
    script: &str,
    args: &[&str],
    marker: &str,
    log: &Path,
    stdin: Stdio,
) -> std::process::Child {
    let stderr = std::fs::File::create(log).expect("log");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/support/browser");
    Command::new(browser_python())
        .arg(path.join(script))
        .args(args)
        .env(super::MARKER_ENV, marker)
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("run the browser script")
}

/// A watchdog that SIGKILLs `pid` unless told (by a send on the sender)
/// within `bound`; joined, it says whether it killed.
pub fn kill_past(
    pid: u32,
    bound: Duration,
) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<bool>) {
    let (done, watch) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let late = watch.recv_timeout(bound).is_err();
        if late {
            // SAFETY: kill(2) of the child this test started and still holds.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
        late
    });
    (done, watchdog)
}

/// Runs tests/support/browser/`script` with `args` (its stderr in `log`, the
/// process marked with `marker`), killed past `bound`; its one JSON line
/// and whether it succeeded. Panics, with the log, past the bound or on
/// an answer that is no JSON.
pub fn run_script(
    script: &str,
    args: &[&str],
    marker: &str,
    log: &Path,
    bound: Duration,
) -> (bool, serde_json::Value) {
    let child = spawn_script(script, args, marker, log, Stdio::null());
    let (done, watchdog) = kill_past(child.id(), bound);
    let output = child.wait_with_output().expect("wait");
    let _ = done.send(());
    let killed = watchdog.join().expect("watchdog");
    let text = || std::fs::read_to_string(log).unwrap_or_default();
    assert!(!killed, "{script} ran past {bound:?}\n{}", text());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let seen = serde_json::from_str(line.trim())
        .unwrap_or_else(|e| panic!("{script}'s answer {line:?}: {e}\n{}", text()));
    (output.status.success(), seen)
}
