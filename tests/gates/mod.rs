//! Gates themselves: WASM and JavaScript plugins, the carried plugins, the
//! plugin author's tools, and hostile shell gates, judges and plugins.

mod carried_plugins;
mod hostile_judge;
mod hostile_shell;
mod js_plugin;
mod plugin_kit;
pub(crate) mod wasm;
