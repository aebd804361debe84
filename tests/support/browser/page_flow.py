"""The operator's page in a real headless Chromium (Debian's, driven by
Playwright for Python), run by tests/daemon/ui/browser.rs against a real daemon.

Arguments: URL OPERATOR_TOKEN AGENT_TOKEN SHOTS_DIR PROFILE_DIR APPROVE_ID
REJECT_ID COMMENT CHANGES_ID MANY_ID. The four policies are attached and
watching when it starts.

On stdout: `ready` once logged in with the inbox shown (the test then ends
the agent's turn, and the policies turn awaiting-ack), then, after reading
a line on stdin, one JSON line: what it saw. It checks nothing itself but
what it must wait for; the Rust test judges the JSON (and git). Every wait
is bounded; an error is reported in the JSON (`error`) and exit code 1.
"""

import os
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

from playwright.sync_api import expect

from harness import WAIT, main

# The comment "request changes" sends on a line of the diff.
CHANGES_COMMENT = "Say what the first step is."


def lines_of(page, selector):
    return page.eval_on_selector_all(selector, "els => els.map(e => e.textContent)")


def dev_server_cookie(page, url):
    """Opens a "dev server" on another port of the page's host in the
    browser; the Cookie header the browser sent it (cookies ignore ports)."""
    host = urllib.parse.urlsplit(url).hostname
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("Cookie") or "")
            body = b"<!doctype html><title>dev</title><p>a dev server"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args):
            pass

    server = HTTPServer((host, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page.goto(f"http://{host}:{server.server_address[1]}/", timeout=WAIT)
    finally:
        server.shutdown()
        server.server_close()
    return seen[0] if seen else ""


def replay(url, cookie):
    """The daemon's answer to `url` with `cookie` alone, as that dev server
    could send it."""
    req = urllib.request.Request(url, headers={"Cookie": cookie})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


class Held:
    """The first request for the diff of policy `pid`, held in the browser's
    network until `release` (a barrier: the page waits for that answer
    while the script acts). Later ones go through."""

    def __init__(self, page, pid):
        self.page = page
        self.held = []
        self.match = lambda url: f"/v1/policies/{pid}/diff" in url
        page.route(self.match, self._route)

    def _route(self, route):
        if self.held:
            route.continue_()
        else:
            self.held.append(route)

    def wait(self):
        """Until the page asked (bounded)."""
        for _ in range(WAIT // 20):
            if self.held:
                return
            self.page.wait_for_timeout(20)
        raise TimeoutError("the page never asked for the held diff")

    def release(self):
        """Lets the held request through and waits until its answer has
        reached the page."""
        with self.page.expect_request_finished(lambda r: self.match(r.url), timeout=WAIT):
            self.held[0].continue_()
        self.page.unroute(self.match, self._route)


def run(page, args, out):
    url, operator, agent, shots, _profile, approve_id, reject_id, comment, changes_id, many_id = args
    page.goto(url + "/ui/")
    page.wait_for_selector("#login:not([hidden])", timeout=WAIT)

    # The agent token is refused: an error, still on the login form.
    page.fill("#token", agent)
    page.click("#login-form button[type=submit]")
    # (Locator waits: the page's CSP forbids the eval a function wait needs.)
    expect(page.locator("#login-error")).not_to_be_empty(timeout=WAIT)
    out["agentError"] = page.text_content("#login-error")
    out["agentStayedOnLogin"] = page.is_visible("#login") and not page.is_visible("#inbox")

    page.fill("#token", operator)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#inbox:not([hidden])", timeout=WAIT)
    out["loggedIn"] = True
    # Set once: still there later means the page was never reloaded.
    page.evaluate("window.__sameDocument = 'yes'")

    print("ready", flush=True)
    sys.stdin.readline()

    # Both policies turn awaiting-ack and appear without a reload.
    for pid in (approve_id, reject_id, changes_id, many_id):
        page.wait_for_selector(f"#waiting a[href='#policy/{pid}']", timeout=WAIT)
    out["appearedLive"] = page.evaluate("window.__sameDocument") == "yes"
    out["waiting"] = lines_of(page, "#waiting li")
    # The agent's session, with its state and last message, after its turn.
    expect(page.locator("#sessions li[data-session='s1']")).to_contain_text("idle", timeout=WAIT)
    out["session"] = page.text_content("#sessions li[data-session='s1']")
    page.screenshot(path=os.path.join(shots, "inbox.png"), full_page=True)

    # The policy page: its diff, added and removed lines.
    page.click(f"#waiting a[href='#policy/{approve_id}']")
    expect(page.locator("#p-status")).to_have_text("awaiting-ack", timeout=WAIT)
    page.wait_for_selector("#p-diff .add", timeout=WAIT)
    # The hunks' rows (headers and lines) apart from the files' headers,
    # which are the page's own (a name, what happened to it).
    out["diff"] = "\n".join(lines_of(page, "#p-diff > div:not(.file)"))
    out["fileHeaders"] = lines_of(page, "#p-diff > div.file .label")
    out["gutters"] = page.eval_on_selector_all("#p-diff > div[data-ln]", "els => els.map(e => e.dataset.ln)")
    out["added"] = lines_of(page, "#p-diff .add")
    out["removed"] = lines_of(page, "#p-diff .del")
    # Syntax colouring (src/lib.rs: Rust): keywords and numbers as spans,
    # the lines' text unchanged (`added` above is their textContent).
    out["keywords"] = lines_of(page, "#p-diff .add .kw")
    out["numbers"] = lines_of(page, "#p-diff .add .num")
    # Its gate runs: the one run, each gate's outcome, and the warning
    # finding at src/lib.rs:2, a button that shows that line of the diff.
    page.wait_for_selector("#p-runs li[data-run='1']", timeout=WAIT)
    out["runs"] = lines_of(page, "#p-runs > li")
    button = page.locator("#p-runs .finding button[data-path='src/lib.rs'][data-line='2']")
    button.click()
    target = page.locator("#p-diff .target")
    expect(target).to_have_count(1, timeout=WAIT)
    out["findingTarget"] = {
        "path": target.get_attribute("data-path"),
        "line": target.get_attribute("data-line"),
        "side": target.get_attribute("data-side"),
        "text": target.text_content(),
        "focused": page.evaluate("document.activeElement.classList.contains('target')"),
    }
    # The timeline: the policy's events, oldest first.
    expect(page.locator("#p-timeline code").last).to_have_text("policy:commit-ready", timeout=WAIT)
    out["timeline"] = lines_of(page, "#p-timeline code")
    page.screenshot(path=os.path.join(shots, "policy.png"), full_page=True)

    # The split view: the removed line beside the added one.
    page.click("#split-toggle")
    page.wait_for_selector("#p-diff .split-row", timeout=WAIT)
    out["splitPairs"] = page.eval_on_selector_all(
        "#p-diff .split-row", "rows => rows.map(r => [...r.children].map(c => c.textContent))"
    )
    page.screenshot(path=os.path.join(shots, "policy-split.png"), full_page=True)
    page.click("#split-toggle")
    page.wait_for_selector("#p-diff .split-row", state="detached", timeout=WAIT)

    # Approve: the page shows done (live: the commit lands after the answer).
    page.click("#approve")
    expect(page.locator("#p-status")).to_have_text("done", timeout=WAIT)
    out["approvedStatus"] = page.text_content("#p-status")
    out["sameDocumentAfterApprove"] = page.evaluate("window.__sameDocument") == "yes"

    # A phone-sized screen: the other policy, approve and reject in view.
    page.set_viewport_size({"width": 390, "height": 844})
    page.click("a[href='#']")
    page.wait_for_selector(f"#waiting a[href='#policy/{reject_id}']", timeout=WAIT)
    page.screenshot(path=os.path.join(shots, "inbox-390.png"))
    page.click(f"#waiting a[href='#policy/{reject_id}']")
    expect(page.locator("#p-status")).to_have_text("awaiting-ack", timeout=WAIT)
    page.wait_for_selector("#approve", state="visible", timeout=WAIT)
    # The test changed docs/notes.md after the snapshot: listed apart.
    page.wait_for_selector("#p-since:not([hidden])", timeout=WAIT)
    out["sinceSnapshot"] = lines_of(page, "#p-since-list li")
    boxes = {}
    for button in ("approve", "reject"):
        box = page.locator("#" + button).bounding_box()
        boxes[button] = {
            "visible": page.is_visible("#" + button),
            "inViewport": box is not None
            and box["x"] >= 0
            and box["x"] + box["width"] <= 390
            and box["y"] >= 0
            and box["y"] + box["height"] <= 844,
            "width": box["width"] if box else 0,
        }
    out["mobile"] = boxes
    out["pageWidth"] = page.evaluate("document.documentElement.scrollWidth")
    page.screenshot(path=os.path.join(shots, "policy-390.png"))

    # Reject with a comment for the agent.
    page.fill("#reject-comment", comment)
    page.click("#reject")
    expect(page.locator("#p-status")).to_have_text("cancelled", timeout=WAIT)
    out["rejectedStatus"] = page.text_content("#p-status")
    out["errorShown"] = page.text_content("#p-error")

    # Request changes: a comment on line 1 of the added file. Its diff is
    # held back while the page shows the policy: nothing of the rejected
    # policy's page (a line of its diff to comment on, its buttons) may be
    # on screen meanwhile. (A comment typed on the old diff's line was
    # dropped when this one came, and "Request changes" then sent nothing.)
    diff_of_changes = Held(page, changes_id)
    page.set_viewport_size({"width": 1100, "height": 800})
    page.click("a[href='#']")
    page.click(f"#waiting a[href='#policy/{changes_id}']")
    expect(page.locator("#p-status")).to_have_text("awaiting-ack", timeout=WAIT)
    diff_of_changes.wait()
    out["whileLoading"] = {
        "title": page.text_content("#p-id"),
        "diffLines": page.locator("#p-diff [data-line]").count(),
        "actionsShown": page.is_visible("#actions"),
    }
    diff_of_changes.release()
    row = page.locator("#p-diff .add[data-line='1']")
    row.click()
    page.locator("#p-diff .line-comment").fill(CHANGES_COMMENT)
    out["commentedOn"] = {
        "path": row.get_attribute("data-path"),
        "line": row.get_attribute("data-line"),
        "side": row.get_attribute("data-side"),
    }
    page.screenshot(path=os.path.join(shots, "policy-comment.png"), full_page=True)
    page.click("#request-changes")
    expect(page.locator("#p-status")).to_have_text("watching", timeout=WAIT)
    out["changesStatus"] = page.text_content("#p-status")

    # A late answer for a page left: the approved policy's page again, its
    # diff held back while the operator goes on to the next policy, then
    # let through. The page must stay the next policy's (its diff, its tree).
    # (Through the address, not the inbox's list of other policies: the
    # request just sent moves a policy into that list, and a click can
    # land while it is drawn again.)
    diff_of_approved = Held(page, approve_id)
    page.evaluate(f"location.hash = '#policy/{approve_id}'")
    expect(page.locator("#p-status")).to_have_text("done", timeout=WAIT)
    diff_of_approved.wait()

    # A large diff, a page of files at a time: "More files" appends the rest.
    page.click("a[href='#']")
    page.click(f"#waiting a[href='#policy/{many_id}']")
    expect(page.locator("#p-status")).to_have_text("awaiting-ack", timeout=WAIT)
    files = page.locator("#p-diff [data-file]")
    expect(files).to_have_count(100, timeout=WAIT)
    # (The next page's answer comes after the late one: "More files" below
    # finds what it left.)
    diff_of_approved.release()
    out["firstPageFiles"] = files.count()
    out["pageNote"] = page.text_content("#p-diff-note")
    out["moreShown"] = page.is_visible("#more-files")
    page.click("#more-files")
    expect(files).to_have_count(101, timeout=WAIT)
    out["allFiles"] = page.eval_on_selector_all("#p-diff [data-file]", "els => els.map(e => e.dataset.file)")
    out["moreHiddenAtEnd"] = not page.is_visible("#more-files")
    out["titleAtEnd"] = page.text_content("#p-id")

    # Last (it leaves the page): the browser sends the page's cookie to a
    # dev server on another port of the same host; replayed alone to the
    # daemon, it reads nothing.
    cookie = dev_server_cookie(page, url)
    out["devServerGotCookie"] = "gatehost_session=" in cookie
    out["replayedAlone"] = replay(url + "/v1/policies", cookie)


if __name__ == "__main__":
    sys.exit(main(lambda _context, page, args, out: run(page, args, out), 10, 4))
