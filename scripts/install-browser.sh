#!/usr/bin/env bash
# Installs what the browser tests (tests/daemon/ui/browser.rs,
# tests/support/browser/) run:
# Debian's Chromium (/usr/bin/chromium, with apt-get when it is missing: CI
# runs as root on Debian) and Playwright for Python, pinned, in a venv of its
# own: target/browser-venv (its python is bin/python). Playwright drives the
# system Chromium (executable_path=/usr/bin/chromium): its own browser
# download is never used (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1, and no
# `playwright install`). Prints the venv's python on its last line.
#
# Idempotent: does nothing when Chromium is there and the venv holds the
# pinned Playwright.
set -euo pipefail
cd "$(dirname "$0")/.."

PLAYWRIGHT_VERSION=1.65.2
venv=target/browser-venv

if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "install-browser: /usr/bin/chromium is missing; install Debian's chromium (apt-get install chromium) as root" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
/usr/bin/chromium --version >&2

export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
installed() {
    [ -x "$venv/bin/python" ] &&
        [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("playwright"))' 2>/dev/null)" = "$PLAYWRIGHT_VERSION" ]
}
if ! installed; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "playwright==$PLAYWRIGHT_VERSION"
fi
installed || { echo "install-browser: playwright $PLAYWRIGHT_VERSION did not install into $venv" >&2; exit 1; }
echo "$PWD/$venv/bin/python"
