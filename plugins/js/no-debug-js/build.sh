#!/usr/bin/env bash
# Builds the JavaScript plugin into a WASI component with jco / componentize-js
# (npm; the exact versions of package-lock.json, installed with `npm ci` under
# plugins/target/), against wit/v0.1, world gate-plugin.
# Usage: build.sh OUT.wasm
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
mkdir -p "$(dirname "$1")"
out="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
tools="$root/plugins/target/componentize-js"
jco="$tools/node_modules/.bin/jco"

command -v npm >/dev/null || { echo "npm (Node.js 20 or later) is needed to build plugins/js" >&2; exit 1; }

# (Re)install the tools when the lock file differs from the one installed.
if ! cmp -s "$here/package-lock.json" "$tools/installed.lock" || [ ! -x "$jco" ]; then
  rm -rf "$tools"
  mkdir -p "$tools"
  cp "$here/package.json" "$here/package-lock.json" "$tools/"
  (cd "$tools" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$here/package-lock.json" "$tools/installed.lock"
fi

# Building takes a minute or more (the engine is initialised with the
# script and snapshotted): skip it when nothing it reads has changed.
inputs="$(cat "$here/app.js" "$here/package-lock.json" "$root/wit/v0.1/gate.wit" "$0" | sha256sum | cut -d' ' -f1)"
if [ -f "$out" ] && [ "$(cat "$out.inputs" 2>/dev/null)" = "$inputs" ]; then
  exit 0
fi
rm -f "$out.inputs"

# http and fetch-event would import wasi:http, which gatehost refuses; the
# plugin uses no timer and no randomness, so clocks and random go too.
cd "$here"
"$jco" componentize app.js --wit "$root/wit/v0.1" --world-name gate-plugin \
  --disable http fetch-event clocks random -o "$out"
echo "$inputs" >"$out.inputs"
