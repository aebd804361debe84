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
# Also axe-core (pinned, from npm) into target/browser-axe.
#
# Idempotent: does nothing when Chromium is there, the venv holds the
# pinned Playwright and target/browser-axe the pinned axe-core.
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

# axe-core, pinned, for the accessibility test (tests/daemon/ui/access.rs):
# its axe.min.js is read by the test's script and run in the page.
AXE_VERSION=4.14.1
axe_dir=target/browser-axe
axe_installed() {
    [ -f "$axe_dir/node_modules/axe-core/axe.min.js" ] &&
        [ "$(node -p "require('./$axe_dir/node_modules/axe-core/package.json').version" 2>/dev/null)" = "$AXE_VERSION" ]
}
if ! axe_installed; then
    rm -rf "$axe_dir"
    mkdir -p "$axe_dir"
    npm install --silent --no-audit --no-fund --no-save --prefix "$axe_dir" "axe-core@$AXE_VERSION" >&2
fi
axe_installed || { echo "install-browser: axe-core $AXE_VERSION did not install into $axe_dir" >&2; exit 1; }
echo "$PWD/$venv/bin/python"
