//! The client side of gatehost's HTTP API, for the command line, scripts,
//! tests and anyone building on the daemon:
//!
//! - [`wire`]: the API's request and answer bodies, defined once;
//! - [`client`]: the typed client of that API (one method per route);
//! - [`session_key`]: a session key's form (made, checked, digested) and
//!   the header that carries keys, for the daemon and the client alike;
//! - [`keyring`]: the client side's store of session keys.
//!
//! It owns the API's shapes and its transport. It must never depend on
//! the daemon's side (the store, the engine, the WASM host, the sandbox's
//! running of gates): it builds on gatehost-model's data alone, so that a
//! client compiles neither wasmtime nor SQLite
//! (`cargo tree -p gatehost-client -e normal`).

#![warn(missing_docs)]

// The model's types the bodies are, at the paths the moved modules use.
use gatehost_git::commit;
use gatehost_model::{config, model};

pub mod client;
pub mod keyring;
pub mod session_key;
pub mod wire;

pub use client::{Client, ClientError, install_tls_provider};
pub use keyring::Keyring;
