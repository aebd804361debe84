//! Starts made ahead (`parked`), run for real where gates join v1
//! cgroups: the woken child is the gate, in its cgroups, bounded; a
//! cgroup never holds a previous gate's process when the next one wakes
//! there; nothing is left when the supervisor goes. Skipped (said) on a
//! host whose gates join no v1 cgroup.

use super::*;

const MIB: u64 = 1024 * 1024;

fn gate() -> GateLimits {
    GateLimits {
        memory: Some(512 * MIB),
        pids: Some(64),
        ..GateLimits::NONE
    }
}

/// A supervisor keeping a start made ahead, if gates join v1 cgroups here.
fn keeping() -> Option<Supervisor> {
    let sup = Supervisor::new().keeping_ready(gate());
    if !sup.enforcer.joins_v1() {
        eprintln!("gates join no v1 cgroup on this host: skipped");
        return None;
    }
    assert!(sup.has_ready_start(), "no start made ahead");
    Some(sup)
}

fn sh(sup: &Supervisor, script: &str, gate: GateLimits) -> ProcessRun {
    let env = env();
    let args = [OsString::from("-c"), OsString::from(script)];
    runtime()
        .block_on(sup.run(sh_spec(&args, &env, gate, None)))
        .expect("spawned")
}

/// Whether `pid` is a live process (not a zombie, not gone).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

/// Prints the pids of the gate's own v1 pids cgroup (and its memory
/// cgroup's path), as the gate sees them.
const SHOW_V1: &str = r#"p=$(sed -n 's/^[0-9]*:pids://p' /proc/self/cgroup)
m=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
echo "pids-cgroup $p"; echo "memory-cgroup $m"
echo "procs $(tr '\n' ' ' < /sys/fs/cgroup/pids$p/cgroup.procs)"
echo "limit $(cat /sys/fs/cgroup/pids$p/pids.max)""#;

#[test]
fn the_woken_child_is_the_gate_in_its_own_v1_cgroups_bounded() {
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    let Some(sup) = keeping() else { return };
    let parked = sup.parked_pid().expect("a parked child");
    let r = sh(&sup, &format!("echo pid $$; {SHOW_V1}"), gate());
    assert_eq!(r.termination, Termination::Exited(0));
    assert_eq!(r.cgroup_entry, Some("clone3"));
    let out = stdout(r);
    assert!(
        out.starts_with(&format!("pid {parked}\n")),
        "the gate is not the parked child {parked}: {out}"
    );
    assert!(out.contains("pids-cgroup /gatehost-"), "{out}");
    assert!(out.contains("limit 64\n"), "{out}");
    // The next start is made while a gate runs: one waits again.
    assert!(sup.has_ready_start());
    assert_ne!(sup.parked_pid(), Some(parked));
}

#[test]
fn a_cgroup_never_holds_a_previous_gates_process_when_the_next_wakes() {
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    let Some(sup) = keeping() else { return };
    // A gate that leaves a process behind in a session of its own.
    let first = sh(&sup, "setsid sleep 60 & echo $!", gate());
    let strays = first.strays_killed;
    let left: i32 = stdout(first).trim().parse().expect("the sleeper's pid");
    assert!(strays >= 1, "no process was left to kill");
    assert!(!alive(left), "the first gate's process outlived it");
    for _ in 0..3 {
        let r = sh(&sup, SHOW_V1, gate());
        assert_eq!(r.termination, Termination::Exited(0));
        let out = stdout(r);
        let procs = out
            .lines()
            .find_map(|l| l.strip_prefix("procs "))
            .expect("the procs line");
        assert!(
            !procs.split_whitespace().any(|p| p == left.to_string()),
            "{out}"
        );
        // The gate's sh and the two it runs at most: nothing else.
        assert!(procs.split_whitespace().count() <= 3, "{out}");
    }
}

#[test]
fn a_gate_with_other_limits_undoes_the_start_made_ahead_and_is_bounded_by_its_own() {
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    let Some(sup) = keeping() else { return };
    let parked = sup.parked_pid().expect("a parked child");
    let other = GateLimits {
        pids: Some(16),
        ..gate()
    };
    let r = sh(&sup, SHOW_V1, other);
    assert_eq!(r.termination, Termination::Exited(0));
    let out = stdout(r);
    assert!(out.contains("limit 16\n"), "{out}");
    assert!(!alive(parked), "the undone start's child is left");
    assert!(!reaper::registry().children.contains(&parked));
}

#[test]
fn nothing_is_left_when_the_supervisor_goes() {
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    let Some(sup) = keeping() else { return };
    let r = sh(&sup, "true", gate());
    assert_eq!(r.termination, Termination::Exited(0));
    let parked = sup.parked_pid().expect("a parked child");
    assert!(alive(parked));
    drop(sup);
    assert!(!alive(parked), "the parked child outlived its supervisor");
    assert!(
        !std::path::Path::new(&format!("/proc/{parked}")).exists(),
        "not reaped"
    );
    assert!(!reaper::registry().children.contains(&parked));
}

/// Set in the helper process of the test below.
const HELPER: &str = "GATEHOST_SANDBOX_PARKED_HELPER";

/// A parked child shares its host's memory and descriptors: when the host
/// dies (SIGKILL, nothing of it runs), the child sees the host's pidfd and
/// exits. A helper (this test binary again) parks one and is killed.
#[test]
fn a_parked_child_ends_when_its_host_is_killed() {
    use std::io::BufRead;
    if std::env::var_os(HELPER).is_some() {
        let Some(sup) = keeping() else {
            println!("parked none");
            return;
        };
        println!("parked {}", sup.parked_pid().expect("a parked child"));
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    let exe = std::env::current_exe().expect("the test binary");
    let mut cmd = std::process::Command::new(exe);
    cmd.args([
        "--exact",
        "supervise::tests::made_ahead::a_parked_child_ends_when_its_host_is_killed",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(HELPER, "1")
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null());
    let (mut helper, _tracked) =
        reaper::Tracked::spawn(|| cmd.spawn(), |c| c.id()).expect("the helper");
    let out = helper.stdout.take().expect("stdout");
    let parked = std::io::BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        // (libtest's own "test NAME ... " may precede it on the line)
        .find_map(|l| l.split_once("parked ").map(|(_, p)| p.trim().to_string()))
        .expect("the helper said what it parked");
    if parked == "none" {
        let _ = helper.wait();
        eprintln!("gates join no v1 cgroup on this host: skipped");
        return;
    }
    let parked: i32 = parked.parse().expect("a pid");
    assert!(alive(parked));
    helper.kill().expect("kill the helper");
    helper.wait().expect("reap the helper");
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(parked) {
        assert!(
            Instant::now() < deadline,
            "the parked child {parked} outlived its host"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Re-parented to this process (a subreaper): reaped by the sweep.
    reaper::sweep(false);
}

/// Taken for its gate, a start made ahead opens its v1 cgroups'
/// `cgroup.procs` again: a child started another way than by waking the
/// parked one (a fallback) joins them too, never a stale descriptor.
#[test]
fn a_start_taken_for_its_gate_can_join_its_v1_cgroups_by_any_way() {
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    let Some(sup) = keeping() else { return };
    let (cg, bounds, parked) = sup.take_ready(gate()).expect("the start made ahead");
    let joins = bounds.child.joins();
    assert!(!joins.is_empty(), "no join");
    for (fd, _) in joins {
        let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).expect("an open descriptor");
        let text = target.to_string_lossy();
        assert!(
            text.ends_with("/cgroup.procs") && text.contains("/gatehost-"),
            "{text}"
        );
    }
    sup.give_back(cg, bounds, parked);
    assert!(!sup.has_ready_start());
}
