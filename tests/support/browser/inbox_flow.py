"""The inbox of many policies in a real headless Chromium, run by
tests/daemon/ui/inbox.rs: every policy awaiting its ack is reached by
"More", the lists' counts and the tab's title say how many wait, blocked
policies are apart, and one dismissed (confirmed) leaves them.

Arguments: LINK PROFILE_DIR.

On stdout, one JSON line: the counts shown, the tab's title, the ids of
every row of each list after paging to its end, how many "More" clicks it
took, and the rows after a dismissal. It checks nothing itself but what it
must wait for; the Rust test judges the JSON. Every wait is bounded; an
error is reported in the JSON (`error`) and exit code 1.
"""

import sys

from playwright.sync_api import expect

from harness import WAIT, main


def ids(page, list_id):
    return page.eval_on_selector_all(f"#{list_id} li", "els => els.map(e => e.dataset.policy)")


def page_to_end(page, list_id, more_id):
    """Clicks "More" under a list until it is hidden; the clicks."""
    clicks = 0
    while page.is_visible(f"#{more_id}"):
        before = page.locator(f"#{list_id} li").count()
        page.click(f"#{more_id}")
        # (Polled from here: the page's CSP forbids the eval a
        # wait_for_function needs.)
        waited = 0
        while page.locator(f"#{list_id} li").count() <= before and page.is_visible(f"#{more_id}"):
            if waited > WAIT:
                raise TimeoutError(f"{more_id} added nothing")
            page.wait_for_timeout(20)
            waited += 20
        clicks += 1
        if clicks > 1000:
            raise RuntimeError("More never ends")
    return clicks


def run(page, args, out):
    link, _profile = args
    failed = out.setdefault("failedRequests", [])
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(link)
    page.wait_for_selector("#inbox:not([hidden]) #waiting li", timeout=WAIT)
    expect(page.locator("#waiting-count")).not_to_have_text("0", timeout=WAIT)
    out["counts"] = {k: page.text_content(f"#{k}-count") for k in ("waiting", "blocked", "others")}
    out["title"] = page.title()
    out["firstPage"] = len(ids(page, "waiting"))
    out["waitingClicks"] = page_to_end(page, "waiting", "more-waiting")
    out["waiting"] = ids(page, "waiting")
    out["blocked"] = ids(page, "blocked")
    out["blockedStatuses"] = page.eval_on_selector_all("#blocked li", "els => els.map(e => e.dataset.status)")
    # Dismiss the first blocked one: a confirmation, then it leaves the list.
    dialogs = []

    def accept(d):
        dialogs.append(d.message)
        d.accept()

    page.on("dialog", accept)
    first = out["blocked"][0]
    page.click(f"#blocked li[data-policy='{first}'] button")
    expect(page.locator(f"#blocked li[data-policy='{first}']")).to_have_count(0, timeout=WAIT)
    expect(page.locator("#blocked-count")).not_to_have_text(out["counts"]["blocked"], timeout=WAIT)
    out["dialogs"] = dialogs
    out["dismissed"] = page.eval_on_selector_all(
        f"#others li[data-policy='{first}']", "els => els.map(e => e.dataset.status)")
    out["countsAfter"] = {k: page.text_content(f"#{k}-count") for k in ("waiting", "blocked", "others")}
    out["titleAfter"] = page.title()
    # The filter box: an agent, then words, then what matches nothing.
    for key, text in (("byAgent", "agent:codex"), ("bySearch", "change 1490"), ("byNothing", "no such words")):
        before = page.get_attribute("#waiting", "data-query")
        page.fill("#filter", text)
        expect(page.locator("#filter-note")).not_to_be_empty(timeout=WAIT)
        # The list loaded again with the filter (its query changed), then
        # every row it keeps (paged to the end).
        waited = 0
        while page.get_attribute("#waiting", "data-query") == before:
            if waited > WAIT:
                raise TimeoutError(f"the filter {text!r} was not applied")
            page.wait_for_timeout(20)
            waited += 20
        page_to_end(page, "waiting", "more-waiting")
        out[key] = ids(page, "waiting")


if __name__ == "__main__":
    sys.exit(main(lambda _context, page, args, out: run(page, args, out), 2, 1))
