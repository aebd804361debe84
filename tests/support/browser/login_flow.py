"""The way in: the one-time link `gatehost ui` prints, opened in a real
headless Chromium, run by tests/daemon/ui/login_link.rs.

Arguments: LINK PROFILE_DIR.

On stdout, one JSON line: what the page showed after the link (which of the
login form and the inbox is visible, the address bar, the page's errors),
then what the same link gives a second time (its HTTP status and text). It
checks nothing itself but what it must wait for; the Rust test judges the
JSON. Every wait is bounded; an error is reported in the JSON (`error`) and
exit code 1.
"""

import sys

from harness import WAIT, main


def run(page, args, out):
    link, _profile = args
    page.goto(link)
    # Whichever shows first: the inbox (logged in) or the login form.
    page.wait_for_selector("#inbox:not([hidden]), #login:not([hidden])", timeout=WAIT)
    out["inboxShown"] = page.is_visible("#inbox")
    out["loginShown"] = page.is_visible("#login")
    out["address"] = page.url
    # Spent: the same link again.
    again = page.goto(link)
    out["againStatus"] = again.status if again else None
    out["againText"] = page.text_content("body") or ""


if __name__ == "__main__":
    sys.exit(main(lambda _context, page, args, out: run(page, args, out), 2, 1))
