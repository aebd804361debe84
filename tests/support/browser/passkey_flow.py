"""Passkeys for acks in a real headless Chromium (Debian's, driven by
Playwright for Python) with its virtual authenticator over CDP
(`WebAuthn.addVirtualAuthenticator`), run by tests/daemon/passkey.rs against
a real daemon with `[daemon] ack_requires = "passkey"`.

Arguments: PAGE_URL (http://localhost:PORT) OPERATOR_TOKEN PROFILE_DIR
POLICY_ID SHOTS_DIR ENROL_CODE. The policy is awaiting-ack when it starts;
ENROL_CODE is what `gatehost passkey enrol-code` printed.

On stdout, one JSON line: what it saw. It checks nothing itself but what it
must wait for; the Rust test judges the JSON (and git). Every wait is
bounded; an error is reported in the JSON (`error`) and exit code 1.
"""

import json
import os
import re
import sys
import urllib.error
import urllib.request

from playwright.sync_api import expect

from harness import WAIT, main


# Calls the daemon from the page itself (its cookie, its CSRF token, its
# origin): what a script on the page could do, never what the page's
# buttons do. Returns {status, body}.
FETCH = """async ([method, path, body]) => {
  const r = await fetch(path, {method, credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": localStorage.getItem("csrf")},
    body: body ? JSON.stringify(body) : undefined});
  return {status: r.status, body: await r.json().catch(() => ({}))};
}"""

# An assertion for `purpose`, asked with `userVerification` as given (the
# page always asks "required"): {ceremony, credential} or {error}.
ASSERT = """async ([purpose, uv]) => {
  const headers = {"Content-Type": "application/json", "X-CSRF-Token": localStorage.getItem("csrf")};
  const r = await fetch("/v1/passkeys/challenge", {method: "POST", credentials: "same-origin", headers,
    body: JSON.stringify(purpose)});
  const c = await r.json();
  if (!r.ok) return {error: c.error && c.error.code};
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(c.options.publicKey);
  publicKey.userVerification = uv; publicKey.timeout = 10000;
  try {
    const cred = await navigator.credentials.get({publicKey});
    return {ceremony: c.ceremony, credential: cred.toJSON()};
  } catch (e) { return {error: e.name}; }
}"""

# Registers a passkey named `name` with `assertion` (a registered one's,
# for adding a passkey): {status, body} of the last call, or {error}.
REGISTER = """async ([name, assertion]) => {
  const headers = {"Content-Type": "application/json", "X-CSRF-Token": localStorage.getItem("csrf")};
  let r = await fetch("/v1/passkeys/register", {method: "POST", credentials: "same-origin", headers,
    body: JSON.stringify({name, assertion})});
  const c = await r.json();
  if (!r.ok) return {status: r.status, code: c.error && c.error.code};
  const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(c.options.publicKey);
  publicKey.timeout = 10000;
  let cred;
  try { cred = await navigator.credentials.create({publicKey}); } catch (e) { return {error: e.name}; }
  r = await fetch("/v1/passkeys/register/finish", {method: "POST", credentials: "same-origin", headers,
    body: JSON.stringify({ceremony: c.ceremony, credential: cred.toJSON()})});
  const b = await r.json();
  return {status: r.status, name: b.name, code: b.error && b.error.code};
}"""


# Begins a registration (POST /v1/passkeys/register with `body`) and keeps
# its options in the page: {status, code, ceremony}.
BEGIN = """async (body) => {
  const headers = {"Content-Type": "application/json", "X-CSRF-Token": localStorage.getItem("csrf")};
  const r = await fetch("/v1/passkeys/register", {method: "POST", credentials: "same-origin", headers,
    body: JSON.stringify(body)});
  const c = await r.json();
  if (!r.ok) return {status: r.status, code: c.error && c.error.code, message: c.error && c.error.message};
  window.held = window.held || {};
  window.held[c.ceremony] = c.options.publicKey;
  return {status: r.status, ceremony: c.ceremony};
}"""

# Finishes registration `ceremony` begun by BEGIN: {status, code} or {error}.
FINISH = """async (ceremony) => {
  const headers = {"Content-Type": "application/json", "X-CSRF-Token": localStorage.getItem("csrf")};
  const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(window.held[ceremony]);
  publicKey.timeout = 10000;
  let cred;
  try { cred = await navigator.credentials.create({publicKey}); } catch (e) { return {error: e.name}; }
  const r = await fetch("/v1/passkeys/register/finish", {method: "POST", credentials: "same-origin", headers,
    body: JSON.stringify({ceremony, credential: cred.toJSON()})});
  const b = await r.json();
  return {status: r.status, code: b.error && b.error.code, message: b.error && b.error.message};
}"""


def bearer(url, token, path, body):
    """POSTs `body` to the daemon with the operator token (what a token
    holder without the page does): the status."""
    req = urllib.request.Request(url.replace("localhost", "127.0.0.1") + path, method="POST",
                                 data=json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + token,
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def authenticator(cdp, uv, transport="internal"):
    return cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
        "protocol": "ctap2", "transport": transport, "hasResidentKey": True,
        "hasUserVerification": uv, "isUserVerified": uv,
        "automaticPresenceSimulation": True}})["authenticatorId"]


def run(page, cdp, args, out):
    url, operator, _profile, pid, shots, code = args
    page.goto(url + "/ui/")
    page.wait_for_selector("#login:not([hidden])", timeout=WAIT)
    page.fill("#token", operator)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#inbox:not([hidden])", timeout=WAIT)
    expect(page.locator("#ack-mode")).to_contain_text("need a passkey", timeout=WAIT)
    out["ackMode"] = page.text_content("#ack-mode")

    cdp.send("WebAuthn.enable", {"enableUI": False})

    # The page's login is what any holder of the operator token has: with
    # no passkey registered yet, it registers none without the enrolment
    # code, nor with a wrong one; the page asks for the code.
    out["codeFieldShown"] = page.is_visible("#passkey-code")
    r = page.evaluate(BEGIN, {"name": "squatter"})
    out["firstWithoutCode"] = {"status": r["status"], "code": r.get("code")}
    r = page.evaluate(BEGIN, {"name": "squatter", "code": "00000-00000-00000-00000"})
    out["firstWithWrongCode"] = {"status": r["status"], "code": r.get("code")}
    page.fill("#passkey-name", "no code")
    page.click("#passkey-register")
    expect(page.locator("#passkey-error")).to_contain_text("enrol-code", timeout=WAIT)
    out["pageWithoutCode"] = page.text_content("#passkey-error")

    # A registration begun on the code while none is registered, left
    # pending (a second tab, or whoever else saw the code).
    early = page.evaluate(BEGIN, {"name": "early", "code": code})
    out["earlyBegun"] = early["status"]

    # Register through the page with the code: a click, the
    # authenticator's answer.
    aid = authenticator(cdp, True)
    page.fill("#passkey-name", "test laptop")
    page.fill("#passkey-code", code)
    page.click("#passkey-register")
    expect(page.locator("#passkeys li")).to_have_count(1, timeout=WAIT)
    out["registered"] = page.text_content("#passkeys li")
    out["registerError"] = page.text_content("#passkey-error")
    out["codeFieldAfter"] = page.is_visible("#passkey-code")
    creds = cdp.send("WebAuthn.getCredentials", {"authenticatorId": aid})["credentials"]
    out["credentials"] = [{"rpId": c["rpId"], "signCount": c["signCount"]} for c in creds]
    first_key = creds[0]

    # The early registration, finished now that a passkey exists (on
    # another authenticator): refused, nothing added.
    cdp.send("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": aid})
    evil = authenticator(cdp, True, "usb")
    r = page.evaluate(FINISH, early.get("ceremony", ""))
    out["earlyFinished"] = {"status": r.get("status"), "code": r.get("code"), "error": r.get("error")}
    cdp.send("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": evil})
    aid = authenticator(cdp, True)
    cdp.send("WebAuthn.addCredential", {"authenticatorId": aid, "credential": first_key})
    # The code again: it registered one passkey; a later one needs an
    # assertion.
    r = page.evaluate(BEGIN, {"name": "again", "code": code})
    out["codeAgain"] = {"status": r["status"], "code": r.get("code")}

    # A second registration with no assertion of the first is refused.
    second = page.evaluate(FETCH, ["POST", "/v1/passkeys/register", {"name": "another"}])
    out["secondWithoutAssertion"] = {"status": second["status"], "code": second["body"].get("error", {}).get("code")}

    # The policy's page; the authenticator fails its user verification:
    # the browser gives no assertion, nothing is approved.
    page.click(f"#waiting a[href='#policy/{pid}']")
    expect(page.locator("#p-status")).to_have_text("awaiting-ack", timeout=WAIT)
    page.wait_for_selector("#p-diff .add", timeout=WAIT)
    # The tree the page shows (its diff's): what an approval is bound to.
    tree = page.evaluate("current.tree")
    out["tree"] = tree
    cdp.send("WebAuthn.setUserVerified", {"authenticatorId": aid, "isUserVerified": False})
    page.click("#approve")
    expect(page.locator("#p-error")).to_contain_text("NotAllowedError", timeout=WAIT)
    out["unverifiedError"] = page.text_content("#p-error")
    out["statusAfterUnverified"] = page.text_content("#p-status")

    # The same credential in an authenticator with no user verification,
    # asked for "discouraged": an assertion with UV=0 reaches the daemon
    # and is refused. Replayed, its ceremony is spent.
    key = cdp.send("WebAuthn.getCredentials", {"authenticatorId": aid})["credentials"][0]
    cdp.send("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": aid})
    bare = authenticator(cdp, False)
    cdp.send("WebAuthn.addCredential", {"authenticatorId": bare, "credential": key})
    purpose = {"for": "approve", "policy": pid, "tree": tree}
    a = page.evaluate(ASSERT, [purpose, "discouraged"])
    out["bareAssertion"] = "credential" in a
    body = {"approve": True, "tree": tree, "passkey": a}
    r = page.evaluate(FETCH, ["POST", f"/v1/policies/{pid}/ack", body])
    out["uv0"] = {"status": r["status"], "code": r["body"].get("error", {}).get("code"),
                  "message": r["body"].get("error", {}).get("message")}
    r = page.evaluate(FETCH, ["POST", f"/v1/policies/{pid}/ack", body])
    out["replay"] = {"status": r["status"], "code": r["body"].get("error", {}).get("code")}
    cdp.send("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": bare})

    # Back to the verifying authenticator: an assertion made for another
    # tree is refused at its challenge; then approve through the page.
    aid = authenticator(cdp, True)
    cdp.send("WebAuthn.addCredential", {"authenticatorId": aid, "credential": key})
    other = page.evaluate(ASSERT, [{"for": "approve", "policy": pid, "tree": "0" * 40}, "required"])
    out["otherTree"] = other.get("error")
    page.click("#approve")
    expect(page.locator("#p-status")).to_have_text("done", timeout=WAIT)
    out["approvedStatus"] = page.text_content("#p-status")
    out["approveError"] = page.text_content("#p-error")
    creds = cdp.send("WebAuthn.getCredentials", {"authenticatorId": aid})["credentials"]
    out["signCountAfter"] = creds[0]["signCount"] if creds else None

    # Back in the inbox: the passkey was used.
    page.click("a[href='#']")
    expect(page.locator("#passkeys li")).to_contain_text(re.compile(r", used \d"), timeout=WAIT)
    out["passkeyAfter"] = page.text_content("#passkeys li")
    page.locator("#passkey-form").scroll_into_view_if_needed()
    page.screenshot(path=os.path.join(shots, "passkeys.png"))

    # A second passkey, on another authenticator (a security key; the
    # first one holds an excluded credential, so it cannot make it): the
    # first's assertion for adding a passkey, then the second creates one.
    add = page.evaluate(ASSERT, [{"for": "add-passkey"}, "required"])
    out["addAssertion"] = "credential" in add
    # While it is pending, a token holder floods the daemon with
    # challenges: its own, never the page's, are pushed out.
    out["flood"] = [bearer(url, operator, "/v1/passkeys/challenge", {"for": "add-passkey"})
                    for _ in range(40)]
    cdp.send("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": aid})
    other_auth = authenticator(cdp, True, "usb")
    second = page.evaluate(REGISTER, ["phone", add])
    out["second"] = second
    # Its assertion is spent: the same one cannot add a third.
    third = page.evaluate(FETCH, ["POST", "/v1/passkeys/register", {"name": "third", "assertion": add}])
    out["thirdWithSpentAssertion"] = {"status": third["status"], "code": third["body"].get("error", {}).get("code")}
    page.reload()
    page.wait_for_selector("#inbox:not([hidden])", timeout=WAIT)
    expect(page.locator("#passkeys li")).to_have_count(2, timeout=WAIT)
    out["afterSecond"] = page.eval_on_selector_all("#passkeys li", "els => els.map(e => e.textContent)")
    # Remove the first (a registered passkey's assertion for exactly that),
    # then the last is kept while approvals need one.
    page.click("#passkeys li:nth-child(1) button")
    expect(page.locator("#passkeys li")).to_have_count(1, timeout=WAIT)
    out["afterRemove"] = page.text_content("#passkeys li")
    page.click("#passkeys li:nth-child(1) button")
    expect(page.locator("#passkey-error")).not_to_be_empty(timeout=WAIT)
    out["lastRemoveError"] = page.text_content("#passkey-error")
    out["afterLast"] = page.eval_on_selector_all("#passkeys li", "els => els.map(e => e.textContent)")
    # Renamed: a prompt for the new name, then the list shows it.
    page.once("dialog", lambda d: d.accept("renamed laptop"))
    page.click("#passkeys li:nth-child(1) button.rename")
    expect(page.locator("#passkeys li")).to_contain_text("renamed laptop", timeout=WAIT)
    out["afterRename"] = page.text_content("#passkeys li")
    out["secondAuthenticator"] = len(cdp.send("WebAuthn.getCredentials", {"authenticatorId": other_auth})["credentials"])


def with_cdp(context, page, args, out):
    run(page, context.new_cdp_session(page), args, out)


if __name__ == "__main__":
    sys.exit(main(with_cdp, 6, 2))
