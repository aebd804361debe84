#!/usr/bin/env bash
# The whole test suite, on a fresh clone of a Debian machine with the Rust
# toolchain (rustup), Node.js 20+ with npm (the JavaScript plugin's build
# and the agent CLIs) and python3 (the Python plugin's build and the fake
# model API); it installs the rest (the wasm32-wasip2 target, componentize-py,
# jco, the pinned agent CLIs). `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

# Lints first: they are cheap and fail fast. (Checking the host runs
# host/crates/wasm/build.rs, which builds the four carried Rust plugins into
# plugins/target where the wasm32-wasip2 target is installed, else warns;
# build-plugins.sh below then finds them built.)
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

# The portable core: the workspace (tests and benches too) compiles for
# macOS, where only the sandbox is missing (docs/security.md, "1c. macOS").
# It installs the target's standard library and Zig (pinned) as the C
# compiler of the dependencies' build scripts.
bash scripts/check-macos.sh

# The gate plugins and the hostile plugin corpus, as WASI components.
command -v npm >/dev/null || { echo "npm (Node.js 20 or later) is needed by plugins/js and the agent CLIs" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is needed by plugins/python and tests/support/fake-model-api" >&2; exit 1; }
bash scripts/build-plugins.sh
# The plugins' lints (for their target), and their own unit tests, run natively (forbid-patterns' fast scanner
# against the regex crate's answers).
(cd plugins && cargo fmt --all -- --check \
  && cargo clippy --workspace --all-targets --locked --target wasm32-wasip2 -- -D warnings \
  && cargo test --locked -p forbid-patterns)

# The real agent CLIs the tests run against a fake model API (pinned, from
# npm, into target/agent-clis), and python3 for that fake API.
command -v python3 >/dev/null || { echo "python3 is needed by tests/support/fake-model-api" >&2; exit 1; }
bash scripts/install-agent-clis.sh
bash scripts/install-mcp-client.sh
bash scripts/install-aider.sh

# Debian's Chromium and Playwright for Python (pinned, in target/browser-venv,
# driving the system Chromium) for the web page's browser tests.
bash scripts/install-browser.sh

# A throwaway PostgreSQL cluster (Debian's postgresql, installed when missing)
# for the store's PostgreSQL tests: an unprivileged user, loopback only, in a
# temporary directory, stopped on any exit. With it the tests must find it
# (GATEHOST_TEST_PG_REQUIRED=1: a PostgreSQL test that cannot reach it
# fails); where it cannot be installed or started, one loud line says so and
# those tests print SKIPPED instead of running.
pg_skip=
pg_err=$(mktemp)
if ! bash scripts/pg-cluster.sh install 2>"$pg_err"; then
    pg_skip="cannot install PostgreSQL: $(tr '\n' ' ' <"$pg_err")"
elif ! pg_env=$(bash scripts/pg-cluster.sh start 2>"$pg_err"); then
    pg_skip="cannot start a cluster: $(tr '\n' ' ' <"$pg_err")"
else
    while IFS='=' read -r key value; do
        case "$key" in GATEHOST_TEST_PG_*) export "$key=$value" ;; esac
    done <<<"$pg_env"
    trap 'bash scripts/pg-cluster.sh stop "$GATEHOST_TEST_PG_DIR"' EXIT
    export GATEHOST_TEST_PG_REQUIRED=1
    echo "PostgreSQL tests: a cluster at $GATEHOST_TEST_PG_URL ($GATEHOST_TEST_PG_DIR)" >&2
fi
rm -f "$pg_err"
if [ -n "$pg_skip" ]; then
    echo "PostgreSQL tests SKIPPED: $pg_skip" >&2
fi

# Unit tests (host/) and whole-program tests (tests/), real processes and all.
# (No doc tests: the crate has none, and a run closing on "0 passed" reads
# as a run that tested nothing.)
cargo test --workspace --locked --lib --bins --tests

# The product has no test hooks (docs/contributing.md, "Test hooks"): the
# binary a plain `cargo build` makes (no dev-dependencies, so no
# `test-hooks` feature; a release build and `cargo install` resolve
# features the same way) holds no GATEHOST_TEST_ string. It compiles the
# gatehost crate once more (the dependencies are the test build's: about a
# minute of CPU) and leaves the product at target/debug/gatehost; the next
# `cargo test` links its own back.
cargo build --locked -p gatehost --bin gatehost
if grep -qa GATEHOST_TEST_ target/debug/gatehost; then
  echo "target/debug/gatehost, built without the test-hooks feature, holds a GATEHOST_TEST_ string" >&2
  exit 1
fi

# The README's first command: the daemon demo, end to end (sandboxed cargo
# test as the gate, nudge, ack, commit), with that binary (host/Cargo.toml
# unifies the dev-dependencies' features of every other crate, so only
# gatehost itself was compiled again).
test -x target/debug/gatehost
bash examples/daemon-demo.sh "$PWD/target/debug/gatehost"

# Said again last, where a reader of the run looks.
if [ -n "$pg_skip" ]; then
    echo "PostgreSQL tests SKIPPED: $pg_skip" >&2
fi
