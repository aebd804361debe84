//! Built against `wit/gate.wit` here: the interface exactly as released in
//! 0.1.1 (`workspace-files` and `read-files`, no `judge-with-context`),
//! without the plugin kit. It lists the workspace, reads its files, and
//! asks the judge (the prompt is the plugin's own text), passing when the
//! judge does: a host of a later 0.1.x must link all of that.

// Generated bindings: the WIT's records make long argument lists.
#![allow(clippy::too_many_arguments)]

wit_bindgen::generate!({
    path: "wit",
    world: "gate-plugin",
});

use gatehost::gate::host::{judge, read_files, workspace_files};
use gatehost::gate::types::Decision;

struct Legacy;

impl Guest for Legacy {
    fn evaluate(_ctx: Context) -> Result<Verdict, String> {
        let files = workspace_files()?;
        let read = read_files(&files, 1 << 20)?;
        let readable = read.iter().filter(|r| r.is_ok()).count();
        let reply = judge("Answer PASS: this rubric is the plugin's own text.")?;
        Ok(Verdict {
            decision: reply.decision.unwrap_or(Decision::Fail),
            summary: format!(
                "0.1.1 plugin: {} file(s), {readable} read, judge {}",
                files.len(),
                match reply.decision {
                    Some(Decision::Pass) => "passed",
                    Some(Decision::Fail) => "failed",
                    None => "gave no verdict",
                }
            ),
            findings: Vec::new(),
        })
    }
}

export!(Legacy);
