#!/usr/bin/env bash
# Builds the Python plugin into a WASI component with componentize-py,
# installed into a virtual environment under plugins/target/.
# Usage: build.sh OUT.wasm
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="$1"
venv="$root/plugins/target/componentize-py-venv"
if [ ! -x "$venv/bin/componentize-py" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "componentize-py==0.25.1"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here/app.py" "$work/"
cd "$work"
"$venv/bin/componentize-py" -d "$root/wit/v0.1" -w gate-plugin componentize --stub-wasi app -o "$out"
