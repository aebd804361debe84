//! The WIT interfaces the host implements, one module per version
//! (Zed's layout): today `v0_1`, the `gate-plugin` world of `wit/v0.1`. A
//! new version gets a module of its own beside it, so plugins built
//! against an older one keep loading. Generated bindings only: what the
//! host does for each import lives in the modules that own it.

pub(crate) mod v0_1;
