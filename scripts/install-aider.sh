#!/usr/bin/env bash
# Installs Aider, the agent CLI that tests/agents/aider.rs runs against the
# fake model API (its documented use with gatehost: `aider --auto-test
# --test-cmd "gatehost check ..."`): aider-chat 0.86.2 from PyPI, it and every
# dependency pinned with their hashes by tests/support/aider/requirements.txt and
# installed with `pip install --require-hashes --no-deps`, into a venv of its
# own, never the system's: $GATEHOST_AIDER_DIR, by default target/aider
# (the CLI is its bin/aider). Prints the venv's bin directory on its last
# line.
#
# Idempotent: does nothing when the requirements file is unchanged since the
# last install and `aider --version` answers with the pinned version.
#
# aider-chat 0.86.2 wants Python 3.10 to 3.12: the first of
# $GATEHOST_AIDER_PYTHON, python3, python3.12, python3.11, python3.10 that is
# one of those makes the venv. The venv takes about 690 MB.
set -euo pipefail
cd "$(dirname "$0")/.."

# The version the tests were written against (also in the requirements file).
# Change it deliberately: the prompts, the edit formats and the messages
# around the test command change between releases.
AIDER_VERSION=0.86.2

req=tests/support/aider/requirements.txt
dir=${GATEHOST_AIDER_DIR:-target/aider}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
bin=$dir/bin

# True when the pinned Aider is installed from this requirements file.
installed() {
    cmp -s "$req" "$dir/gatehost-requirements.txt" && [ -x "$bin/aider" ] &&
        [ "$("$bin/aider" --version 2>/dev/null)" = "aider $AIDER_VERSION" ]
}

# A python that aider-chat accepts (3.10 to 3.12), with venv.
pick_python() {
    local py
    for py in ${GATEHOST_AIDER_PYTHON:-} python3 python3.12 python3.11 python3.10; do
        if "$py" -c 'import sys, venv; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 12))' 2>/dev/null; then
            echo "$py"
            return
        fi
    done
    echo "error: Aider needs Python 3.10 to 3.12 with venv (python3 is $(python3 --version 2>&1));" \
        "set GATEHOST_AIDER_PYTHON to one" >&2
    return 1
}

if ! installed; then
    py=$(pick_python)
    echo "installing the pinned Aider (aider-chat $AIDER_VERSION) into $dir with $("$py" --version 2>&1)" >&2
    # --clear empties the directory first; refuse one that is not a venv.
    if [ -n "$(ls -A "$dir")" ] && [ ! -f "$dir/pyvenv.cfg" ]; then
        echo "error: $dir is neither empty nor a venv; not replacing it" >&2
        exit 1
    fi
    "$py" -m venv --clear "$dir"
    "$bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
        --require-hashes --no-deps --only-binary :all: -r "$req" >&2
    cp "$req" "$dir/gatehost-requirements.txt"
    if ! installed; then
        echo "error: the Aider in $dir does not report aider $AIDER_VERSION:" >&2
        "$bin/aider" --version >&2 || true
        exit 1
    fi
fi

echo "$bin"
