//! Freeing off the caller's path what takes long to free: closing an
//! inotify descriptor waits out an RCU grace period (10-15 ms at 1,000
//! watches). (Not a hook's change set: freed on another thread while the
//! plugin starts, its 200,000 allocations saved 6.7 ms of a 100,000-file
//! stop but raised its peak RSS from 59.8 to 66.4 MiB, the freed memory
//! not yet given back when the WASM engine allocated.)
//!
//! Owns: the thread that drops them. Must never: hold anything whose drop
//! has an effect someone waits for (a lock, a file being written, a
//! child): only memory and descriptors nobody reads again.

/// Drops `value` on a thread of its own (named after `what`); inline when
/// no thread can be started. A process that exits meanwhile leaves the
/// freeing to the kernel.
pub(crate) fn dispose<T: Send + 'static>(what: &'static str, value: T) {
    let mut value = Some(value);
    let spawned = std::thread::Builder::new()
        .name(format!("gatehost-free-{what}"))
        .spawn({
            let value = value.take();
            move || drop(value)
        });
    if let Err(e) = spawned {
        tracing::debug!(what, error = %e, "freeing inline");
        drop(value);
    }
}
