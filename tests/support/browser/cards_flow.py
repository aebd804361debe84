"""The policy page's files as cards, in a real headless Chromium, run by
tests/daemon/ui/cards.rs (twice, on the same browser profile).

Arguments: MODE LINK PROFILE_DIR, MODE `first` or `again`.

first: a lockfile is collapsed at first and says why; a file's "Viewed"
collapses it and is still ticked after a reload; the file list opens a
collapsed file and brings its header into view. again (after the policy
was gated again on a new snapshot where one viewed file changed and the
other did not): what each file's "Viewed" and rows show.

On stdout, one JSON line: for each file, its header's state (ticked,
expanded, tag) and how many of its rows are on screen, at each step. It
checks nothing itself but what it must wait for; the Rust test judges the
JSON. Every wait is bounded; an error is reported in the JSON (`error`)
and exit code 1.
"""

import sys

from playwright.sync_api import expect

from harness import WAIT, main

STATE = """() => [...document.querySelectorAll('#p-diff > .file')].map((h) => {
  const path = h.dataset.file;
  const rows = [...document.querySelectorAll('#p-diff [data-of]')].filter((r) => r.dataset.of === path && r !== h);
  const tag = h.querySelector('.tag');
  return { path, viewed: h.querySelector('input').checked, expanded: h.querySelector('.toggle').getAttribute('aria-expanded'),
           tag: tag ? tag.textContent : null, rows: rows.length, shown: rows.filter((r) => r.getClientRects().length).length };
})"""


def open_policy(page, url):
    page.goto(url)
    page.wait_for_selector("#policy:not([hidden]) #p-diff .file", timeout=WAIT)
    expect(page.locator("#actions")).to_be_visible(timeout=WAIT)


def header(page, path):
    return page.locator(f"#p-diff > .file[data-file='{path}']")


def run(page, args, out):
    mode, link, _profile = args
    open_policy(page, link)
    out["atFirst"] = page.evaluate(STATE)
    if mode == "first":
        # "Viewed" on both source files: collapsed, and kept over a reload.
        for path in ("src/lib.rs", "src/other.rs"):
            header(page, path).locator("input").check()
        out["afterViewed"] = page.evaluate(STATE)
        page.reload()
        page.wait_for_selector("#policy:not([hidden]) #p-diff .file", timeout=WAIT)
        expect(page.locator("#actions")).to_be_visible(timeout=WAIT)
        out["afterReload"] = page.evaluate(STATE)
        # The file list opens the lockfile and brings its header into view.
        page.click("#p-files button:text-is('Cargo.lock')")
        out["afterListClick"] = page.evaluate(STATE)
        out["focused"] = page.evaluate("document.activeElement.dataset.file || null")
        # A round of changes requested from the page, on src/lib.rs:2.
        header(page, "src/lib.rs").locator(".toggle").click()
        page.click("#p-diff .add[data-path='src/lib.rs'][data-line='2']")
        page.locator("#p-diff .line-comment").fill("Name it a3.")
        page.click("#request-changes")
        expect(page.locator("#p-status")).to_have_text("watching", timeout=WAIT)
    else:
        # The earlier round, and what changed since it.
        out["rounds"] = page.eval_on_selector_all("#p-rounds li", "els => els.map(e => e.textContent)")
        out["sinceShown"] = page.is_visible("#since-toggle")
        page.click("#since-toggle")
        expect(page.locator("#p-diff-note")).to_contain_text("since your last review", timeout=WAIT)
        page.wait_for_selector("#p-diff .add", timeout=WAIT)
        out["sinceFiles"] = page.eval_on_selector_all("#p-diff > .file", "els => els.map(e => e.dataset.file)")
        out["sinceRows"] = page.eval_on_selector_all(
            "#p-diff .add, #p-diff .del", "els => els.map(e => e.textContent)")
        page.click("#since-toggle")
        expect(page.locator("#p-diff-note")).not_to_contain_text("since your last review", timeout=WAIT)
        out["wholeFiles"] = page.eval_on_selector_all("#p-diff > .file", "els => els.map(e => e.dataset.file)")


if __name__ == "__main__":
    sys.exit(main(lambda _context, page, args, out: run(page, args, out), 3, 2))
