pub mod client;
pub mod keyring;
pub mod session_key;
pub mod wire;
