"""The way in, in a real headless Chromium, run by
tests/daemon/ui/login_link.rs: the one-time link `gatehost ui` prints, an
expired and a spent one, a policy's link (what notifications carry) in a
new tab of the logged-in browser, the link `gatehost ui --policy` prints,
and the policy's link in a browser with no login, through the token form.

Arguments: LINK POLICY_LINK EXPIRED_LINK DEEP_URL OPERATOR_TOKEN PROFILE_DIR.

On stdout, one JSON line: what each step showed (which of the login form,
the inbox and the policy page is visible, the policy page's title, the
address bar, HTTP statuses and texts of refused links). It checks nothing
itself but what it must wait for; the Rust test judges the JSON. Every
wait is bounded; an error is reported in the JSON (`error`) and exit code
1.
"""

import sys

from playwright.sync_api import expect

from harness import WAIT, main

SHOWN = "#inbox:not([hidden]), #login:not([hidden]), #policy:not([hidden])"


def seen(page):
    """Which view shows, the policy page's title (once its data came), and
    the address."""
    page.wait_for_selector(SHOWN, timeout=WAIT)
    view = {"inbox": page.is_visible("#inbox"), "login": page.is_visible("#login"),
            "policy": page.is_visible("#policy"), "address": page.url}
    if view["policy"]:
        expect(page.locator("#p-status")).not_to_have_text("", timeout=WAIT)
        view["title"] = page.text_content("#p-id")
    return view


def run(context, page, args, out):
    link, policy_link, expired, deep, operator, _profile = args
    # An expired link: refused, no login.
    r = page.goto(expired)
    out["expired"] = {"status": r.status if r else None, "text": page.text_content("body") or ""}
    out["cookiesAfterExpired"] = len(context.cookies())
    # The link: the inbox.
    page.goto(link)
    out["link"] = seen(page)
    # Spent: the same link again.
    again = page.goto(link)
    out["again"] = {"status": again.status if again else None, "text": page.text_content("body") or ""}
    # A policy's link in a new tab of the same browser: no second login.
    tab = context.new_page()
    tab.goto(deep)
    out["deepTab"] = seen(tab)
    tab.close()
    # The link `gatehost ui --policy` prints: that policy's page.
    page.goto(policy_link)
    out["policyLink"] = seen(page)
    # A browser with no login: the policy's link shows the login form, and
    # the token logs in to that policy.
    context.clear_cookies()
    page.evaluate("localStorage.clear()")
    page.goto("about:blank")
    page.goto(deep)
    out["deepLoggedOut"] = seen(page)
    page.fill("#token", operator)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#policy:not([hidden])", timeout=WAIT)
    out["deepAfterLogin"] = seen(page)


if __name__ == "__main__":
    sys.exit(main(run, 6, 5))
