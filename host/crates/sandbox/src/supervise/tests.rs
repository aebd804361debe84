//! The supervisor's ways of starting a child, run for real: born in its
//! cgroup by `clone3`, moved in by the host, or no cgroup at all. Each
//! asserts what the child itself sees (its cgroup, its signal state, its
//! pipes), so a spawn path that got one of them wrong fails here.

use super::*;
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::Path;

// The limits' tests, a concept of their own.
mod gate_limits;
// A run's overlay over its worktree.
mod overlay;
// Starts made ahead where gates join v1 cgroups.
#[cfg(target_arch = "x86_64")]
mod made_ahead;

thread_local! {
    /// While set, `Child::status` on this thread never sees an exit (as a
    /// host that slept through one has not yet): only a direct look does.
    pub(super) static BLIND_TO_EXITS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `sh -c script` under `sup` with `timeout`, its exits unseen by
/// the waiting future (see `BLIND_TO_EXITS`).
fn run_blind(sup: &Supervisor, script: &str, timeout: Duration) -> ProcessRun {
    let env = env();
    let args = [OsString::from("-c"), OsString::from(script)];
    BLIND_TO_EXITS.set(true);
    let run = runtime().block_on(sup.run(ProcessSpec {
        program: Path::new("/bin/sh"),
        args: &args,
        cwd: Path::new("/"),
        env: &env,
        stdin: None,
        limits: Limits {
            timeout,
            ..limits()
        },
        confine: None,
        scratch: None,
        overlay: None,
    }));
    BLIND_TO_EXITS.set(false);
    run.expect("spawned")
}

fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(10),
        grace: Duration::from_millis(200),
        output_cap: 64 * 1024,
        gate: GateLimits::NONE,
    }
}

fn env() -> Vec<(OsString, OsString)> {
    vec![("PATH".into(), "/usr/bin:/bin".into())]
}

/// `sh -c` with `args` (["-c", script]) in `/`, with `env`, bounded by
/// `gate`, its scratch directory `scratch` if given, no stdin, unconfined.
fn sh_spec<'a>(
    args: &'a [OsString],
    env: &'a [(OsString, OsString)],
    gate: GateLimits,
    scratch: Option<&'a Path>,
) -> ProcessSpec<'a> {
    ProcessSpec {
        program: Path::new("/bin/sh"),
        args,
        cwd: Path::new("/"),
        env,
        stdin: None,
        limits: Limits { gate, ..limits() },
        confine: None,
        scratch,
        overlay: None,
    }
}

/// The host's descriptors whose link reads `target` (a namespace's
/// "mnt:[N]", a file's path).
fn fds_naming(target: impl AsRef<std::ffi::OsStr>) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|link| link.as_os_str() == target.as_ref())
        .count()
}

/// What a child holds (its mount namespace) is let go by the reap itself,
/// not when the child's handle is dropped: the supervisor empties and
/// pools the gate's cgroup after the reap and before the drop, and a
/// namespace still held there would charge its tmpfs to the next gate.
#[test]
fn what_a_child_holds_is_let_go_when_it_is_reaped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let held = dir.path().join("held");
    std::fs::write(&held, "").expect("write");
    let fd: std::os::fd::OwnedFd = std::fs::File::open(&held).expect("open").into();
    // Registered as the host's child, so that another test's sweep of
    // orphaned zombies never reaps it first.
    let (child, _tracked) = reaper::Tracked::spawn(
        || std::process::Command::new("true").spawn(),
        std::process::Child::id,
    )
    .expect("true");
    let pid = child.id() as i32;
    let pidfd = rustix::process::pidfd_open(
        rustix::process::Pid::from_child(&child),
        rustix::process::PidfdFlags::empty(),
    )
    .expect("pidfd");
    runtime().block_on(async {
        let mut waited = spawn::PidfdChild::new(pid, pidfd)
            .expect("watched")
            .holding(Some(fd));
        assert_eq!(fds_naming(&held), 1, "held while it runs");
        assert!(waited.status().await.expect("reaped").success());
        assert_eq!(fds_naming(&held), 0, "let go at the reap");
        drop(waited);
    });
    // Reaped through its pidfd: std's handle has nothing left to wait for.
    drop(child);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Starts `program args…` under `sup` in `/`, stdin fed with `stdin` if
/// given, confined by `confine` if given, and waits for it.
fn start(
    sup: &Supervisor,
    program: &Path,
    args: &[OsString],
    stdin: Option<&[u8]>,
    confine: Option<&crate::sandbox::Plan<'_>>,
) -> Result<ProcessRun, SpawnError> {
    let env = env();
    runtime().block_on(sup.run(ProcessSpec {
        program,
        args,
        cwd: Path::new("/"),
        env: &env,
        stdin: stdin.map(<[u8]>::to_vec),
        limits: limits(),
        confine,
        scratch: None,
        overlay: None,
    }))
}

/// Runs `program args…` (found on PATH) under `sup`, stdin fed with
/// `stdin` if given.
fn run(sup: &Supervisor, program: &str, args: &[&str], stdin: Option<&[u8]>) -> ProcessRun {
    let program = find_on_path(program, Some(std::ffi::OsStr::new("/usr/bin:/bin")))
        .expect("the program is installed");
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    start(sup, &program, &args, stdin, None).expect("spawned")
}

fn stdout(run: ProcessRun) -> String {
    String::from_utf8(run.stdout.into_bytes()).expect("utf-8")
}

/// The child's cgroup v2 path, from its own /proc/self/cgroup.
fn cgroup_of(status: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_default()
        .to_string()
}

/// Held by the tests that compare the host's own cgroup before and after:
/// the moving way moves the whole test process for a moment.
static HOST_CGROUP: Mutex<()> = Mutex::new(());

fn own_cgroup() -> String {
    cgroup_of(&std::fs::read_to_string("/proc/self/cgroup").expect("read"))
}

#[test]
fn where_cgroups_work_a_child_is_born_in_its_own_cgroup_by_clone3() {
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    let sup = Supervisor::new();
    // This machine (and CI) has a writable cgroup2 hierarchy.
    assert_eq!(sup.containment(), "cgroup");
    assert_eq!(sup.cgroup_entry(), "clone3");
    let before = own_cgroup();
    let r = run(&sup, "cat", &["/proc/self/cgroup"], None);
    assert_eq!(r.termination, Termination::Exited(0));
    assert_eq!(r.cgroup_entry, Some("clone3"), "born there, not moved in");
    let child = cgroup_of(&stdout(r));
    let name = format!("gatehost-{}-", std::process::id());
    assert!(
        child
            .rsplit('/')
            .next()
            .is_some_and(|n| n.starts_with(&name)),
        "the child runs in {child:?}, not in a cgroup of this host's"
    );
    // Nothing moved the host, and clone3 was not refused.
    assert_eq!(own_cgroup(), before);
    assert_eq!(sup.cgroup_entry(), "clone3");
}

#[test]
fn moving_the_host_into_the_cgroup_still_works_where_clone3_is_refused() {
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    let sup = Supervisor::moving_into_cgroups();
    assert_eq!(sup.cgroup_entry(), "moving");
    let before = own_cgroup();
    let r = run(&sup, "cat", &["/proc/self/cgroup"], None);
    assert_eq!(r.termination, Termination::Exited(0));
    assert_eq!(r.cgroup_entry, Some("moved"));
    let child = cgroup_of(&stdout(r));
    assert!(
        child.contains(&format!("gatehost-{}-", std::process::id())),
        "{child:?}"
    );
    assert_eq!(own_cgroup(), before, "the host stepped back out");
}

#[test]
fn a_cloned_child_gets_default_sigpipe_and_no_blocked_signals() {
    // The host ignores SIGPIPE (Rust's runtime does) and its runtime may
    // block signals; a gate must start as any program started by a shell.
    let status = stdout(run(&Supervisor::new(), "cat", &["/proc/self/status"], None));
    let mask = |name: &str| {
        let hex = status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .expect("the field is there")
            .trim();
        u64::from_str_radix(hex, 16).expect("hex")
    };
    assert_eq!(mask("SigBlk:"), 0, "{status}");
    assert_eq!(mask("SigIgn:") & (1 << (libc::SIGPIPE - 1)), 0, "{status}");
}

#[test]
fn a_cloned_child_is_in_a_process_group_of_its_own_with_the_given_environment() {
    let out = stdout(run(
        &Supervisor::new(),
        "sh",
        &[
            "-c",
            "echo $$ $(cut -d' ' -f5 /proc/$$/stat) $PATH; env | wc -l",
        ],
        None,
    ));
    let fields: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(fields[0], fields[1], "pgid = pid: {out}");
    assert_eq!(fields[2], "/usr/bin:/bin", "{out}");
    // PATH, and what sh itself adds (PWD, SHLVL, _): nothing inherited.
    assert!(fields[3].parse::<u32>().expect("count") <= 4, "{out}");
}

#[test]
fn stdin_reaches_a_cloned_child_and_both_outputs_come_back() {
    let r = run(
        &Supervisor::new(),
        "sh",
        &["-c", "cat; echo to-stderr >&2; exit 3"],
        Some(b"from-stdin"),
    );
    assert_eq!(r.termination, Termination::Exited(3));
    assert_eq!(r.stderr.clone().into_bytes(), b"to-stderr\n");
    assert_eq!(stdout(r), "from-stdin");
}

#[test]
fn a_cloned_child_killed_by_a_signal_reports_the_signal() {
    let r = run(&Supervisor::new(), "sh", &["-c", "kill -TERM $$"], None);
    assert_eq!(r.termination, Termination::Signaled(libc::SIGTERM));
}

#[test]
fn a_program_that_cannot_be_executed_is_a_start_error_and_leaves_no_child() {
    let sup = Supervisor::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let not_exec = dir.path().join("script");
    std::fs::write(&not_exec, "#!/bin/sh\n").expect("write");
    for (program, errno) in [
        (dir.path().join("missing"), libc::ENOENT),
        (not_exec, libc::EACCES),
        (dir.path().to_path_buf(), libc::EACCES),
    ] {
        let err = start(&sup, &program, &[], None, None).expect_err("cannot start");
        match err {
            SpawnError::Start { source, .. } => {
                assert_eq!(source.raw_os_error(), Some(errno), "{program:?}: {source}");
            }
            other => panic!("{program:?}: {other}"),
        }
    }
    assert_eq!(
        sup.cgroup_entry(),
        "clone3",
        "a start error is not a refusal"
    );
}

#[test]
fn a_cloned_child_confines_itself_and_the_host_is_left_as_it_was() {
    let sup = Supervisor::new();
    let system: Vec<PathBuf> = ["/usr", "/bin", "/lib", "/lib64", "/proc"]
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    let base = crate::sandbox::BaseGrants::open(6, &system, &[], &[]).expect("base");
    let plan = crate::sandbox::Plan {
        abi: 6,
        base: &base,
        read: Vec::new(),
        write: Vec::new(),
        workspace: None,
        network: false,
        drop_caps: true,
        user: None,
    };
    let args: Vec<OsString> = [
        "-c",
        "grep -E '^(NoNewPrivs|CapEff|CapBnd):' /proc/self/status; \
         cat /etc/hostname >/dev/null 2>&1 && echo read-etc || echo denied-etc",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let r = start(&sup, Path::new("/bin/sh"), &args, None, Some(&plan)).expect("spawned");
    assert_eq!(
        r.cgroup_entry,
        Some("clone3"),
        "confined by the child itself"
    );
    assert_eq!(r.termination, Termination::Exited(0));
    let out = stdout(r);
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
    assert!(out.contains("CapEff:\t0000000000000000"), "{out}");
    assert!(out.contains("CapBnd:\t0000000000000000"), "{out}");
    assert!(out.contains("denied-etc"), "Landlock holds: {out}");
    // The host (this thread, which spawned) is untouched.
    let own = std::fs::read_to_string("/proc/thread-self/status").expect("status");
    assert!(own.contains("NoNewPrivs:\t0"), "{own}");
    assert!(std::fs::read_to_string("/etc/hostname").is_ok());
}

#[test]
fn a_cloned_child_that_cannot_confine_itself_never_runs_its_program() {
    let sup = Supervisor::new();
    let cgroups = sup.cgroups.as_ref().expect("cgroup v2 here");
    let cg = cgroups.take().expect("a cgroup");
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("ran");
    let not_a_ruleset: std::os::fd::OwnedFd =
        std::fs::File::open("/dev/null").expect("open").into();
    let failing = crate::sandbox::confine::Prepared::failing_at_landlock(not_a_ruleset);
    let args = [marker.clone().into_os_string()];
    let env = env();
    let exec = program::Exec {
        program: Path::new("/usr/bin/touch"),
        args: &args,
        env: &env,
        cwd: Path::new("/"),
        piped_stdin: false,
        confine: Some(&failing),
        limits: &limits::ChildLimits::default(),
        scratch: None,
        overlay: None,
        die_with_parent: false,
        mode: SpawnMode::Vfork,
    };
    let err = spawn::start(Some(cg.open().expect("open").as_fd()), &exec).expect_err("refused");
    match err {
        spawn::CloneError::Confine(e) => {
            assert_eq!(e.step, crate::sandbox::confine::Step::Landlock);
            let said = failing.describe(e);
            assert!(said.starts_with("landlock (ABI 6): "), "{said}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!marker.exists(), "the program ran unconfined");
    // The child has exited: nothing is left running in its cgroup.
    assert!(cg.pids().is_empty());
    runtime().block_on(cgroups.release(cg, Duration::from_secs(1)));
}

#[test]
fn a_nul_byte_in_an_argument_is_a_start_error() {
    let args = [OsString::from("a\0b")];
    let err = start(
        &Supervisor::new(),
        Path::new("/bin/echo"),
        &args,
        None,
        None,
    )
    .expect_err("refused");
    assert!(matches!(err, SpawnError::Start { .. }), "{err}");
}

#[test]
fn a_dead_hosts_cgroups_are_removed_with_the_ones_nested_in_them() {
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    let parent = cgroup::host_cgroup().expect("cgroup v2 here");
    // A pid that no longer exists: a child that was waited on.
    let (mut gone, _tracked) =
        reaper::Tracked::spawn(|| std::process::Command::new("true").spawn(), |c| c.id())
            .expect("true");
    let dead = gone.id();
    gone.wait().expect("wait");
    // What a moving host could leave: a probe made inside its gate cgroup.
    let outer = parent.join(format!("gatehost-{dead}-7"));
    let inner = outer.join(format!("gatehost-{dead}-0"));
    std::fs::create_dir_all(&inner).expect("mkdir in the cgroup tree");
    let _sup = Supervisor::new();
    assert!(!inner.exists() && !outer.exists(), "{}", outer.display());
}

/// Issue 24, item 12: a host stopped (SIGSTOP) while its gate exits wakes
/// with the timer and the exit both due. The timer must look first: a
/// child that has exited is never "timed out" (before: 19 of 24 such
/// gates were, a false nudge). Each way of starting a child, since each
/// waits differently (pidfd, async-process).
#[test]
fn a_child_that_exited_before_its_timer_was_seen_is_not_timed_out() {
    // The moving way moves the whole test process for a moment.
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    for sup in [
        Supervisor::new(),
        Supervisor::moving_into_cgroups(),
        Supervisor::without_cgroups(),
    ] {
        let run = run_blind(&sup, "exit 3", Duration::from_millis(150));
        assert_eq!(
            run.termination,
            Termination::Exited(3),
            "{}",
            sup.cgroup_entry()
        );
        assert!(!run.timed_out, "{}", sup.cgroup_entry());
    }
}

/// The look does not hide a real timeout: a child still running when its
/// timer fires is timed out and killed.
#[test]
fn a_child_still_running_when_its_timer_fires_is_timed_out() {
    for sup in [Supervisor::new(), Supervisor::without_cgroups()] {
        let run = run_blind(&sup, "exec sleep 30", Duration::from_millis(150));
        assert!(run.timed_out, "{}", sup.cgroup_entry());
        assert_eq!(run.termination, Termination::Signaled(libc::SIGTERM));
    }
}

/// Issue 24, item 1: a gate that leaves one `setsid`'d process behind
/// (killed with its cgroup) must not poison the gates after it. The kernel
/// kills at birth every child `clone3`'d into a cgroup that was killed
/// once; that cgroup was recycled for the next gate, so every later gate
/// died of SIGKILL in 0 ms.
#[test]
fn a_leftover_process_does_not_poison_the_gates_after_it() {
    let _one = HOST_CGROUP.lock().unwrap_or_else(|p| p.into_inner());
    for sup in [Supervisor::new(), Supervisor::moving_into_cgroups()] {
        let way = sup.cgroup_entry();
        let leaver = run(
            &sup,
            "sh",
            &[
                "-c",
                "( setsid sh -c 'exec sleep 99' </dev/null >/dev/null 2>&1 & ); true",
            ],
            None,
        );
        assert_eq!(leaver.termination, Termination::Exited(0), "{way}");
        if sup.containment() == "cgroup" {
            assert_eq!(leaver.strays_killed, 1, "{way}");
        }
        for i in 0..20 {
            let next = run(&sup, "sh", &["-c", "echo second"], None);
            assert_eq!(next.termination, Termination::Exited(0), "{way}: gate {i}");
            assert_eq!(stdout(next), "second\n", "{way}: gate {i}");
        }
    }
}

/// A host that is the only process of its cgroup moves into a leaf
/// beneath it (so the cgroup may enable controllers for the gates'); one
/// that shares its cgroup with anything else is never moved. Played with
/// `sleep` processes in a cgroup made for the test, as the host would be.
#[test]
fn only_a_host_alone_in_its_cgroup_moves_into_a_leaf() {
    let parent = cgroup::host_cgroup().expect("cgroup v2 here");
    let t = parent.join(format!("gatehost-leaftest-{}", std::process::id()));
    std::fs::create_dir(&t).expect("mkdir cgroup");
    // The sleeps are the test's own children, tracked (registered under
    // the registry's lock as they are spawned), so that another test's
    // orphan sweep (which kills the host's unregistered children) leaves
    // them be: one killed between its spawn and a later registration left
    // the host's cgroup "shared" with nothing and the test failing.
    let spawn_in = |cg: &Path| {
        let (child, tracked) = reaper::Tracked::spawn(
            || std::process::Command::new("sleep").arg("30").spawn(),
            |c| c.id(),
        )
        .expect("sleep");
        std::fs::write(cg.join("cgroup.procs"), child.id().to_string()).expect("move");
        (child, tracked)
    };
    let cgroup_of_pid = |pid: u32| {
        cgroup_of(&std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("cgroup"))
    };
    let (mut host, _host_tracked) = spawn_in(&t);
    let (mut other, _other_tracked) = spawn_in(&t);
    assert_eq!(cgroup::move_into_leaf(&t, host.id()), None);
    assert!(
        cgroup_of_pid(host.id()).ends_with(&format!("gatehost-leaftest-{}", std::process::id()))
    );
    assert!(!t.join(cgroup::HOST_LEAF).exists());
    other.kill().expect("kill");
    other.wait().expect("wait");
    let leaf = cgroup::move_into_leaf(&t, host.id()).expect("moved");
    assert_eq!(leaf, t.join(cgroup::HOST_LEAF));
    assert!(cgroup_of_pid(host.id()).ends_with(cgroup::HOST_LEAF));
    assert_eq!(
        std::fs::read_to_string(t.join("cgroup.procs"))
            .expect("procs")
            .trim(),
        ""
    );
    host.kill().expect("kill");
    host.wait().expect("wait");
    std::fs::remove_dir(&leaf).expect("rmdir leaf");
    std::fs::remove_dir(&t).expect("rmdir");
}

/// `n` sleeping processes, not the supervisor's, moved into the cgroup
/// whose `cgroup.procs` is `procs`. Each is the test's own child, tracked
/// (registered under the registry's lock as it is spawned), so that another
/// test's orphan sweep (which reaps the host's unregistered children) never
/// takes its exit status: untracked, `wait` found "No child processes" in a
/// parallel run.
fn sleepers_in(procs: &Path, n: usize) -> Vec<(std::process::Child, reaper::Tracked)> {
    (0..n)
        .map(|_| {
            let (c, tracked) = reaper::Tracked::spawn(
                || std::process::Command::new("sleep").arg("1000").spawn(),
                |c| c.id(),
            )
            .expect("sleep");
            std::fs::write(procs, c.id().to_string()).expect("into the cgroup");
            (c, tracked)
        })
        .collect()
}

/// Reaps `children`, every one killed by a signal (none exited by itself).
fn reap_killed(children: Vec<(std::process::Child, reaper::Tracked)>) {
    use std::os::unix::process::ExitStatusExt;
    for (mut c, _tracked) in children {
        let st = c.wait().expect("wait");
        assert_eq!(st.signal(), Some(libc::SIGKILL), "{st:?}");
    }
}

/// The hostile-shell test's "cgroups left behind" on a loaded host: a
/// killed gate's processes took longer to end than its release waited,
/// and the cgroup was forgotten (neither reused nor ever removed). It is
/// kept and removed once empty: at the next gate's take, or at the drop
/// (a one-shot `check` about to exit). The bound is zero here and 64
/// processes die in the cgroup: still populated when the release looks.
#[test]
fn a_gate_cgroup_still_emptying_after_its_release_is_removed_once_empty() {
    let sup = Supervisor::new();
    let cgroups = sup.cgroups.as_ref().expect("cgroup v2 here");
    let cg = cgroups.take().expect("a cgroup");
    let path = cg.path().to_path_buf();
    let children = sleepers_in(&path.join("cgroup.procs"), 64);
    let rt = runtime();
    assert_eq!(rt.block_on(cgroups.release(cg, Duration::ZERO)), 64);
    reap_killed(children);
    let next = cgroups.take().expect("a cgroup");
    assert!(!path.exists(), "{} left behind", path.display());
    assert!(cgroups.doomed().is_empty(), "{:?}", cgroups.doomed());
    rt.block_on(cgroups.release(next, Duration::from_secs(1)));

    // Dropped while its processes are still alive: killed, waited for,
    // removed.
    let sup = Supervisor::new();
    let cgroups = sup.cgroups.as_ref().expect("cgroup v2 here");
    let cg = cgroups.take().expect("a cgroup");
    let path = cg.path().to_path_buf();
    let children = sleepers_in(&path.join("cgroup.procs"), 64);
    rt.block_on(cgroups.release(cg, Duration::ZERO));
    drop(sup);
    assert!(!path.exists(), "{} left behind", path.display());
    reap_killed(children);
}

/// As above, in a v1 hierarchy (a hybrid host's `pids`): a cgroup still
/// populated when its release's bound passes is removed once empty.
#[test]
fn a_v1_cgroup_still_populated_after_its_release_is_removed_once_empty() {
    use super::v1::{Controller, Hierarchy};
    let Some(h) = Hierarchy::detect(Controller::Pids) else {
        println!("skipped: no v1 pids hierarchy here");
        return;
    };
    let rt = runtime();
    let (dir, fd) = h.take(1000).expect("a v1 cgroup");
    drop(fd);
    let path = dir.path().to_path_buf();
    let children = sleepers_in(&path.join("cgroup.procs"), 4);
    // A zero bound: past before anything is killed, every time.
    assert_eq!(rt.block_on(h.release(dir, Duration::ZERO)), 4);
    assert_eq!(h.doomed(), vec![path.clone()]);
    // The next take kills what is left; the one after removes it.
    let (a, _fd) = h.take(1000).expect("a v1 cgroup");
    reap_killed(children);
    let (b, _fd) = h.take(1000).expect("a v1 cgroup");
    assert!(!path.exists(), "{} left behind", path.display());
    assert!(h.doomed().is_empty());
    rt.block_on(h.release(a, Duration::from_secs(1)));
    rt.block_on(h.release(b, Duration::from_secs(1)));

    // Dropped with its processes alive: killed, then removed.
    let (dir, fd) = h.take(1000).expect("a v1 cgroup");
    drop(fd);
    let path = dir.path().to_path_buf();
    let children = sleepers_in(&path.join("cgroup.procs"), 4);
    rt.block_on(h.release(dir, Duration::ZERO));
    drop(h);
    assert!(!path.exists(), "{} left behind", path.display());
    reap_killed(children);
}
