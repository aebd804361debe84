#!/usr/bin/env bash
# Builds every gate plugin (plugins/: the Rust ones, the Python one and the
# JavaScript one) and the hostile plugin corpus (tests/support/hostile-plugins/) as
# WASI components, installing the wasm32-wasip2 target, componentize-py
# (PyPI) and jco / componentize-js (npm) where missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi
# Built from inside plugins/ so that plugins/.cargo/config.toml (SIMD) applies,
# into plugins/target, where host/crates/wasm/build.rs builds the four plugins it carries
# in the binary with the same flags: whichever runs second finds them built.
(cd plugins && cargo build --release --locked --target wasm32-wasip2)

# The Python plugin, through componentize-py (installed into plugins/target/).
bash plugins/python/no-secrets/build.sh "$PWD/plugins/target/wasm32-wasip2/release/no_secrets.wasm"

# The JavaScript plugin, through jco / componentize-js (npm, installed into plugins/target/).
bash plugins/js/no-debug-js/build.sh "$PWD/plugins/target/wasm32-wasip2/release/no_debug_js.wasm"
