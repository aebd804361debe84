//! Standalone `gatehost hook` runs and `gatehost hook install` into each
//! agent CLI's configuration files.

mod cost;
mod huge_inputs;
mod install;
mod install_qwen;
mod kiro;
mod once;
