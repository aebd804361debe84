"""Comments land on their lines, in a real headless Chromium, run by
tests/daemon/ui/comments.rs: on a policy page whose diff holds a file git
quotes (a non-ASCII name) and an added line that reads `++ b/app.py`, a
comment on a line of each, then "Request changes".

Arguments: LINK LINE LINE PROFILE_DIR (the two added lines to comment
on, by their text without the `+`).

On stdout, one JSON line: the files' headers, the path, line and side of
each row commented on, and the status after "Request changes". It checks
nothing itself but what it must wait for; the Rust test judges the JSON
and the agent's nudge. Every wait is bounded; an error is reported in the
JSON (`error`) and exit code 1.
"""

import sys

from playwright.sync_api import expect

from harness import WAIT, main

# The comment written on a line `text`.
def comment_for(text):
    return "About " + text + "."


def run(page, args, out):
    link, *lines, _profile = args
    page.goto(link)
    page.wait_for_selector("#policy:not([hidden]) #p-diff .add", timeout=WAIT)
    out["fileHeaders"] = page.eval_on_selector_all("#p-diff > .file .label", "els => els.map(e => e.textContent)")
    out["at"] = []
    for text in lines:
        row = page.evaluate_handle(
            "t => [...document.querySelectorAll('#p-diff .add')].find(e => e.textContent === '+' + t) || null",
            text)
        el = row.as_element()
        if el is None:
            raise RuntimeError(f"no added row {text!r}")
        out["at"].append(el.evaluate("e => ({path: e.dataset.path, line: e.dataset.line, side: e.dataset.side})"))
        el.click()
        page.locator("#p-diff .line-comment").last.fill(comment_for(text))
        if text == "after":
            # The line suggested as it should read, below the words.
            page.locator("#p-diff .suggest").last.click()
    page.click("#request-changes")
    expect(page.locator("#p-status")).to_have_text("watching", timeout=WAIT)
    out["status"] = page.text_content("#p-status")
    out["error"] = page.text_content("#p-error") or None


if __name__ == "__main__":
    sys.exit(main(lambda _context, page, args, out: run(page, args, out), 4, 3))
