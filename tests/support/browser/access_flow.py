"""axe-core's checks on the operator's page, in a real headless Chromium,
run by tests/daemon/ui/access.rs: the policy page (a diff with added and
removed lines, coloured) and the inbox, each once drawn.

Arguments: LINK AXE_JS PROFILE_DIR (LINK lands on a policy's page).

On stdout, one JSON line: each page's violations (rule, impact, the first
targets and why), and the focus ring's colour against the page. It checks
nothing itself but what it must wait for; the Rust test judges the JSON.
Every wait is bounded; an error is reported in the JSON (`error`) and exit
code 1.
"""

import sys

from playwright.sync_api import expect

from harness import WAIT, main

AUDIT = """async () => {
  const r = await axe.run(document, { resultTypes: ["violations"] });
  return r.violations.map((v) => ({ id: v.id, impact: v.impact,
    nodes: v.nodes.slice(0, 5).map((n) => ({ target: n.target.join(" "), why: n.failureSummary })) }));
}"""


def run(page, args, out):
    link, axe_js, _profile = args
    axe = open(axe_js, encoding="utf-8").read()
    page.goto(link)
    page.wait_for_selector("#policy:not([hidden]) #p-diff .add", timeout=WAIT)
    expect(page.locator("#actions")).to_be_visible(timeout=WAIT)
    page.wait_for_selector("#p-runs li", timeout=WAIT)
    # Through the debugger (the page's CSP admits no script of ours).
    page.evaluate(axe + "\n;0")
    # A line focused, as j leaves it: its ring is checked with the rest.
    page.keyboard.press("j")
    out["policy"] = page.evaluate(AUDIT)
    out["focusRing"] = page.evaluate("""() => { const s = getComputedStyle(document.activeElement);
      return { outline: s.outlineStyle + " " + s.outlineWidth + " " + s.outlineColor, cls: document.activeElement.className }; }""")
    page.click("a[href='#']")
    page.wait_for_selector("#inbox:not([hidden]) #waiting li", timeout=WAIT)
    expect(page.locator("#waiting-count")).not_to_have_text("0", timeout=WAIT)
    out["inbox"] = page.evaluate(AUDIT)
    out["mains"] = page.locator("main").count()


if __name__ == "__main__":
    sys.exit(main(lambda _context, page, args, out: run(page, args, out), 3, 2))
