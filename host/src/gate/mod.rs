//! Gates: what decides whether an agent's turn is acceptable.
//!
//! `GateRunner` is the host-wide entry point: it owns the configuration,
//! the process supervisor and the judge slots, and turns a [`Gate`] into a
//! `Verdict`. Each kind's shape and checks are one implementation of
//! [`GateKind`] in gatehost-model (`gatehost_model::gate`, re-exported
//! here as [`spec`] and [`kind`]); how it runs is one implementation of
//! [`run::RunGate`] in its own module here (`shell`, `judge`, `wasm`). A
//! gate never returns `pass` by default: every path that is not an
//! explicit success is `fail` or `error`.

pub use crate::change as diff;
pub use crate::verdict::human_duration;
pub use gatehost_model::gate::{kind, spec};
mod judge;
pub mod run;
mod shell;
mod wasm;

pub use judge::prompt;
pub use wasm::bounds_for;

pub use kind::GateKind;
pub use spec::{Gate, GateSpec, Kind, SpecError, parse_gate_file};

use crate::anchor::WorkspaceAnchor;
use crate::config::{HostConfig, Trust};
use crate::sandbox::Sandbox;
use crate::supervise::{ProcessRun, Supervisor, Termination};
use crate::verdict::{Durations, OutputTail, RunReport, Verdict};
use crate::wasm::{PluginUsage, WasmHost};
use std::ffi::OsString;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What a gate may look at beyond the workspace.
#[derive(Debug, Clone, Default)]
pub struct GateContext {
    /// Material for judges (the agent's last message, a diff); plugins see
    /// it as `last-message`.
    pub text: Option<String>,
    /// A unified diff of the change (`check --diff`): plugins get its
    /// files as `changed-files` and each file's part through `file-diff`.
    pub diff: Option<String>,
    /// The change as files (the daemon's, computed in process): used
    /// instead of splitting `diff`, so no file name is re-parsed from text.
    pub changes: Option<Vec<diff::FileChange>>,
    pub session_id: Option<String>,
    pub policy_id: Option<String>,
    /// Who wrote the gates: argument rules apply to the agent's.
    pub trust: Trust,
}

/// One warning per file of the change whose content a judge or plugin
/// was not given (over a cap of `[limits]`): what a gate did not see is
/// said in its verdict, never silent.
fn capped_findings(ctx: &GateContext) -> Vec<crate::verdict::Finding> {
    let Some(files) = &ctx.changes else {
        return Vec::new();
    };
    files
        .iter()
        .filter_map(|f| {
            let capped = f.capped?;
            tracing::warn!(path = %f.path_lossy(), cap = %capped.describe(), "a file's content was left out of the change set");
            Some(crate::verdict::Finding {
                path: Some(f.path_lossy().into_owned()),
                line: None,
                severity: crate::verdict::Severity::Warning,
                message: format!("not judged: {}", capped.describe()),
            })
        })
        .collect()
}

/// What a judge is given to judge: the agents' last messages and the
/// change (a diff against `HEAD`), when known. The judge gate caps it and
/// marks it as untrusted data.
fn judge_material(ctx: &GateContext) -> Option<String> {
    let change: Option<String> = match (&ctx.changes, &ctx.diff) {
        (Some(files), _) if !files.is_empty() => {
            let mut text = crate::change::render(files);
            for f in files {
                if let Some(c) = f.capped {
                    text.push_str(&format!(
                        "[gatehost: {}: {}]\n",
                        f.path_lossy(),
                        c.describe()
                    ));
                }
            }
            Some(text)
        }
        (None, Some(d)) if !d.is_empty() => Some(d.clone()),
        _ => None,
    };
    match (&ctx.text, change) {
        (Some(t), Some(d)) => Some(format!("{t}\n\nTHE CHANGE (a diff against HEAD):\n{d}")),
        (Some(t), None) => Some(t.clone()),
        (None, Some(d)) => Some(format!("THE CHANGE (a diff against HEAD):\n{d}")),
        (None, None) => None,
    }
}

/// Runs gates. One per host: the judge slots are host-wide. Cheap to clone
/// (the clones share everything).
#[derive(Clone)]
pub struct GateRunner {
    /// The configuration its gates run under: one whole configuration,
    /// never changed (a reload makes another runner, [`Self::reconfigured`]).
    config: Arc<HostConfig>,
    inner: Arc<RunnerInner>,
}

/// What every runner of one host shares, reload after reload: made from
/// the settings that need a restart to change (`[sandbox]`, `[wasm]`,
/// `[judge] slots`, the private paths), never from the others.
struct RunnerInner {
    /// Made on first use (a run of only WASM gates spawns nothing, so it
    /// never probes cgroups), or given at construction.
    supervisor: OnceLock<Supervisor>,
    /// Made on first use, like the supervisor (Landlock's probe and the
    /// grants' paths are for native gates).
    sandbox: OnceLock<Sandbox>,
    judge_slots: Arc<Semaphore>,
    /// Started on the first WASM gate (an engine is not free).
    wasm: OnceLock<Result<WasmHost, String>>,
    /// The host's places no gate runs in, by identity, found on the first
    /// gate (not again for every gate).
    gate_free_places: OnceLock<crate::anchor::Places>,
    /// Whether its supervisor keeps the next gate's start made ahead
    /// (`Supervisor::keeping_ready`: a host that runs gate after gate, not
    /// a one-shot process).
    keep_ready: bool,
}

impl std::fmt::Debug for GateRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateRunner")
            .field("containment", &self.supervisor().containment())
            .field("judge_slots", &self.config.judge_slots)
            .finish()
    }
}

impl GateRunner {
    pub fn new(config: HostConfig) -> Self {
        Self::with(config, OnceLock::new(), true)
    }

    /// A runner for a process that runs its gates once and exits (`check`,
    /// a standalone hook, `plugin run`): WASM instances are allocated on
    /// demand and no spare instances are made. There is no next evaluation
    /// to reuse a pool slot or take a spare, and setting up the pool (its
    /// reservations and the guard page of every stack) would be paid on
    /// every run. The bounds are the same: memory is limited per store.
    /// Nor is a native gate's start made ahead (where gates join cgroup v1
    /// hierarchies): its first gate would wait for the same join.
    pub fn one_shot(mut config: HostConfig) -> Self {
        config.wasm.pooling = false;
        config.wasm.spare_instances = 0;
        Self::with(config, OnceLock::new(), false)
    }

    /// Ends a one-shot run whose gates have all ended (each removed its
    /// scratch directory and cgroup as it did): the supervisor and the
    /// sandbox are dropped as usual (the supervisor removes its spare
    /// cgroups), but the WASM engine is not torn down, page by page and
    /// entry by entry, only for the process to exit: it is leaked, and the
    /// exit frees it.
    pub fn end_one_shot(self) {
        if let Ok(mut inner) = Arc::try_unwrap(self.inner)
            && let Some(wasm) = inner.wasm.take()
        {
            std::mem::forget(wasm);
        }
    }

    pub fn with_supervisor(config: HostConfig, supervisor: Supervisor) -> Self {
        Self::with(config, OnceLock::from(supervisor), false)
    }

    /// A runner whose native gates get `sandbox` (a test's: the path of
    /// another platform, [`crate::sandbox::Platform`]).
    #[cfg(test)]
    pub(crate) fn with_sandbox(config: HostConfig, sandbox: Sandbox) -> Self {
        let runner = Self::new(config);
        let _ = runner.inner.sandbox.set(sandbox);
        runner
    }

    fn with(config: HostConfig, supervisor: OnceLock<Supervisor>, keep_ready: bool) -> Self {
        let slots = config.judge_slots.max(1);
        GateRunner {
            config: Arc::new(config),
            inner: Arc::new(RunnerInner {
                supervisor,
                sandbox: OnceLock::new(),
                judge_slots: Arc::new(Semaphore::new(slots)),
                wasm: OnceLock::new(),
                gate_free_places: OnceLock::new(),
                keep_ready,
            }),
        }
    }

    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// A runner of `config` sharing this one's supervisor, sandbox, judge
    /// slots, WASM engine and host places: `config` must hold this one's
    /// values of the settings that need a restart
    /// (`live_config::keep_until_restart`).
    pub fn reconfigured(&self, config: HostConfig) -> GateRunner {
        GateRunner {
            config: Arc::new(config),
            inner: self.inner.clone(),
        }
    }

    pub fn supervisor(&self) -> &Supervisor {
        self.inner.supervisor.get_or_init(|| {
            let s = Supervisor::new().spawning(self.config.sandbox.spawn);
            match self.inner.keep_ready {
                true => s.keeping_ready(self.config.gate_limits),
                false => s,
            }
        })
    }

    /// How native gates are confined on this host.
    pub fn sandbox(&self) -> &Sandbox {
        self.inner.sandbox.get_or_init(|| {
            let config = &self.config;
            Sandbox::new(&config.sandbox, &config.private_paths())
        })
    }

    /// The host's WASM engine, started on first use.
    pub fn wasm_host(&self) -> Result<&WasmHost, String> {
        self.inner
            .wasm
            .get_or_init(|| {
                tracing::debug!("starting the WASM engine");
                WasmHost::new(self.config.wasm.clone()).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Waits (FIFO: tokio's semaphore is fair) for a judge slot. Errs only
    /// if the slots were closed, which nothing does today.
    async fn acquire_judge_slot(&self) -> Result<OwnedSemaphorePermit, tokio::sync::AcquireError> {
        self.inner.judge_slots.clone().acquire_owned().await
    }

    /// Runs one gate against the workspace.
    pub async fn run_gate(
        &self,
        gate: &Gate,
        anchor: &WorkspaceAnchor,
        ctx: &GateContext,
    ) -> Verdict {
        // No gate of any kind runs in (or reads) a workspace that holds, or
        // lies inside, the host's own places: a WASM plugin or a judge's
        // diff could spell out the tokens there.
        let places = self
            .inner
            .gate_free_places
            .get_or_init(|| crate::anchor::Places::of(&self.config.gate_free_places()));
        if let Some(place) = anchor.overlapping(places) {
            let verdict = Verdict::error(
                gate.label(),
                format!(
                    "the workspace {} overlaps gatehost's own {} (its configuration, tokens, data, cache or scratch); no gate runs there",
                    anchor.root().display(),
                    place.display()
                ),
            );
            tracing::error!(gate = %verdict.gate, reason = %verdict.reason, "gate refused");
            return verdict;
        }
        self.run_kind(gate, anchor, ctx).await.0
    }

    /// Runs the gate's kind; what a gate given the change was not shown
    /// is added to its findings.
    async fn run_kind(
        &self,
        gate: &Gate,
        anchor: &WorkspaceAnchor,
        ctx: &GateContext,
    ) -> (Verdict, Option<PluginUsage>) {
        let label = gate.label();
        let named = run::Named {
            label: &label,
            paths: gate.paths(),
        };
        let (mut verdict, usage) = run::runner_of(&gate.kind)
            .run(self, named, anchor, ctx)
            .await;
        if gate.imp().sees_change() {
            verdict.findings.extend(capped_findings(ctx));
        }
        tracing::info!(gate = %verdict.gate, outcome = verdict.outcome.as_str(), reason = %verdict.reason, "gate resolved");
        (verdict, usage)
    }

    /// Runs one gate as `run_gate` does and, for a WASM gate whose plugin
    /// got as far as an evaluation, also returns what that evaluation used
    /// against its bounds (`gatehost plugin run`).
    pub async fn run_gate_measured(
        &self,
        gate: &Gate,
        anchor: &WorkspaceAnchor,
        ctx: &GateContext,
    ) -> (Verdict, Option<PluginUsage>) {
        if !gate.imp().runs_plugin() {
            return (self.run_gate(gate, anchor, ctx).await, None);
        }
        self.run_kind(gate, anchor, ctx).await
    }

    /// Checks, without running anything, that `gate` could run against
    /// the workspace: the shell command and its arguments are admitted (as
    /// written by `trust`), its environment is allowed, it lives outside the
    /// workspace, its cwd resolves inside it, the judge adapter is
    /// configured and its program found, the plugin resolves, is pinned
    /// where it must be, loads as a gate component and asks for bounds
    /// within the maxima. Used to refuse a policy at attach time.
    pub fn preflight(
        &self,
        gate: &Gate,
        anchor: &WorkspaceAnchor,
        trust: Trust,
    ) -> Result<(), String> {
        run::runner_of(&gate.kind).preflight(self, anchor, trust)
    }

    /// Runs a list of gates cheapest first (shell before judge, the file's
    /// order kept within a kind) and stops at the first that does not pass.
    /// First, before any runs, a native gate whose program the sandbox
    /// would not let run is an `error` (the others skipped).
    pub async fn run_gates(
        &self,
        gates: &[Gate],
        anchor: &WorkspaceAnchor,
        ctx: &GateContext,
    ) -> RunReport {
        let mut ordered: Vec<&Gate> = gates.iter().collect();
        ordered.sort_by_key(|g| g.cost_class());
        // A program the sandbox would keep from running is an `error`
        // before any gate runs, not a red test after the others ran.
        if let Some((i, reason)) = ordered
            .iter()
            .enumerate()
            .find_map(|(i, g)| self.out_of_reach(g, ctx.trust).map(|r| (i, r)))
        {
            let gate = ordered[i];
            let verdict = Verdict::error(gate.label(), reason);
            // Info: the verdict is what the caller reports (`check` prints
            // it, the daemon logs its policy's outcome at warn and emits it).
            tracing::info!(gate = %verdict.gate, reason = %verdict.reason, "gate refused before any gate ran");
            let skipped = ordered
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, g)| g.label())
                .collect();
            return RunReport::from_verdicts(vec![verdict], skipped);
        }
        let mut verdicts = Vec::new();
        let mut rest = ordered.into_iter();
        for gate in rest.by_ref() {
            let v = self.run_gate(gate, anchor, ctx).await;
            let passed = v.passed();
            verdicts.push(v);
            if !passed {
                break;
            }
        }
        let skipped = rest.map(Gate::label).collect();
        RunReport::from_verdicts(verdicts, skipped)
    }
}

impl GateRunner {
    /// For every allowlist entry whose program the sandbox would keep
    /// from running (or what it runs), why; each is logged.
    pub fn allowlist_out_of_reach(&self) -> Vec<String> {
        let config = self.config();
        let lookup = crate::sandbox::Lookup::host(config.host_path.as_deref());
        let mut out = Vec::new();
        for e in config.allow.entries() {
            let Some(program) = &e.program else { continue };
            if let Some(u) = self.sandbox().unreached(&e.spelled, program, &[], &lookup) {
                let why = format!(
                    "shell.allow[{}] ({}): {}",
                    e.index,
                    e.spelled,
                    u.message(&config_shown(config))
                );
                tracing::warn!(entry = %format!("shell.allow[{}]", e.index), program = %program.display(), reason = %why, "an allowlisted program is out of the sandbox's reach; its gates will be errors");
                out.push(why);
            }
        }
        out
    }

    /// Why the sandbox would keep a native gate's program (or what it
    /// runs) from running, found without running anything.
    fn out_of_reach(&self, gate: &Gate, trust: Trust) -> Option<String> {
        run::runner_of(&gate.kind).reach(self, trust)
    }
}

/// The configuration file, as messages name it.
fn config_shown(config: &HostConfig) -> String {
    config
        .source
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "the configuration file".to_string())
}

/// The environment every gate process starts from: the host's PATH (as
/// captured with the configuration), HOME and LANG. Nothing else.
fn base_env(host_path: Option<&std::ffi::OsStr>) -> Vec<(OsString, OsString)> {
    let mut env = Vec::new();
    if let Some(p) = host_path {
        env.push((OsString::from("PATH"), p.to_os_string()));
    }
    for name in ["HOME", "LANG"] {
        if let Some(v) = std::env::var_os(name) {
            env.push((OsString::from(name), v));
        }
    }
    env
}

fn fill_process_details(v: &mut Verdict, run: ProcessRun, queued: Duration) {
    match run.termination {
        Termination::Exited(code) => v.exit_code = Some(code),
        Termination::Signaled(sig) => v.signal = Some(sig),
        Termination::Unreaped => {}
    }
    v.timed_out = run.timed_out;
    v.durations = Durations::new(queued, run.elapsed);
    let tail = |b: crate::supervise::TailBuffer| {
        let total_bytes = b.total();
        let truncated = b.truncated();
        OutputTail {
            text: String::from_utf8_lossy(&b.into_bytes()).into_owned(),
            total_bytes,
            truncated,
        }
    };
    v.stdout = Some(tail(run.stdout));
    v.stderr = Some(tail(run.stderr));
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => "another signal",
    }
}

#[cfg(test)]
mod platform_tests;
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_a_person_would() {
        assert_eq!(human_duration(Duration::from_millis(250)), "250 ms");
        assert_eq!(human_duration(Duration::from_secs(1)), "1 s");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(human_duration(Duration::from_secs(120)), "2 min");
        assert_eq!(human_duration(Duration::from_secs(125)), "2 min 5 s");
    }
}
