"""The operator's page of a fleet (hosts sharing one PostgreSQL) in a real
headless Chromium, run by tests/store/page.rs against one host's daemon.

Arguments: URL OPERATOR_TOKEN PROFILE_DIR SHOTS_DIR POLICY_ID SESSION_ID.
The policy (another host's, awaiting its ack) and the session are there
when it starts.

On stdout, one JSON line: what it saw (the hosts panel, the policy's and
the session's host in the inbox, the policy page's host line and its diff,
made by the owning host). It checks nothing itself but what it must wait
for; the Rust test judges the JSON. Every wait is bounded; an error is
reported in the JSON (`error`) and exit code 1.
"""

import os
import sys

from playwright.sync_api import expect

from harness import WAIT, main


def lines_of(page, selector):
    return page.eval_on_selector_all(selector, "els => els.map(e => e.textContent)")


def run(page, args, out):
    url, operator, _profile, shots, policy_id, session_id = args
    page.goto(url + "/ui/")
    page.wait_for_selector("#login:not([hidden])", timeout=WAIT)
    page.fill("#token", operator)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#inbox:not([hidden])", timeout=WAIT)

    # The hosts panel: one entry per host, with its state and lease.
    page.wait_for_selector("#hosts-panel:not([hidden])", timeout=WAIT)
    out["hosts"] = page.eval_on_selector_all(
        "#hosts li", "els => els.map(e => [e.dataset.host, e.textContent])"
    )
    # The policy waiting for the operator, and the session, with their host.
    row = page.locator(f"#waiting li[data-policy='{policy_id}']")
    expect(row).to_have_count(1, timeout=WAIT)
    out["policyHost"] = row.locator(".host").get_attribute("data-host")
    out["policyRow"] = row.text_content()
    srow = page.locator(f"#sessions li[data-session='{session_id}']")
    expect(srow).to_have_count(1, timeout=WAIT)
    out["sessionHost"] = srow.locator(".host").get_attribute("data-host")
    page.screenshot(path=os.path.join(shots, "inbox-hosts.png"), full_page=True)

    # Its page: the host line, and the diff the owning host made.
    page.click(f"#waiting a[href='#policy/{policy_id}']")
    expect(page.locator("#p-host-line")).to_be_visible(timeout=WAIT)
    out["policyPageHost"] = page.text_content("#p-host")
    page.wait_for_selector("#p-diff .add", timeout=WAIT)
    out["diffAdded"] = lines_of(page, "#p-diff .add")
    out["actionsShown"] = page.is_visible("#actions")
    page.screenshot(path=os.path.join(shots, "policy-host.png"), full_page=True)


if __name__ == "__main__":
    sys.exit(main(lambda _context, page, args, out: run(page, args, out), 6, 2))
