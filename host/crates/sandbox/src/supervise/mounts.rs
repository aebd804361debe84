//! The enforcer's side of the mounts a child makes in its own mount
//! namespace: the scratch tmpfs (`scratch`) and the worktree's overlay
//! (`overlay`), prepared per spawn, and turned off for the host (said
//! once) when a child could not make them.
//!
//! Must never: hand a child a mount once one like it has failed on this
//! host (each failure would cost a spawn), or fail silently.

// Only Linux's `clone3` child mounts anything: elsewhere these are unused
// (and Linux's build, where all of them are, finds its dead code).
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use super::limits::Enforcer;

impl Enforcer {
    /// The tmpfs a child mounts over `dir` to bound it to `bytes` (owned
    /// by `owner`, the gate's user, where it runs as one); `None` once a
    /// child could not (see [`Self::scratch_failed`]).
    pub(super) fn scratch_mount(
        &self,
        dir: &std::path::Path,
        bytes: u64,
        owner: Option<(u32, u32)>,
    ) -> Option<super::scratch::ScratchMount> {
        if self.scratch_off.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let m = super::scratch::ScratchMount::new(dir, bytes, owner, self.scratch_way);
        if m.is_none() {
            self.scratch_unenforced();
        }
        m
    }

    /// A child could not mount its scratch tmpfs (`errno`): the bound is
    /// off on this host from now on, which is said once.
    pub(super) fn scratch_failed(&self, errno: i32) {
        self.turn_off(
            &self.scratch_off,
            "scratch",
            errno,
            "cannot mount a tmpfs over a gate's scratch directory: [limits] gate_scratch_bytes is not enforced (a size-limited [sandbox] scratch_dir bounds the total instead)",
        );
    }

    /// Sets `off` (no child tries that mount again) and says `why` once,
    /// with the child's `errno` and the way it made its namespace.
    fn turn_off(
        &self,
        off: &std::sync::atomic::AtomicBool,
        what: &'static str,
        errno: i32,
        why: &str,
    ) {
        off.store(true, std::sync::atomic::Ordering::Relaxed);
        let e = std::io::Error::from_raw_os_error(errno);
        let way = self.scratch_way;
        self.say_once(what, || tracing::warn!(error = %e, ?way, "{why}"));
    }

    #[cfg(target_os = "linux")]
    /// What a child mounts to run on `overlay` in `cwd` (relative to the
    /// worktree); `None` once a child could not (see
    /// [`Self::overlay_failed`]).
    pub(super) fn overlay_mount<'a>(
        &self,
        overlay: &'a super::WorkOverlay,
        cwd: &std::path::Path,
    ) -> Option<super::overlay::Mount<'a>> {
        if self.overlay_off.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        super::overlay::Mount::new(overlay, cwd, self.scratch_way)
    }

    #[cfg(target_os = "linux")]
    /// A child could not mount a worktree's overlay (`errno`): gates run
    /// on their worktrees themselves from now on, which is said once.
    pub(super) fn overlay_failed(&self, errno: i32) {
        self.turn_off(
            &self.overlay_off,
            "overlay",
            errno,
            "cannot mount an overlay over a gate's worktree: gates write their worktrees, which are read whole after each run",
        );
    }

    /// This spawn's way cannot mount a scratch tmpfs: said once.
    pub(super) fn scratch_unenforced(&self) {
        self.say_once("scratch", || {
            tracing::warn!("gates are not started by clone3 here: [limits] gate_scratch_bytes is not enforced (a size-limited [sandbox] scratch_dir bounds the total instead)");
        });
    }
}
