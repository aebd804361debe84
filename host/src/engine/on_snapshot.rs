//! Gating on a snapshot: the commit paths read once into git objects
//! (their directories watched from before they are listed, and, between
//! turns, by the watch kept per workspace and commit paths, so that a
//! snapshot reads only what changed since the last; see
//! `commit::snapshot_standing`), a worktree
//! brought to the snapshot's tree (only the paths the gates name, when
//! each names some), the gates run there; then, after a pass, which commit
//! paths changed in the workspace since.
//!
//! Must never: let the gates see the live workspace, or settle the
//! worktree before the caller is done with the machine for the verdict.

use super::AttachInput;
use super::Policies;
use crate::commit::{Standing, TreeSnapshot, Watch, WatchBudget};
use crate::gate::GateRunner;
use crate::store::PolicyRow;
use crate::verdict::RunReport;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One workspace's watch kept between turns (for one set of commit
/// paths).
pub(crate) type StandingSlot = Arc<Mutex<Option<Standing>>>;

/// At most this many watches are kept between turns: each holds an
/// inotify instance (Linux allows 128 per user by default, shared with
/// every other program the user runs). Past it, the one asked for
/// longest ago and not in use is dropped (its workspace's next snapshot
/// walks, and watches again).
pub(crate) const KEPT_WATCHES: usize = 32;

/// The watches kept between turns, per workspace and commit paths, each
/// with when it was last asked for (a count of asks).
#[derive(Default)]
pub(crate) struct KeptWatches {
    slots: std::collections::HashMap<String, (u64, StandingSlot)>,
    asks: u64,
}

impl KeptWatches {
    /// The slot of `key` (made when new); when `limit` are kept, the one
    /// asked for longest ago that no snapshot holds is dropped first.
    pub(super) fn slot(&mut self, key: String, limit: usize) -> StandingSlot {
        self.asks += 1;
        if !self.slots.contains_key(&key) && self.slots.len() >= limit {
            let idle = self
                .slots
                .iter()
                .filter(|(_, (_, slot))| Arc::strong_count(slot) == 1)
                .min_by_key(|(_, (asked, _))| *asked)
                .map(|(k, _)| k.clone());
            if let Some(k) = idle {
                self.slots.remove(&k);
                tracing::info!(
                    kept = limit,
                    "a watch kept between turns is dropped: the one asked for longest ago (its next snapshot walks)"
                );
            }
        }
        let kept = self
            .slots
            .entry(key)
            .or_insert_with(|| (0, StandingSlot::default()));
        kept.0 = self.asks;
        kept.1.clone()
    }
}

/// What says, after a passing gate, whether the commit paths changed
/// since the snapshot without reading them.
pub(super) enum After {
    /// A watch made for this snapshot alone.
    Own(Watch),
    /// The watch kept between turns, as it was after the snapshot.
    Standing(StandingSlot),
}

/// What a run on a snapshot's worktree brings to its gates.
pub(super) struct OnSnapshot {
    /// The snapshot's diff against `HEAD` (for the plugins).
    pub(super) changes: Result<Vec<crate::change::FileChange>, String>,
    /// The overlay their processes see the worktree through.
    pub(super) overlay: Option<Arc<crate::supervise::WorkOverlay>>,
}

/// What a run on a snapshot hands back.
pub(super) struct SnapshotRun {
    pub(super) report: RunReport,
    /// The snapshot and its diff against `HEAD`, when it could be taken.
    pub(super) taken: Option<(TreeSnapshot, Vec<crate::change::FileChange>)>,
    /// The worktree, to settle once the caller no longer needs the
    /// machine (`worktree::settle_in_background`).
    pub(super) lease: Option<crate::worktree::Lease>,
    /// The snapshot's watch (`None` when it could not be made), for
    /// [`changed_after`].
    pub(super) watch: Option<After>,
    /// The overlay the gates saw the worktree through, when one was made:
    /// unless a process bypassed it, the worktree needs no settle.
    pub(super) overlay: Option<Arc<crate::supervise::WorkOverlay>>,
}

impl Policies {
    /// Takes the snapshot of the commit paths (objects written from a
    /// thread that may write only beneath `.git`), brings a worktree to its
    /// tree, and runs the gates there, with its diff against `HEAD` as the
    /// change. A snapshot or worktree that cannot be made is an `error`.
    pub(super) async fn run_on_snapshot(
        &self,
        runner: &GateRunner,
        policy: &PolicyRow,
        input: &AttachInput,
        sessions: &[crate::store::SessionRow],
        workspace: &str,
        paths: &[String],
    ) -> SnapshotRun {
        let failed = |reason: String, taken| SnapshotRun {
            report: RunReport::error(reason),
            taken,
            lease: None,
            watch: None,
            overlay: None,
        };
        let confining = runner.clone();
        let (ws, wanted) = (workspace.to_string(), paths.to_vec());
        let cache = self.stat_cache(workspace);
        let limits = runner.config().watch_limits;
        // The watch kept between turns, unless `[limits]` turns it off.
        let standing = (limits.per_workspace > 0).then(|| self.standing(workspace, paths));
        let budget = WatchBudget {
            per_workspace: limits.per_workspace,
            total: limits.total,
            held: self.watch_held.clone(),
        };
        let taken = tokio::task::spawn_blocking(move || {
            let mut guard = cache.lock().unwrap_or_else(|p| p.into_inner());
            let cache: &mut crate::commit::StatCache = &mut guard;
            if let Some(slot) = standing {
                let mut held = slot.lock().unwrap_or_else(|p| p.into_inner());
                if held.is_none() {
                    *held = Standing::new(budget)
                        .map_err(|e| tracing::info!(error = %e, "cannot keep a watch on the commit paths: every snapshot walks them"))
                        .ok();
                }
                if let Some(kept) = held.as_mut() {
                    let taken = super::commits::confined(&confining, Path::new(&ws), || {
                        crate::commit::snapshot_standing(Path::new(&ws), &wanted, cache, kept)
                    });
                    drop(held);
                    return taken.map(|(taken, _)| (taken, Some(After::Standing(slot))));
                }
            }
            let watch = Watch::new()
                .map_err(|e| tracing::debug!(error = %e, "cannot watch the commit paths"))
                .ok();
            super::commits::confined(&confining, Path::new(&ws), || {
                crate::commit::snapshot_watched(Path::new(&ws), &wanted, cache, watch.as_ref())
            })
            .map(|taken| (taken, watch.map(After::Own)))
        })
        .await;
        let ((snap, changes), watch) = match taken {
            Ok(Ok(taken)) => taken,
            Ok(Err(e)) => return failed(format!("cannot snapshot the commit paths: {e}"), None),
            Err(e) => return failed(format!("the snapshot task failed: {e}"), None),
        };
        let worktrees = self.worktrees.clone();
        let (ws, tree) = (workspace.to_string(), snap.tree.clone());
        // What the agent attached never shares a worktree (nor a cache)
        // with what the operator attached.
        let tenant = match input.attached_by {
            crate::config::Trust::Operator => crate::worktree::Tenant::Operator,
            crate::config::Trust::Agent => crate::worktree::Tenant::Agent,
        };
        let view = view_of(input);
        let overlaid = runner.config().daemon.worktree_overlay && runner.sandbox().confines();
        let pid = policy.id.clone();
        let leased = tokio::task::spawn_blocking(move || {
            let mut lease = worktrees.lease_view(Path::new(&ws), tenant, view)?;
            let stats = crate::worktree::sync(&mut lease, Path::new(&ws), &tree)?;
            let overlay = overlaid.then(|| overlay_for(&lease, &pid)).flatten();
            Ok::<_, crate::worktree::WorktreeError>((lease, stats, overlay))
        })
        .await;
        let (lease, overlay) = match leased {
            Ok(Ok((lease, stats, overlay))) => {
                tracing::debug!(policy = %policy.id, tree = %snap.tree, written = stats.written, removed = stats.removed, kept = stats.kept, "worktree ready");
                (lease, overlay)
            }
            Ok(Err(e)) => {
                return failed(
                    format!("cannot check the snapshot out: {e}"),
                    Some((snap, changes.unwrap_or_default())),
                );
            }
            Err(e) => {
                return failed(
                    format!("the worktree task failed: {e}"),
                    Some((snap, changes.unwrap_or_default())),
                );
            }
        };
        let worktree = lease.path().display().to_string();
        let report = self
            .run_policy_gates(
                runner,
                policy,
                input,
                sessions,
                &worktree,
                Some(OnSnapshot {
                    changes: changes.clone(),
                    overlay: overlay.clone(),
                }),
            )
            .await;
        SnapshotRun {
            report,
            taken: Some((snap, changes.unwrap_or_default())),
            lease: Some(lease),
            watch,
            overlay,
        }
    }
}

/// The overlay a run's gates see `lease`'s worktree through, so that
/// what they write never reaches it (see `supervise::WorkOverlay`); `None`
/// when its layers cannot be made (said at debug: the run is only slower
/// to clean up after). Blocking. The caller asks for one only where
/// `[daemon] worktree_overlay` is on and gates are confined (an
/// unconfined judge could write the worktree itself, which is then read
/// back after the run).
fn overlay_for(
    lease: &crate::worktree::Lease,
    policy: &str,
) -> Option<Arc<crate::supervise::WorkOverlay>> {
    let made = lease
        .layers()
        .map_err(|e| e.to_string())
        .and_then(|layers| {
            let caches: Vec<&Path> = layers.caches.iter().map(PathBuf::as_path).collect();
            crate::supervise::WorkOverlay::new(lease.path(), &layers.upper, &layers.work, &caches)
                .map_err(|e| e.to_string())
        });
    match made {
        Ok(overlay) => Some(Arc::new(overlay)),
        Err(e) => {
            tracing::debug!(policy, error = %e, "no overlay over the worktree: it is read back after the run");
            None
        }
    }
}

/// What of the snapshot the policy's gates need checked out: the union of
/// their `paths` when every gate names some, else everything.
fn view_of(input: &AttachInput) -> crate::worktree::View {
    let gates = input.gates();
    let named: Option<Vec<&[String]>> = gates.iter().map(|g| g.paths()).collect();
    match named {
        Some(named) if !named.is_empty() => {
            crate::worktree::View::only(named.into_iter().flatten().map(String::as_str))
        }
        _ => crate::worktree::View::whole(),
    }
}

/// The commit paths whose content in `workspace` differs from `snap`'s
/// now: none without a read when `watch` saw nothing change since the
/// snapshot listed their directories, else read again (warm `cache`).
pub(super) async fn changed_after(
    workspace: &str,
    snap: &TreeSnapshot,
    cache: std::sync::Arc<std::sync::Mutex<crate::commit::StatCache>>,
    watch: Option<After>,
) -> Result<Vec<String>, String> {
    let Some(watch) = watch else {
        tracing::debug!(tree = %snap.tree, "no watch: reading the commit paths again");
        return super::pinned::changed_since(workspace, snap, cache).await;
    };
    let said = match &watch {
        After::Own(watch) => watch.unchanged(),
        After::Standing(slot) => match &*slot.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(kept) => kept.unchanged_since(&snap.tree),
            None => Err("the watch is gone".into()),
        },
    };
    let why = match said {
        Ok(()) => {
            tracing::debug!(tree = %snap.tree, "nothing watched changed since the snapshot");
            return Ok(Vec::new());
        }
        Err(why) => why,
    };
    tracing::debug!(tree = %snap.tree, why, "reading the commit paths again");
    super::pinned::changed_since(workspace, snap, cache).await
}

#[cfg(test)]
mod tests {
    use super::KeptWatches;

    /// Past the limit, the watch asked for longest ago goes, never one a
    /// snapshot holds.
    #[test]
    fn past_the_limit_the_idle_watch_asked_for_longest_ago_is_dropped() {
        let mut kept = KeptWatches::default();
        let held = kept.slot("a".into(), 3);
        for k in ["b", "c"] {
            drop(kept.slot(k.into(), 3));
        }
        drop(kept.slot("d".into(), 3));
        let mut keys: Vec<&String> = kept.slots.keys().collect();
        keys.sort();
        assert_eq!(keys, ["a", "c", "d"], "b went: a is held");
        drop(held);
        drop(kept.slot("c".into(), 3));
        drop(kept.slot("e".into(), 3));
        let mut keys: Vec<&String> = kept.slots.keys().collect();
        keys.sort();
        assert_eq!(keys, ["c", "d", "e"], "a went: asked for longest ago");
    }
}
