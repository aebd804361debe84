#!/usr/bin/env bash
# Installs the MCP client that the whole-program tests of `gatehost mcp` run
# (tests/cli/mcp.rs, through tests/support/mcp-client/client.py): the official MCP
# Python SDK (`mcp` from PyPI) at the versions and hashes that
# tests/support/mcp-client/requirements.txt pins, with `pip install
# --require-hashes`, into a project-local venv, never the system's:
# $GATEHOST_MCP_CLIENT_DIR, by default target/mcp-client. Prints the venv's
# python (the tests find it there).
#
# Idempotent: does nothing when the requirements file is unchanged since the
# last install and the SDK answers with its pinned version.
set -euo pipefail
cd "$(dirname "$0")/.."

# The version the tests were written against (also in the requirements file).
MCP_VERSION=2.3.0

req=tests/support/mcp-client/requirements.txt
dir=${GATEHOST_MCP_CLIENT_DIR:-target/mcp-client}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
py=$dir/venv/bin/python

# True when the pinned SDK is installed from this requirements file.
installed() {
    cmp -s "$req" "$dir/requirements.txt" && [ -x "$py" ] &&
        [ "$("$py" -c 'import importlib.metadata as m; print(m.version("mcp"))' 2>/dev/null)" = "$MCP_VERSION" ]
}

if ! installed; then
    command -v python3 >/dev/null || { echo "python3 (3.10 or later, with venv) is needed by the MCP client" >&2; exit 1; }
    echo "installing the pinned MCP client (mcp $MCP_VERSION) into $dir" >&2
    rm -rf "$dir/venv" "$dir/requirements.txt"
    python3 -m venv "$dir/venv"
    "$py" -m pip install --quiet --disable-pip-version-check --no-input \
        --require-hashes --only-binary :all: -r "$req" >&2
    cp "$req" "$dir/requirements.txt"
    if ! installed; then
        echo "error: the MCP client in $dir does not report mcp $MCP_VERSION" >&2
        exit 1
    fi
fi

echo "$py"
