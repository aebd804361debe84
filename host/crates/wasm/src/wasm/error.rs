//! Why a plugin could not give a verdict: one variant per refusal and per
//! bound, each an `error` outcome whose message names the plugin and the
//! cause.

/// Why a plugin could not give a verdict. Each is an `error` outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    #[error("plugin '{plugin}' cannot be read: {message}")]
    Unreadable { plugin: String, message: String },
    #[error(
        "plugin '{plugin}' was not found in the plugin directories ({dirs}), {carried} \
         (`gatehost plugin list` shows every plugin it can find)"
    )]
    NotFound {
        plugin: String,
        dirs: String,
        carried: String,
    },
    /// Never says the file's digest: the gate's author (the agent) could
    /// otherwise learn the digest of any file the host can read.
    #[error(
        "plugin '{plugin}': its sha256 is not the {expected} the gate pins \
         (`gatehost plugin inspect FILE` shows a file's digest to the operator)"
    )]
    DigestMismatch { plugin: String, expected: String },
    #[error(
        "plugin '{plugin}': {path} is outside the workspace and the plugin directories; \
         only the operator may name a plugin there"
    )]
    OutsidePath { plugin: String, path: String },
    #[error(
        "plugin '{plugin}' lies inside the workspace, where the agent can swap it; pin it with \"sha256\""
    )]
    UnpinnedInWorkspace { plugin: String },
    #[error(
        "plugin '{plugin}' is given by path: pin it with \"sha256\" (or install it in a plugin directory and name it)"
    )]
    UnpinnedPath { plugin: String },
    #[error("plugin '{plugin}' is not a WebAssembly component: {message}")]
    NotAComponent { plugin: String, message: String },
    #[error("plugin '{plugin}' is not a valid component: {message}")]
    Invalid { plugin: String, message: String },
    #[error("plugin '{plugin}' imports {import}, which gatehost does not grant")]
    ForbiddenImport { plugin: String, import: String },
    #[error("plugin '{plugin}' does not target the gatehost:gate@0.1 gate-plugin world: {message}")]
    WrongWorld { plugin: String, message: String },
    #[error("plugin '{plugin}': {bound} {asked} exceeds the host's maximum of {max}")]
    OverMaximum {
        plugin: String,
        bound: &'static str,
        asked: u64,
        max: u64,
    },
    #[error("plugin '{plugin}' timed out after {after}")]
    Timeout { plugin: String, after: String },
    #[error("plugin '{plugin}' ran out of fuel (its budget is {fuel} instructions)")]
    OutOfFuel { plugin: String, fuel: u64 },
    #[error("plugin '{plugin}' exceeded its memory limit of {mib} MiB")]
    Memory { plugin: String, mib: u64 },
    #[error("plugin '{plugin}' exceeded its output limit of {bytes} bytes")]
    Output { plugin: String, bytes: u64 },
    #[error(
        "plugin '{plugin}' gave {count} findings; the host keeps at most {max} ([wasm] max_findings)"
    )]
    Findings {
        plugin: String,
        count: usize,
        max: usize,
    },
    #[error("plugin '{plugin}' exceeded its limit of {calls} judge call(s) per evaluation")]
    JudgeCalls { plugin: String, calls: u32 },
    #[error("plugin '{plugin}' trapped: {message}")]
    Trap { plugin: String, message: String },
    #[error("plugin '{plugin}' reported an error: {message}")]
    Reported { plugin: String, message: String },
    #[error("the WASM engine cannot start: {0}")]
    Engine(String),
}
