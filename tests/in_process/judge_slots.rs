//! The host-wide judge slot limit, through the library: judges beyond the
//! limit wait in FIFO order, never run at once, and their wait does not eat
//! their timeout.

use crate::common;
use common::*;
use gatehost::anchor::WorkspaceAnchor;
use gatehost::config::HostConfig;
use gatehost::gate::{GateContext, GateRunner, parse_gate_file};
use gatehost::verdict::Outcome;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn judges_queue_fifo_for_one_slot_and_the_wait_is_not_their_timeout() {
    let s = Scratch::new();
    let lock = s.out.join("lock");
    let log = s.out.join("order.log");
    let config = HostConfig::from_toml(
        &format!(
            "[judge]\nslots = 1\n[judge.adapters.j]\ncommand = [\"bash\", \"{}\", \"{}\", \"{}\", \"{{model}}\"]\nwrite = [\"{}\"]\n",
            fixture_str("judges/slot.sh"),
            lock.display(),
            log.display(),
            s.out.display()
        ),
        "test",
    )
    .expect("config");
    let runner = GateRunner::new(config);
    let anchor = WorkspaceAnchor::open(&s.ws).expect("workspace");
    let ctx = GateContext::default();
    // Each judge runs 0.3 s with a 1 s timeout; the third waits 0.6 s first.
    let gate = |name: &str| {
        parse_gate_file(&format!(
            r#"{{"judge": {{"adapter": "j", "model": "{name}", "prompt": "p", "timeoutMs": 1000}}}}"#
        ))
        .expect("gate")
        .remove(0)
    };
    let (g1, g2, g3, g4) = (gate("first"), gate("second"), gate("third"), gate("fourth"));
    let (v1, v2, v3, v4) = tokio::join!(
        runner.run_gate(&g1, &anchor, &ctx),
        runner.run_gate(&g2, &anchor, &ctx),
        runner.run_gate(&g3, &anchor, &ctx),
        runner.run_gate(&g4, &anchor, &ctx),
    );
    for v in [&v1, &v2, &v3, &v4] {
        assert_eq!(v.outcome, Outcome::Pass, "{v:?}");
        assert!(
            !v.stdout.as_ref().unwrap().text.contains("overlap"),
            "two judges ran at once"
        );
    }
    let order = std::fs::read_to_string(&log).expect("log");
    assert_eq!(order, "first\nsecond\nthird\nfourth\n");
    assert!(v1.durations.queued_ms < 200, "{:?}", v1.durations);
    assert!(v3.durations.queued_ms >= 500, "{:?}", v3.durations);
    // The fourth waited ~0.9 s, close to its 1 s timeout, and still passed.
    assert!(v4.durations.queued_ms >= 800, "{:?}", v4.durations);
    assert!(v4.durations.queued_ms + v4.durations.run_ms > 1000);
}
