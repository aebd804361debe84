//! Why a plugin could not give a verdict: one variant per refusal and per
//! bound, each an `error` outcome whose message names the plugin and the
//! cause.

/// Why a plugin could not give a verdict. Each is an `error` outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// The plugin's file could not be read.
    #[error("plugin '{plugin}' cannot be read: {message}")]
    Unreadable {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// The error reading it.
        message: String,
    },
    /// A plugin named (not given by path) is in no plugin directory and is
    /// not carried.
    #[error(
        "plugin '{plugin}' was not found in the plugin directories ({dirs}), {carried} \
         (`gatehost plugin list` shows every plugin it can find)"
    )]
    NotFound {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// The plugin directories looked in (or that none is configured).
        dirs: String,
        /// What plugins are carried, for the message.
        carried: String,
    },
    /// The plugin's file does not have the sha256 the gate pins. Never
    /// says the file's digest: the gate's author (the agent) could
    /// otherwise learn the digest of any file the host can read.
    #[error(
        "plugin '{plugin}': its sha256 is not the {expected} the gate pins \
         (`gatehost plugin inspect FILE` shows a file's digest to the operator)"
    )]
    DigestMismatch {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// The digest the gate pins (hex).
        expected: String,
    },
    /// A plugin given by a path outside the workspace and the plugin
    /// directories, in a gate the operator did not write.
    #[error(
        "plugin '{plugin}': {path} is outside the workspace and the plugin directories; \
         only the operator may name a plugin there"
    )]
    OutsidePath {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// The path, as given.
        path: String,
    },
    /// A plugin file inside the workspace without a `sha256` pin.
    #[error(
        "plugin '{plugin}' lies inside the workspace, where the agent can swap it; pin it with \"sha256\""
    )]
    UnpinnedInWorkspace {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
    },
    /// A plugin given by path without a `sha256` pin.
    #[error(
        "plugin '{plugin}' is given by path: pin it with \"sha256\" (or install it in a plugin directory and name it)"
    )]
    UnpinnedPath {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
    },
    /// The file is not a WebAssembly component (a core module, or not
    /// WebAssembly).
    #[error("plugin '{plugin}' is not a WebAssembly component: {message}")]
    NotAComponent {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// What the parser found instead.
        message: String,
    },
    /// The component does not validate or compile.
    #[error("plugin '{plugin}' is not a valid component: {message}")]
    Invalid {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// The validator's or compiler's message.
        message: String,
    },
    /// The component imports an interface gatehost does not grant.
    #[error("plugin '{plugin}' imports {import}, which gatehost does not grant")]
    ForbiddenImport {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// The import's name (`wasi:sockets/tcp`, …).
        import: String,
    },
    /// The component does not export the gate-plugin world's interface.
    #[error("plugin '{plugin}' does not target the gatehost:gate@0.1 gate-plugin world: {message}")]
    WrongWorld {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// What is missing or mistyped.
        message: String,
    },
    /// The gate asks for a bound above the host's `[wasm]` maximum.
    #[error("plugin '{plugin}': {bound} {asked} exceeds the host's maximum of {max}")]
    OverMaximum {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// The gate's field (`timeoutMs`, `fuel`, …).
        bound: &'static str,
        /// What the gate asks for (that field's unit).
        asked: u64,
        /// The host's maximum for it.
        max: u64,
    },
    /// The plugin ran past its timeout (the epoch deadline).
    #[error("plugin '{plugin}' timed out after {after}")]
    Timeout {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// How long it ran, for a person (`5s`).
        after: String,
    },
    /// The plugin spent its fuel (its instruction budget).
    #[error("plugin '{plugin}' ran out of fuel (its budget is {fuel} instructions)")]
    OutOfFuel {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// Its fuel budget (instructions).
        fuel: u64,
    },
    /// The plugin grew its memory past its limit.
    #[error("plugin '{plugin}' exceeded its memory limit of {mib} MiB")]
    Memory {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// Its memory limit (MiB).
        mib: u64,
    },
    /// The plugin's output (its log writes and its verdict) went past its
    /// bound.
    #[error("plugin '{plugin}' exceeded its output limit of {bytes} bytes")]
    Output {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// Its output bound (bytes).
        bytes: u64,
    },
    /// The plugin's verdict has more findings than `[wasm] max_findings`.
    #[error(
        "plugin '{plugin}' gave {count} findings; the host keeps at most {max} ([wasm] max_findings)"
    )]
    Findings {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// How many findings it gave.
        count: usize,
        /// The host's maximum (`[wasm] max_findings`).
        max: usize,
    },
    /// The plugin called the judge more often than its limit allows.
    #[error("plugin '{plugin}' exceeded its limit of {calls} judge call(s) per evaluation")]
    JudgeCalls {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// Its limit of judge calls per evaluation.
        calls: u32,
    },
    /// The plugin trapped (a panic, an unreachable, a bad memory access).
    #[error("plugin '{plugin}' trapped: {message}")]
    Trap {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// The trap, as wasmtime describes it.
        message: String,
    },
    /// The plugin returned an error of its own instead of a verdict.
    #[error("plugin '{plugin}' reported an error: {message}")]
    Reported {
        /// The plugin as the gate names it (its name, or its path).
        plugin: String,
        /// The plugin's own message.
        message: String,
    },
    /// The wasmtime engine could not be made (its configuration).
    #[error("the WASM engine cannot start: {0}")]
    Engine(String),
}
