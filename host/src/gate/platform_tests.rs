//! A platform without a sandbox implementation (macOS today), held where
//! the tests run by choosing its path ([`Platform::None`]): a native gate
//! is refused with the platform's reason, as below the needed kernel, and
//! runs (unconfined) only under `[sandbox] required = false`.

use super::*;
use crate::sandbox::Platform;
use crate::verdict::Outcome;

const ALLOW: &str = "[shell]\nallow = [\"true\", \"false\"]\n";

fn runner(toml: &str) -> GateRunner {
    let config = HostConfig::from_toml(toml, "c.toml").expect("config");
    let sandbox = Sandbox::on(Platform::None, &config.sandbox, &config.private_paths());
    GateRunner::with_sandbox(config, sandbox)
}

async fn run(runner: &GateRunner, command: &str, ws: &std::path::Path) -> Verdict {
    let gates = parse_gate_file(&format!("{{\"command\": \"{command}\"}}")).expect("gate");
    let anchor = WorkspaceAnchor::open(ws).expect("anchor");
    runner
        .run_gate(&gates[0], &anchor, &GateContext::default())
        .await
}

#[tokio::test]
async fn without_a_sandbox_a_native_gate_is_refused_with_the_reason() {
    let ws = tempfile::tempdir().expect("workspace");
    let runner = runner(ALLOW);
    assert!(!runner.sandbox().confines());
    let line = runner.sandbox().describe();
    assert!(line.contains("NOT AVAILABLE"), "{line}");
    assert!(line.contains("native gates will be errors"), "{line}");
    let v = run(&runner, "true", ws.path()).await;
    assert_eq!(v.outcome, Outcome::Error, "{v:?}");
    assert!(
        v.reason.contains("has no sandbox for native gates on"),
        "the platform's reason: {}",
        v.reason
    );
    assert!(
        v.reason
            .contains("the sandbox cannot be applied on this host"),
        "the message of a kernel without Landlock: {}",
        v.reason
    );
    assert!(v.reason.contains("required = false"), "{}", v.reason);
    assert_eq!(v.exit_code, None, "nothing ran: {v:?}");
}

#[tokio::test]
async fn without_a_sandbox_required_false_runs_native_gates_unconfined() {
    let ws = tempfile::tempdir().expect("workspace");
    let runner = runner(&format!("{ALLOW}[sandbox]\nrequired = false\n"));
    let line = runner.sandbox().describe();
    assert!(line.contains("native gates run UNCONFINED"), "{line}");
    let pass = run(&runner, "true", ws.path()).await;
    assert_eq!(pass.outcome, Outcome::Pass, "{pass:?}");
    // It ran: the program's own exit decides.
    let fail = run(&runner, "false", ws.path()).await;
    assert_eq!(fail.outcome, Outcome::Fail, "{fail:?}");
    assert_eq!(fail.exit_code, Some(1), "{fail:?}");
}
