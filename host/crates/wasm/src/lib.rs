pub mod wasm;
