"""The operator's page timed in a real headless Chromium, for
host/benches/page.rs (which starts the daemon and reads this script's one
JSON line).

    page_bench.py measure LINK INBOX_URL POLICY_URL RUNS PROFILE
        logs in by LINK, then RUNS times loads the inbox and the policy page
        afresh: for each, the page's own marks (ms since the navigation
        began): `domContentLoaded` (the page's files, before any call: the
        baseline), `inbox` (the lists drawn), `firstScreen` / `drawn` (the
        diff's first rows painted, all of them), and `longestTask` (the
        longest main-thread task the browser reported, in ms).
    page_bench.py hold LINK INBOX_URL PROFILE
        logs in, shows the inbox, prints `ready`, and keeps it open, live,
        until a line on stdin; then how many requests the page made
        meanwhile and the longest task.
"""

import json
import sys

from playwright.sync_api import sync_playwright

WAIT = 120000
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# Long tasks from the very start of each document.
OBSERVE = """
window.__longest = 0;
new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__longest = Math.max(window.__longest, e.duration); })
  .observe({ type: "longtask", buffered: true });
"""


def mark(page, name):
    """The mark's time, polled (the page's CSP forbids the eval a
    wait_for_function needs; evaluate goes through the debugger)."""
    waited = 0
    while True:
        at = page.evaluate("n => { const e = performance.getEntriesByName(n)[0]; return e ? e.startTime : null; }", name)
        if at is not None:
            return at
        if waited > WAIT:
            raise TimeoutError(name)
        page.wait_for_timeout(10)
        waited += 10


def dom_loaded(page):
    return page.evaluate("performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd")


def main():
    mode = sys.argv[1]
    out = {}
    with sync_playwright() as p:
        profile = sys.argv[-1]
        ctx = p.chromium.launch_persistent_context(profile, executable_path="/usr/bin/chromium",
                                                   headless=True, args=ARGS, viewport={"width": 1280, "height": 900})
        ctx.add_init_script(OBSERVE)
        page = ctx.pages[0] if ctx.pages else ctx.new_page()
        link, inbox = sys.argv[2], sys.argv[3]
        page.goto(link)
        page.wait_for_selector("#inbox:not([hidden]) #others li", timeout=WAIT)
        if mode == "measure":
            policy, runs = sys.argv[4], int(sys.argv[5])
            out["inbox"], out["policy"] = [], []
            for _ in range(runs):
                page.goto("about:blank")
                page.goto(inbox)
                out["inbox"].append({"domContentLoaded": dom_loaded(page),
                                     "inbox": mark(page, "gatehost:inbox-shown")})
                page.goto("about:blank")
                page.goto(policy)
                first = mark(page, "gatehost:diff-first-screen")
                drawn = mark(page, "gatehost:diff-drawn")
                out["policy"].append({"domContentLoaded": dom_loaded(page), "firstScreen": first,
                                      "drawn": drawn, "rows": page.locator("#p-diff > div").count(),
                                      "longestTask": page.evaluate("window.__longest")})
        else:
            requests = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto("about:blank")
            page.goto(inbox)
            mark(page, "gatehost:inbox-shown")
            requests.clear()
            print("ready", flush=True)
            sys.stdin.readline()
            # What the last events asked for, once they settle.
            page.wait_for_timeout(1500)
            out["requests"] = len(requests)
            out["longestTask"] = page.evaluate("window.__longest")
        ctx.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
