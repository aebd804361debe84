//! Spare instances: a plugin's next instance, instantiated in the
//! background after an evaluation, so that the next evaluation of the same
//! plugin under the same bounds starts at the call instead of at
//! instantiation, and the finished store is dropped off its path too.
//!
//! Owns the spares (at most the configured number, each holding one pool
//! slot) and the background task that makes them. A spare is a store and
//! instance never called: an evaluation takes it whole, fills in its own
//! state and calls it once; it is never handed to a second evaluation.
//!
//! It must never let a spare carry anything of the evaluation it was made
//! after into the next one: spares are made only for plugins that do not
//! import `wasi:filesystem` (whose WASI context depends on no workspace),
//! with empty diffs, no workspace and no judge (a spare holds nothing that
//! holds the host), and until an evaluation gives the store its judge,
//! every gatehost host import refuses. A plugin that calls one while being
//! instantiated (a start function) gets no spares again.

use super::LoadedPlugin;
use super::bindings::GatePlugin;
use super::state::PluginState;
use super::store::Prepared;
use crate::config::PluginBounds;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::{Engine, Store};

/// The most spares a host keeps, whatever its configuration says: a
/// quarter of the pool's instance slots.
pub(super) const MAX_SPARES: usize = super::POOL_INSTANCES as usize / 4;

/// The spares of one host.
#[derive(Clone)]
pub(super) struct Spares {
    inner: Arc<Mutex<Inner>>,
    /// How many spares may exist at once (0: none are made).
    limit: usize,
}

/// A spare is made for one plugin (its digest) under one set of bounds.
type Key = (String, PluginBounds);

#[derive(Default)]
struct Inner {
    ready: HashMap<Key, Prepared>,
    /// Spares being made.
    making: HashSet<Key>,
    /// Digests of plugins that may not have spares (their instantiation
    /// failed or called the host ahead of an evaluation).
    refused: HashSet<String>,
}

/// What the background task needs to make a spare.
pub(super) struct SpareRecipe {
    pub engine: Engine,
    pub plugin: Arc<LoadedPlugin>,
    pub bounds: PluginBounds,
    pub slots: Arc<Semaphore>,
}

impl Spares {
    /// At most `limit` spares, and never more than `MAX_SPARES` (each
    /// holds one of the pool's slots).
    pub(super) fn new(limit: usize) -> Self {
        Spares {
            inner: Arc::new(Mutex::new(Inner::default())),
            limit: limit.min(MAX_SPARES),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `plugin` can have spares at all.
    pub(super) fn eligible(&self, plugin: &LoadedPlugin) -> bool {
        self.limit > 0 && !plugin.uses.filesystem
    }

    /// Takes the spare made for `plugin` under `bounds`, if there is one
    /// (a spare's memory budget, fuel and output caps are set when it is
    /// made: one made under other bounds is never taken).
    pub(super) fn take(&self, plugin: &LoadedPlugin, bounds: PluginBounds) -> Option<Prepared> {
        if !self.eligible(plugin) {
            return None;
        }
        self.lock().ready.remove(&(plugin.digest.clone(), bounds))
    }

    /// Drops every spare, freeing their pool slots (when evaluations are
    /// waiting for one).
    pub(super) fn clear(&self) {
        let dropped: Vec<Prepared> = self.lock().ready.drain().map(|(_, p)| p).collect();
        drop(dropped);
    }

    /// After an evaluation: drops its store and makes the plugin's next
    /// spare, both on a background task when a spare is wanted; otherwise
    /// drops the store here.
    pub(super) fn replenish(
        &self,
        used: (Store<PluginState>, OwnedSemaphorePermit),
        recipe: SpareRecipe,
    ) {
        let digest = recipe.plugin.digest.clone();
        let key: Key = (digest.clone(), recipe.bounds);
        let wanted = self.eligible(&recipe.plugin) && {
            let mut inner = self.lock();
            let wanted = !inner.refused.contains(&digest)
                && !inner.ready.contains_key(&key)
                && !inner.making.contains(&key);
            if wanted {
                inner.making.insert(key.clone());
            }
            wanted
        };
        let runtime = tokio::runtime::Handle::try_current();
        let (true, Ok(runtime)) = (wanted, runtime) else {
            if wanted {
                self.lock().making.remove(&key);
            }
            return drop(used);
        };
        let spares = self.clone();
        runtime.spawn(async move {
            drop(used);
            let made = match recipe.slots.clone().try_acquire_owned() {
                // Every slot is in use: no spare now.
                Err(_) => Ok(None),
                Ok(slot) => make(&recipe, slot).await.map(Some),
            };
            let mut evicted = None;
            let mut inner = spares.lock();
            inner.making.remove(&key);
            match made {
                Ok(Some(spare)) => {
                    if inner.ready.len() >= spares.limit {
                        let other = inner.ready.keys().next().cloned();
                        evicted = other.and_then(|k| inner.ready.remove(&k));
                    }
                    inner.ready.insert(key, spare);
                }
                Ok(None) => {}
                Err(Unmade::Refused(why)) => {
                    tracing::info!(plugin = %recipe.plugin.name, %why, "no spare instances for this plugin");
                    inner.refused.insert(digest);
                }
                // Under bounds too tight to instantiate, for instance: the
                // evaluation that would take it will say so itself.
                Err(Unmade::Failed(why)) => {
                    tracing::debug!(plugin = %recipe.plugin.name, %why, "no spare instance this time");
                }
            }
            drop(inner);
            drop(evicted);
        });
    }
}

/// Why no spare was made.
enum Unmade {
    /// The plugin called the host while being instantiated: never again.
    Refused(String),
    /// This time (a bound, an error).
    Failed(String),
}

/// Instantiates `recipe.plugin` in a store prepared ahead of its
/// evaluation, bounded by the evaluation's own timeout.
async fn make(recipe: &SpareRecipe, slot: OwnedSemaphorePermit) -> Result<Prepared, Unmade> {
    let parts = super::store::StoreParts {
        plugin: &recipe.plugin,
        bounds: recipe.bounds,
        workspace_root: None,
        workspace_dir: None,
        diffs: Default::default(),
        judge: None,
    };
    let (mut store, stdout, stderr) = super::store::new_store(&recipe.engine, parts)
        .map_err(|e| Unmade::Failed(e.to_string()))?;
    super::store::set_deadline(&mut store, recipe.bounds.timeout);
    let instantiated = tokio::time::timeout(
        recipe.bounds.timeout,
        recipe.plugin.pre.instantiate_async(&mut store),
    )
    .await;
    if store.data().called_ahead {
        return Err(Unmade::Refused(
            "it calls the host while being instantiated".into(),
        ));
    }
    let instance: GatePlugin = instantiated
        .map_err(|_| Unmade::Failed("instantiation took longer than the timeout".into()))?
        .map_err(|e| Unmade::Failed(format!("{e:#}")))?;
    Ok(Prepared {
        store,
        instance,
        stdout,
        stderr,
        slot,
    })
}
