"""The policy page from the keyboard alone, in a real headless Chromium,
run by tests/daemon/ui/keyboard.rs: on one policy, j moves to the diff's
lines, Enter opens a comment, Ctrl+Enter sends "Request changes"; on
another, a approves after a confirmation. No click, no focus set by the
script.

Arguments: LINK_COMMENT LINK_APPROVE PROFILE_DIR.

On stdout, one JSON line: the line each key reached, what had the focus
after each step, the dialogs, the statuses after each action. It checks
nothing itself but what it must wait for; the Rust test judges the JSON.
Every wait is bounded; an error is reported in the JSON (`error`) and exit
code 1.
"""

import sys

from playwright.sync_api import expect

from harness import WAIT, main

FOCUSED = """() => { const e = document.activeElement;
  return {tag: e.tagName, id: e.id, cls: e.className, path: e.dataset.path || null,
          line: e.dataset.line || null, file: e.dataset.file || null, text: e.textContent.slice(0, 80)}; }"""


def run(page, args, out):
    comment_link, approve_link, _profile = args
    dialogs = []

    def accept(d):
        dialogs.append(d.message)
        d.accept()

    page.on("dialog", accept)
    page.goto(comment_link)
    page.wait_for_selector("#policy:not([hidden]) #p-diff .commentable", timeout=WAIT)
    expect(page.locator("#actions")).to_be_visible(timeout=WAIT)
    page.keyboard.press("j")
    out["afterJ"] = page.evaluate(FOCUSED)
    page.keyboard.press("j")
    out["afterJJ"] = page.evaluate(FOCUSED)
    page.keyboard.press("k")
    out["afterJJK"] = page.evaluate(FOCUSED)
    page.keyboard.press("n")
    out["afterN"] = page.evaluate(FOCUSED)
    page.keyboard.press("j")
    page.keyboard.press("j")
    out["commentOn"] = page.evaluate(FOCUSED)
    page.keyboard.press("Enter")
    out["afterEnter"] = page.evaluate(FOCUSED)
    page.keyboard.type("Said from the keyboard.")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#p-status")).to_have_text("watching", timeout=WAIT)
    out["commentStatus"] = page.text_content("#p-status")
    out["afterRequest"] = page.evaluate(FOCUSED)

    page.goto(approve_link)
    page.wait_for_selector("#policy:not([hidden]) #p-diff .commentable", timeout=WAIT)
    expect(page.locator("#actions")).to_be_visible(timeout=WAIT)
    page.keyboard.press("a")
    expect(page.locator("#p-status")).to_have_text("done", timeout=WAIT)
    out["approveStatus"] = page.text_content("#p-status")
    out["afterApprove"] = page.evaluate(FOCUSED)
    out["dialogs"] = dialogs


if __name__ == "__main__":
    sys.exit(main(lambda _context, page, args, out: run(page, args, out), 3, 2))
