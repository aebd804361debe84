#!/usr/bin/env bash
# Installs the real agent CLIs that gatehost's integration tests run as judge
# adapters (for now only Claude Code, `claude -p`) against the fake model API
# in tests/fake-model-api/. They go into a project-local directory, never a
# global prefix: $GATEHOST_AGENT_CLIS_DIR, by default target/agent-clis.
#
# Idempotent: does nothing when the pinned version is already installed and
# runs. Prints the path of the `claude` binary on its last line.
#
# The npm package is a thin wrapper whose postinstall hard-links a native
# binary (from the platform's optional dependency, about 400 MB) over
# bin/claude.exe; it needs no Node.js at run time. Its package.json asks for
# Node >= 22, which only makes npm warn under Node 20: the install works.
set -euo pipefail
cd "$(dirname "$0")/.."

# The exact version the tests were written against. Change it deliberately:
# the shape of what the CLI sends (and which files it reads) changes often.
CLAUDE_CODE_VERSION=2.1.332

dir=${GATEHOST_AGENT_CLIS_DIR:-target/agent-clis}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
pkg=$dir/node_modules/@anthropic-ai/claude-code
claude=$dir/node_modules/.bin/claude

# True when the pinned version is installed and its native binary answers.
installed() {
    [ -x "$claude" ] &&
        [ "$("$claude" --version 2>/dev/null)" = "$CLAUDE_CODE_VERSION (Claude Code)" ]
}

if ! installed; then
    echo "installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION into $dir" >&2
    npm install --prefix "$dir" --no-audit --no-fund \
        "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" >&2
    # If npm skipped install scripts (ignore-scripts=true in a user's npmrc),
    # bin/claude.exe is still the placeholder stub: place the binary now.
    if ! installed && [ -f "$pkg/install.cjs" ]; then
        node "$pkg/install.cjs" >&2
    fi
    if ! installed; then
        echo "error: $claude does not report version $CLAUDE_CODE_VERSION" >&2
        exit 1
    fi
fi

echo "$claude"
