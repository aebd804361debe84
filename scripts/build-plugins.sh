#!/usr/bin/env bash
# Builds every gate plugin (plugins/) and the hostile plugin corpus
# (tests/hostile-plugins/) as WASI components, installing the
# wasm32-wasip2 target where it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi
cargo build --release --locked --target wasm32-wasip2 --manifest-path plugins/Cargo.toml
