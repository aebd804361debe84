//! Built against `wit/gate.wit` here: the interface exactly as released in
//! 0.1.0 (no `workspace-files`, no `read-files`), without the plugin kit.
//! It logs through the host, asks for a file's diff, and passes naming
//! how many changed files it saw: a host of a later 0.1.x must link all
//! of that.

// Generated bindings: the WIT's records make long argument lists.
#![allow(clippy::too_many_arguments)]

wit_bindgen::generate!({
    path: "wit",
    world: "gate-plugin",
});

use gatehost::gate::host::{LogLevel, file_diff, log};
use gatehost::gate::types::Decision;

struct Legacy;

impl Guest for Legacy {
    fn evaluate(ctx: Context) -> Result<Verdict, String> {
        log(LogLevel::Info, "legacy plugin speaking");
        let with_diff = ctx
            .changed_files
            .iter()
            .filter(|f| file_diff(&f.path).is_ok())
            .count();
        Ok(Verdict {
            decision: Decision::Pass,
            summary: format!(
                "0.1.0 plugin: {} changed file(s), {with_diff} with a diff",
                ctx.changed_files.len()
            ),
            findings: Vec::new(),
        })
    }
}

export!(Legacy);
