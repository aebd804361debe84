"""What the browser scripts share: Debian's headless Chromium launched
through Playwright for Python (no browser download: the system's
/usr/bin/chromium), the page's console kept, and one JSON line on stdout
with what the script saw (an exception reported in it as `error`, exit code
1). A script checks nothing itself but what it must wait for; its Rust test
judges the JSON."""

import json
import sys

from playwright.sync_api import sync_playwright

# Every wait in the page is bounded by this (milliseconds).
WAIT = 20000

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def main(run, nargs, profile_arg):
    """Runs `run(context, page, args, out)` with the script's `nargs`
    arguments (the browser profile's directory is argument `profile_arg`);
    prints `out` as one JSON line; returns the exit code."""
    args = sys.argv[1:]
    if len(args) != nargs:
        print(json.dumps({"error": f"expected {nargs} arguments, got {len(args)}"}), flush=True)
        return 1
    out = {}
    code = 0
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            args[profile_arg],
            executable_path="/usr/bin/chromium",
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1100, "height": 800},
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            console = []
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
            try:
                run(context, page, args, out)
            except Exception as e:  # reported to the Rust test, never swallowed
                out["error"] = f"{type(e).__name__}: {e}"
                code = 1
            out["console"] = console
        finally:
            context.close()
    print(json.dumps(out), flush=True)
    return code
