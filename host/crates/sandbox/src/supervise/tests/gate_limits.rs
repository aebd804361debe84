//! The per-gate limits, run for real: the file-size and memory rlimits on
//! every way to start a child, a memory cgroup where there is one, and the
//! scratch tmpfs in the child's own mount namespace (as root, and as a host
//! without `CAP_SYS_ADMIN` through a user namespace).

use super::*;
/// Runs `sh -c script` under `sup` bounded by `gate`.
fn run_bounded(sup: &Supervisor, script: &str, gate: GateLimits) -> ProcessRun {
    run_in(sup, script, gate, None)
}

/// Runs `sh -c script` under `sup` bounded by `gate`, with `scratch` as
/// its scratch directory (`$SCRATCH` in the script) if given.
fn run_in(sup: &Supervisor, script: &str, gate: GateLimits, scratch: Option<&Path>) -> ProcessRun {
    let mut env = env();
    if let Some(dir) = scratch {
        env.push(("SCRATCH".into(), dir.as_os_str().to_owned()));
    }
    let args = [OsString::from("-c"), OsString::from(script)];
    runtime()
        .block_on(sup.run(sh_spec(&args, &env, gate, scratch)))
        .expect("spawned")
}

/// The line of /proc/self/limits for `name` ("Max file size"): soft, hard.
fn limit_line(limits: &str, name: &str) -> (String, String) {
    let line = limits
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no {name} in {limits}"));
    let mut f = line[name.len()..].split_whitespace();
    (
        f.next().unwrap_or_default().to_string(),
        f.next().unwrap_or_default().to_string(),
    )
}

const MIB: u64 = 1024 * 1024;

/// Whether a per-gate cgroup can bound memory on this host (cgroup v2's
/// controller or a writable v1 memory hierarchy).
fn memory_cgroup_here() -> bool {
    let sup = Supervisor::new();
    sup.cgroups.as_ref().is_some_and(|c| c.controllers().0)
        || v1::Hierarchy::detect(v1::Controller::Memory).is_some()
}

fn pids_cgroup_here() -> bool {
    let sup = Supervisor::new();
    sup.cgroups.as_ref().is_some_and(|c| c.controllers().1)
        || v1::Hierarchy::detect(v1::Controller::Pids).is_some()
}

/// Issue 24, item 7: each process of a gate carries the file size limit
/// as both soft and hard limit (it cannot raise it), on every way to
/// start it; without a memory cgroup, the memory limit is RLIMIT_AS.
#[test]
fn a_gates_processes_carry_the_file_size_limit_on_every_spawn_path() {
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    let gate = GateLimits {
        memory: Some(512 * MIB),
        pids: None,
        file_bytes: Some(16 * MIB),
        scratch_bytes: None,
    };
    let sups = [
        Supervisor::new(),
        Supervisor::moving_into_cgroups(),
        Supervisor::without_cgroups(),
    ];
    for sup in &sups {
        let way = sup.cgroup_entry();
        let r = run_bounded(sup, "cat /proc/self/limits", gate);
        assert_eq!(r.termination, Termination::Exited(0), "{way}");
        let text = stdout(r);
        let n = (16 * MIB).to_string();
        assert_eq!(limit_line(&text, "Max file size"), (n.clone(), n), "{way}");
    }
    // Without cgroups, memory is bounded per process.
    let r = run_bounded(&sups[2], "cat /proc/self/limits", gate);
    let n = (512 * MIB).to_string();
    assert_eq!(limit_line(&stdout(r), "Max address space"), (n.clone(), n));
}

#[test]
fn a_file_past_the_limit_kills_the_writer_with_sigxfsz_and_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("big");
    let script = format!("exec head -c {} /dev/zero > {}", 64 * MIB, file.display());
    let gate = GateLimits {
        file_bytes: Some(16 * MIB),
        ..GateLimits::NONE
    };
    let r = run_bounded(&Supervisor::new(), &script, gate);
    assert_eq!(r.termination, Termination::Signaled(libc::SIGXFSZ));
    assert_eq!(r.limits.file_limit, Some(16 * MIB));
    let len = std::fs::metadata(&file).expect("written").len();
    assert_eq!(len, 16 * MIB, "the file stopped at the limit");
    let said = r.limits.describe().expect("a limit was hit");
    assert!(said.contains("gate_file_bytes"), "{said}");
}

/// Without a memory cgroup, RLIMIT_AS makes a large allocation fail.
#[test]
fn without_cgroups_an_allocation_past_the_memory_limit_fails() {
    let gate = GateLimits {
        memory: Some(256 * MIB),
        ..GateLimits::NONE
    };
    let r = run_bounded(
        &Supervisor::without_cgroups(),
        "exec python3 -c 'b = bytearray(2 * 1024**3)'",
        gate,
    );
    assert_ne!(r.termination, Termination::Exited(0), "2 GiB under 256 MiB");
}

#[test]
fn an_allocation_past_the_memory_limit_is_killed_and_named() {
    if !memory_cgroup_here() {
        eprintln!("no memory cgroup for gates on this host: skipped");
        return;
    }
    let gate = GateLimits {
        memory: Some(256 * MIB),
        ..GateLimits::NONE
    };
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    for (sup, way) in [
        (Supervisor::new(), "clone3"),
        (Supervisor::moving_into_cgroups(), "moving"),
        (Supervisor::new().keeping_ready(gate), "made ahead"),
    ] {
        if way == "made ahead" && sup.enforcer.joins_v1() {
            assert!(sup.has_ready_start(), "no start made ahead");
        }
        let r = run_bounded(&sup, "exec python3 -c 'b = bytearray(2 * 1024**3)'", gate);
        assert_eq!(r.termination, Termination::Signaled(libc::SIGKILL), "{way}");
        assert_eq!(r.limits.oom_kills, 1, "{way}");
        let said = r.limits.describe().expect("a limit was hit");
        assert!(said.contains("gate_memory_bytes = 268435456"), "{said}");
        // The next gate in the same (recycled) cgroup starts with no hits.
        let next = run_bounded(&sup, "true", gate);
        assert_eq!(next.termination, Termination::Exited(0), "{way}");
        assert_eq!(
            next.limits,
            LimitHits {
                memory_limit: 256 * MIB,
                ..LimitHits::default()
            }
        );
    }
}

#[test]
fn forks_past_the_process_limit_are_refused_counted_and_killed() {
    if !pids_cgroup_here() {
        eprintln!("no pids cgroup for gates on this host: skipped");
        return;
    }
    let gate = GateLimits {
        pids: Some(8),
        ..GateLimits::NONE
    };
    // Forks until refused (python's fork raises instead of retrying),
    // leaving its children asleep, and exits 0.
    let script = "exec python3 -c '
import os, time
for i in range(50):
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
    except OSError:
        print(\"refused at\", i)
        break
'";
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    for (sup, way) in [
        (Supervisor::new(), "clone3"),
        (Supervisor::moving_into_cgroups(), "moving"),
        (Supervisor::new().keeping_ready(gate), "made ahead"),
    ] {
        if way == "made ahead" && sup.enforcer.joins_v1() {
            assert!(sup.has_ready_start(), "no start made ahead");
        }
        let r = run_bounded(&sup, script, gate);
        assert_eq!(r.termination, Termination::Exited(0), "{way}");
        assert!(r.limits.forks_refused >= 1, "{way}: {:?}", r.limits);
        assert_eq!(r.strays_killed, 7, "{way}: its 7 children were left");
        let text = stdout(r);
        assert_eq!(text, "refused at 7\n", "{way}");
        let next = run_bounded(&sup, "true", gate);
        assert_eq!(
            next.limits.forks_refused, 0,
            "{way}: counted from the gate's start"
        );
    }
}

#[test]
fn limit_counters_and_reasons() {
    assert_eq!(
        events::counter("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n", "oom_kill"),
        Some(2)
    );
    assert_eq!(events::counter("max 5\n", "max"), Some(5));
    assert_eq!(
        events::counter("oom_kill_disable 0\nunder_oom 0\noom_kill 4\n", "oom_kill"),
        Some(4)
    );
    assert_eq!(events::counter("max 5\n", "oom_kill"), None);
    assert_eq!(LimitHits::default().describe(), None);
    let h = LimitHits {
        oom_kills: 1,
        memory_limit: 268435456,
        forks_refused: 3,
        pids_limit: 64,
        file_limit: None,
    };
    assert_eq!(
        h.describe().as_deref(),
        Some(
            "the memory limit was reached ([limits] gate_memory_bytes = 268435456): 1 process(es) killed; 3 fork(s) refused at the process limit ([limits] gate_pids = 64)"
        )
    );
}

/// Runs `sh -c script` under `sup` with `scratch` as its scratch
/// directory, bounded to `bytes`.
fn run_with_scratch(sup: &Supervisor, script: &str, scratch: &Path, bytes: u64) -> ProcessRun {
    let gate = GateLimits {
        scratch_bytes: Some(bytes),
        ..GateLimits::NONE
    };
    run_in(sup, script, gate, Some(scratch))
}

/// Issue 24, item 7: what a gate writes to its scratch directory is held
/// by a tmpfs of `gate_scratch_bytes` in the child's own mount namespace:
/// a write past it fails (ENOSPC), nothing of it reaches the host's disk,
/// and the host's mount table never shows it. The ways that cannot mount
/// it (a host that moves itself into the gate's cgroup, no cgroup) run
/// the gate unbounded and say so once; the run says which it was.
#[test]
fn a_gates_scratch_is_a_tmpfs_of_its_bound_that_the_host_never_sees() {
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    let script = "dd if=/dev/zero of=\"$SCRATCH/big\" bs=1048576 count=3 2>&1; \
                  echo dd=$?; grep -c gatehost-scratch /proc/self/mountinfo";
    let sup = Supervisor::new();
    assert_eq!(
        sup.cgroup_entry(),
        "clone3",
        "this host starts gates by clone3"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let run = run_with_scratch(&sup, script, dir.path(), 2 * MIB);
    assert_eq!(run.scratch_bytes, Some(2 * MIB));
    let out = stdout(run);
    assert!(out.contains("No space left on device"), "{out}");
    assert!(out.contains("dd=1"), "{out}");
    // The child saw its tmpfs ...
    assert!(out.trim_end().ends_with("\n1"), "{out}");
    // ... the host neither sees it nor what was written in it.
    let host_mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    assert!(!host_mounts.contains("gatehost-scratch"), "{host_mounts}");
    assert!(
        !dir.path().join("big").exists(),
        "the write reached the disk"
    );
    // Under the bound, the same write passes.
    let run = run_with_scratch(&sup, script, dir.path(), 8 * MIB);
    assert!(stdout(run).contains("dd=0"));

    for sup in [
        Supervisor::moving_into_cgroups(),
        Supervisor::without_cgroups(),
    ] {
        let way = sup.cgroup_entry();
        let run = run_with_scratch(&sup, script, dir.path(), 2 * MIB);
        assert_eq!(run.scratch_bytes, None, "{way}");
        assert!(stdout(run).contains("dd=0"), "{way}");
        assert!(dir.path().join("big").exists(), "{way}");
        std::fs::remove_file(dir.path().join("big")).expect("rm");
    }
}

/// Issue 52: a gate's mount namespace (its scratch) is held by the host
/// from the gate's exec until its reap, so that its teardown is not in the
/// gate's exit (the time between the program's end and the verdict);
/// nothing of it outlives the run (that the reap itself lets it go is
/// `what_a_child_holds_is_let_go_when_it_is_reaped`).
#[test]
fn the_host_holds_a_gates_mount_namespace_until_it_is_reaped() {
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    let sup = Supervisor::new();
    let scratch = tempfile::tempdir().expect("tempdir");
    let out = tempfile::tempdir().expect("tempdir");
    let script = format!(
        "readlink /proc/self/ns/mnt > {o}/ns.tmp && mv {o}/ns.tmp {o}/ns; \
         while [ ! -e {o}/go ]; do sleep 0.01; done; echo ran",
        o = out.path().display()
    );
    let gate = GateLimits {
        scratch_bytes: Some(2 * MIB),
        ..GateLimits::NONE
    };
    let rt = runtime();
    let (ns, run) = rt.block_on(async {
        let env = env();
        let args = [OsString::from("-c"), OsString::from(script)];
        let running = sup.run(sh_spec(&args, &env, gate, Some(scratch.path())));
        tokio::pin!(running);
        // The gate says which namespace it is in, then waits for `go`.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let ns = loop {
            tokio::select! {
                r = &mut running => panic!("the gate ended first: {:?}", r.map(stdout)),
                _ = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
            if let Ok(ns) = std::fs::read_to_string(out.path().join("ns")) {
                break ns.trim().to_string();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the gate never wrote its namespace"
            );
        };
        let own = std::fs::read_link("/proc/self/ns/mnt").expect("own namespace");
        assert_ne!(
            own.as_os_str(),
            ns.as_str(),
            "the gate has a namespace of its own"
        );
        assert_eq!(
            fds_naming(&ns),
            1,
            "the host holds the gate's namespace while it runs"
        );
        std::fs::write(out.path().join("go"), "").expect("go");
        (ns, running.await.expect("spawned"))
    });
    assert_eq!(run.scratch_bytes, Some(2 * MIB));
    assert_eq!(stdout(run).trim(), "ran");
    assert_eq!(fds_naming(&ns), 0, "nothing of it outlives the run");
}

/// A bounded scratch where the host has no `CAP_SYS_ADMIN`: the child
/// makes a user namespace that maps only the host's ids (as an
/// unprivileged process may) and mounts its tmpfs there. Run in a child
/// process that becomes `nobody` first (the test host is root).
#[test]
fn an_unprivileged_host_bounds_the_scratch_through_a_user_namespace() {
    use std::os::unix::fs::PermissionsExt;
    const NOBODY: u32 = 65534;
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let target = dir.path().join("tmp");
    std::fs::create_dir(&target).expect("mkdir");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let mount = scratch::ScratchMount::for_ids(
        &target,
        2 * MIB,
        None,
        scratch::Way::UserNamespace,
        (NOBODY, NOBODY),
    )
    .expect("prepared");
    let marker = dir.path().join("out");
    let marker_c = std::ffi::CString::new(marker.as_os_str().as_encoded_bytes()).expect("c");
    let big = std::ffi::CString::new(target.join("big").as_os_str().as_encoded_bytes()).expect("c");
    // SAFETY: a forked child of this (multi-threaded) test process makes
    // system calls only, and _exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        // SAFETY: in the child: raw system calls, then _exit.
        unsafe {
            // An unprivileged host: nobody, no capability left.
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(NOBODY, NOBODY, NOBODY) != 0
                || libc::setresuid(NOBODY, NOBODY, NOBODY) != 0
            {
                libc::_exit(2);
            }
            // A uid change makes a process undumpable (its /proc files
            // root's); a host that started as nobody is dumpable.
            libc::prctl(libc::PR_SET_DUMPABLE, 1);
            let entered = program::enter_mount_namespace(mount.maps.as_ref());
            let code = match entered.and_then(|()| mount.apply(None)) {
                Err(e) => 10 + e.min(100),
                Ok(()) => {
                    // 3 MiB into a 2 MiB tmpfs: the last write fails.
                    let fd = libc::open(big.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o600);
                    let chunk = [0u8; 65536];
                    let mut failed = 0;
                    for _ in 0..48 {
                        if libc::write(fd, chunk.as_ptr().cast(), chunk.len()) < 0 {
                            failed = *libc::__errno_location();
                            break;
                        }
                    }
                    let m = libc::open(marker_c.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o600);
                    libc::close(m);
                    if failed == libc::ENOSPC { 0 } else { 1 }
                }
            };
            libc::_exit(code)
        }
    }
    let mut status = 0;
    // SAFETY: waiting for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status), "{status}");
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "10+errno: the namespace or mount failed; 1: the write was not bounded"
    );
    assert!(marker.exists());
    assert!(!target.join("big").exists(), "the write reached the disk");
}
