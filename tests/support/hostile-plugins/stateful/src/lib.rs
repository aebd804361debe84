//! Remembers its calls in a static: fails if its instance is ever called
//! twice, and echoes the diffs it is given through the host. The host must
//! give every evaluation an instance of its own, with that evaluation's
//! context, whether it made the instance then or ahead (a spare).

use gatehost_plugin::{Context, LogLevel, Plugin, Verdict};
use std::sync::atomic::{AtomicU32, Ordering};

static CALLS: AtomicU32 = AtomicU32::new(0);

struct Stateful;

impl Plugin for Stateful {
    fn evaluate(ctx: Context) -> Result<Verdict, String> {
        let calls = CALLS.fetch_add(1, Ordering::SeqCst) + 1;
        gatehost_plugin::log(LogLevel::Info, &format!("stateful: call {calls}"));
        if calls > 1 {
            return Ok(gatehost_plugin::fail(
                format!("this instance was called {calls} times"),
                Vec::new(),
            ));
        }
        let diffs: Vec<String> = ctx
            .changed_files
            .iter()
            .map(|f| match gatehost_plugin::file_diff(&f.path) {
                Ok(d) => format!("{}: {} bytes", f.path, d.len()),
                Err(e) => format!("{}: {e}", f.path),
            })
            .collect();
        Ok(gatehost_plugin::pass(format!(
            "first call; {}",
            diffs.join(", ")
        )))
    }
}

gatehost_plugin::export_gate!(Stateful);
