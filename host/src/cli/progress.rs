//! Progress on long work (`check`, `wait`) for a person at a terminal: a
//! line on stderr saying what runs and for how long, redrawn in place and
//! cleared when the work ends.
//!
//! It draws only when both stdout and stderr are terminals and `--json`
//! was not asked: piped or scripted output is exactly what it was. It
//! owns that line; it must never print anything else or decide anything.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// How often the line is redrawn.
const TICK: Duration = Duration::from_millis(120);

/// The line, or nothing when it must not be drawn.
pub(super) struct Progress(Option<ProgressBar>);

impl Progress {
    /// Starts the line with `what`, unless `json` or not at a terminal.
    pub(super) fn start(json: bool, what: impl Into<String>) -> Progress {
        if json || !std::io::stdout().is_terminal() || !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(what.into());
        bar.enable_steady_tick(TICK);
        Progress(Some(bar))
    }

    /// Says what runs now.
    pub(super) fn set(&self, what: impl Into<String>) {
        if let Some(bar) = &self.0 {
            bar.set_message(what.into());
        }
    }

    /// Whether a line is drawn.
    pub(super) fn is_drawn(&self) -> bool {
        self.0.is_some()
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }
}
