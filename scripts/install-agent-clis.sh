#!/usr/bin/env bash
# Installs the real agent CLIs that gatehost's whole-program tests run: Claude
# Code (as a judge adapter and as a gated agent), Codex, Gemini CLI and Qwen
# Code, GitHub Copilot CLI and OpenCode (as gated agents), and Zed's ACP
# adapters for Claude Code and Codex (claude-agent-acp, codex-acp: agents the
# daemon drives), each against the fake model API in tests/support/fake-model-api/.
# Their versions are pinned by tests/support/agent-clis/package.json and its
# package-lock.json; `npm install --no-save` installs that tree into a project-local
# directory, never a global prefix: $GATEHOST_AGENT_CLIS_DIR, by default
# target/agent-clis (binaries in node_modules/.bin).
#
# Idempotent: does nothing when the lockfile is unchanged since the last
# install and every CLI answers with its pinned version.
#
# Claude Code's npm package is a thin wrapper whose postinstall hard-links a
# native binary (from the platform's optional dependency, about 400 MB) over
# bin/claude.exe; it needs no Node.js at run time. Its package.json asks for
# Node >= 22, which only makes npm warn under Node 20: the install works.
#
# OpenCode's (opencode-ai) is the same kind: its bin/opencode.exe is a stub
# until its postinstall (postinstall.mjs) hard-links the native binary of
# the platform's optional dependency (opencode-linux-x64, about 185 MB; a
# Bun-compiled program, no Node.js at run time) over it.
set -euo pipefail
cd "$(dirname "$0")/.."

# The exact versions the tests were written against (also in the lockfile).
# Change them deliberately: what the CLIs send, and which files they read,
# changes often.
CLAUDE_CODE_VERSION=2.1.332
CODEX_VERSION=0.169.0
GEMINI_CLI_VERSION=0.61.0
QWEN_CODE_VERSION=0.24.4
COPILOT_CLI_VERSION=1.0.102
OPENCODE_VERSION=1.18.33

dir=${GATEHOST_AGENT_CLIS_DIR:-target/agent-clis}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
bin=$dir/node_modules/.bin

# True when every pinned version is installed from this lockfile and answers.
installed() {
    cmp -s tests/support/agent-clis/package-lock.json "$dir/package-lock.json" &&
        [ -x "$bin/claude" ] && [ -x "$bin/codex" ] && [ -x "$bin/gemini" ] && [ -x "$bin/qwen" ] && [ -x "$bin/copilot" ] && [ -x "$bin/opencode" ] &&
        [ -x "$bin/claude-agent-acp" ] && [ -x "$bin/codex-acp" ] &&
        [ "$("$bin/claude" --version 2>/dev/null)" = "$CLAUDE_CODE_VERSION (Claude Code)" ] &&
        "$bin/codex" --version 2>/dev/null | grep -qx "codex-cli $CODEX_VERSION" &&
        [ "$("$bin/gemini" --version 2>/dev/null)" = "$GEMINI_CLI_VERSION" ] &&
        [ "$("$bin/qwen" --version 2>/dev/null)" = "$QWEN_CODE_VERSION" ] &&
        "$bin/copilot" --version 2>/dev/null | grep -q "^GitHub Copilot CLI $COPILOT_CLI_VERSION" &&
        [ "$("$bin/opencode" --version 2>/dev/null)" = "$OPENCODE_VERSION" ]
}

if ! installed; then
    echo "installing the pinned agent CLIs into $dir" >&2
    cp tests/support/agent-clis/package.json tests/support/agent-clis/package-lock.json "$dir/"
    # Not `npm ci`: Qwen Code's @teddyzhu/clipboard names optional
    # per-platform packages that were never published (darwin, win32,
    # linux-arm64), which the lockfile cannot hold and `npm ci` then refuses
    # as out of sync. A clean `npm install --no-save` installs the same tree
    # from the lockfile and writes nothing back (the lockfile is unchanged).
    rm -rf "$dir/node_modules"
    (cd "$dir" && npm install --no-save --no-audit --no-fund >&2)
    # npm 11 skips install scripts it was not told to trust, and so may a
    # user's npmrc (ignore-scripts=true): Claude Code's bin/claude.exe is then
    # still the placeholder stub. Place the native binary now.
    pkg=$dir/node_modules/@anthropic-ai/claude-code
    if [ "$("$bin/claude" --version 2>/dev/null)" != "$CLAUDE_CODE_VERSION (Claude Code)" ] &&
        [ -f "$pkg/install.cjs" ]; then
        (cd "$pkg" && node install.cjs >&2)
    fi
    # The same for OpenCode: bin/opencode.exe stays the stub that prints
    # "opencode-ai's postinstall script was not run".
    pkg=$dir/node_modules/opencode-ai
    if [ "$("$bin/opencode" --version 2>/dev/null)" != "$OPENCODE_VERSION" ] &&
        [ -f "$pkg/postinstall.mjs" ]; then
        (cd "$pkg" && node postinstall.mjs >&2)
    fi
    if ! installed; then
        echo "error: the agent CLIs in $dir do not report the pinned versions:" >&2
        "$bin/claude" --version >&2 || true
        "$bin/codex" --version >&2 || true
        "$bin/gemini" --version >&2 || true
        "$bin/qwen" --version >&2 || true
        "$bin/copilot" --version >&2 || true
        "$bin/opencode" --version >&2 || true
        exit 1
    fi
fi

echo "$bin"
