"""Drive Debian headless Chromium via Playwright against the probe page, using the
CDP WebAuthn domain's virtual authenticator. Writes results.json.
Run: /work/main/target/browser-venv/bin/python driver.py"""
import base64, json, os, secrets, subprocess, sys, tempfile, time
from playwright.sync_api import sync_playwright

HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LOG = []

def log(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    LOG.append(s)

def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()

def unb64u(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))

def run(page, button, rpid="", challenge=None, credid="", uv="required", timeout=30):
    challenge = challenge or b64u(secrets.token_bytes(32))
    page.locator("#out").evaluate("e => e.textContent = ''")  # via CDP, not subject to page CSP
    page.fill("#rpid", rpid)
    page.fill("#challenge", challenge)
    page.fill("#credid", credid)
    page.fill("#uv", uv)
    t0 = time.time()
    page.click(button)
    while time.time() - t0 < timeout:
        t = page.locator("#out").text_content()
        if t:
            r = json.loads(t)
            r["sentChallenge"] = challenge
            r["elapsed_s"] = round(time.time() - t0, 2)
            return r
        time.sleep(0.1)
    return {"ok": False, "name": "DriverTimeout", "sentChallenge": challenge}

def flags_str(f):
    return {"UP": bool(f & 0x01), "UV": bool(f & 0x04), "BE": bool(f & 0x08),
            "BS": bool(f & 0x10), "AT": bool(f & 0x40), "ED": bool(f & 0x80), "raw": f}

def summarize(label, r):
    if r.get("ok"):
        cd = r["clientData"]
        extra = ""
        if r["kind"] == "create":
            ao = unb64u(r["credential"]["response"]["attestationObject"])
            # authData flags from attestationObject are checked in verify.py; here just the clientData
        else:
            extra = f" flags={flags_str(r['flags'])}"
        log(f"[{label}] OK {r['kind']} isSecureContext={r['isSecureContext']} origin={r['origin']} "
            f"clientData.type={cd['type']} clientData.origin={cd['origin']} "
            f"challenge_match={cd['challenge'] == r['sentChallenge']} crossOrigin={cd.get('crossOrigin')} "
            f"credId={r['credential']['id'][:16]}...{extra} ({r['elapsed_s']}s)")
    else:
        log(f"[{label}] FAIL isSecureContext={r.get('isSecureContext')} origin={r.get('origin')} "
            f"{r.get('name')}: {r.get('message')} ({r.get('elapsed_s')}s)")

def main():
    srv = subprocess.Popen([sys.executable, os.path.join(HERE, "serve.py"), "0"], stdout=subprocess.PIPE, text=True)
    port = int(srv.stdout.readline())
    log("server pid", srv.pid, "port", port)
    results = {"port": port, "cases": {}}
    profile = tempfile.mkdtemp(prefix="webauthn-profile-")
    try:
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(profile, executable_path="/usr/bin/chromium",
                                                       headless=True, args=CHROMIUM_ARGS)
            log("browser version", ctx.browser.version if ctx.browser else "(persistent ctx: n/a)")
            try:
                for host in ["127.0.0.1", "localhost"]:
                    base = f"http://{host}:{port}/"
                    page = ctx.new_page()
                    console = []
                    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
                    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
                    page.goto(base)
                    cdp = ctx.new_cdp_session(page)
                    r = cdp.send("WebAuthn.enable", {"enableUI": False})
                    log(f"[{host}] WebAuthn.enable ->", r)
                    opts = {"protocol": "ctap2", "transport": "internal", "hasResidentKey": True,
                            "hasUserVerification": True, "isUserVerified": True,
                            "automaticPresenceSimulation": True}
                    r = cdp.send("WebAuthn.addVirtualAuthenticator", {"options": opts})
                    log(f"[{host}] WebAuthn.addVirtualAuthenticator({json.dumps(opts)}) ->", r)
                    aid = r["authenticatorId"]
                    other = "localhost" if host == "127.0.0.1" else "127.0.0.1"
                    hc = results["cases"].setdefault(host, {})
                    for rp_label, rpid in [(f"rpId={host}", host), ("rpId omitted", ""),
                                           (f"rpId={other} (mismatch)", other)]:
                        cr = run(page, "#reg", rpid=rpid)
                        summarize(f"{host} create {rp_label}", cr)
                        case = {"rpid_sent": rpid, "create": cr}
                        hc[rp_label] = case
                        if not cr.get("ok"):
                            continue
                        cid = cr["credential"]["id"]
                        g = run(page, "#auth", rpid=rpid, credid=cid, uv="required")
                        summarize(f"{host} get UV=required {rp_label}", g)
                        case["get_uv_required"] = g
                    creds = cdp.send("WebAuthn.getCredentials", {"authenticatorId": aid})
                    log(f"[{host}] WebAuthn.getCredentials -> {len(creds['credentials'])} creds:",
                        [{k: c[k] for k in ('rpId', 'isResidentCredential', 'signCount')} for c in creds["credentials"]])
                    # Q4: user not verified
                    main_case = hc[f"rpId={host}"]
                    if main_case["create"].get("ok"):
                        cid = main_case["create"]["credential"]["id"]
                        r = cdp.send("WebAuthn.setUserVerified", {"authenticatorId": aid, "isUserVerified": False})
                        log(f"[{host}] WebAuthn.setUserVerified(false) ->", r)
                        for uv in ["required", "preferred", "discouraged"]:
                            g = run(page, "#auth", rpid=host, credid=cid, uv=uv)
                            summarize(f"{host} get (user NOT verified) UV={uv}", g)
                            main_case[f"get_notverified_uv_{uv}"] = g
                        cr = run(page, "#reg", rpid=host)
                        summarize(f"{host} create (user NOT verified) UV=required", cr)
                        main_case["create_notverified"] = cr
                        cdp.send("WebAuthn.setUserVerified", {"authenticatorId": aid, "isUserVerified": True})
                        # presence not given (no automatic presence simulation) -> what happens?
                        r = cdp.send("WebAuthn.setAutomaticPresenceSimulation", {"authenticatorId": aid, "enabled": False})
                        log(f"[{host}] WebAuthn.setAutomaticPresenceSimulation(false) ->", r)
                        g = run(page, "#auth", rpid=host, credid=cid, uv="required", timeout=15)
                        summarize(f"{host} get (no presence simulation, 5s timeout)", g)
                        main_case["get_no_presence"] = g
                        cdp.send("WebAuthn.setAutomaticPresenceSimulation", {"authenticatorId": aid, "enabled": True})
                        # remove authenticator -> get fails
                        cdp.send("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": aid})
                        g = run(page, "#auth", rpid=host, credid=cid, uv="required", timeout=15)
                        summarize(f"{host} get (authenticator removed)", g)
                        main_case["get_removed"] = g
                    log(f"[{host}] console:", console)
                    cdp.detach()
                    page.close()

                # Extra: authenticator WITHOUT user verification at localhost; and other loopback host names
                results["no_uv"] = nouv = {"host": "localhost"}
                page = ctx.new_page()
                page.goto(f"http://localhost:{port}/")
                cdp = ctx.new_cdp_session(page)
                cdp.send("WebAuthn.enable", {"enableUI": False})
                opts = {"protocol": "ctap2", "transport": "internal", "hasResidentKey": True,
                        "hasUserVerification": False, "automaticPresenceSimulation": True}
                aid = cdp.send("WebAuthn.addVirtualAuthenticator", {"options": opts})["authenticatorId"]
                log("[no-uv] addVirtualAuthenticator", json.dumps(opts))
                nouv["create_required"] = cr = run(page, "#reg", rpid="localhost", uv="required")
                summarize("no-uv authenticator create UV=required", cr)
                nouv["create"] = cr = run(page, "#reg", rpid="localhost", uv="discouraged")
                summarize("no-uv authenticator create UV=discouraged", cr)
                if cr.get("ok"):
                    cid = cr["credential"]["id"]
                    nouv["get_required"] = g = run(page, "#auth", rpid="localhost", credid=cid, uv="required")
                    summarize("no-uv authenticator get UV=required", g)
                    nouv["get_discouraged"] = g = run(page, "#auth", rpid="localhost", credid=cid, uv="discouraged")
                    summarize("no-uv authenticator get UV=discouraged", g)
                # same RP ID "localhost", different port: is the credential usable there (origin differs)?
                srv2 = subprocess.Popen([sys.executable, os.path.join(HERE, "serve.py"), "0"], stdout=subprocess.PIPE, text=True)
                try:
                    port2 = int(srv2.stdout.readline())
                    page.goto(f"http://localhost:{port2}/")
                    if cr.get("ok"):
                        nouv["get_other_port"] = g = run(page, "#auth", rpid="localhost", credid=cid, uv="discouraged")
                        summarize(f"no-uv credential from localhost:{port} used at localhost:{port2}", g)
                finally:
                    srv2.terminate(); srv2.wait()
                # does the virtual authenticator survive a navigation to another origin on the same page?
                page.goto(f"http://127.0.0.1:{port}/")
                creds = cdp.send("WebAuthn.getCredentials", {"authenticatorId": aid})
                log("[no-uv] after navigating the same page to 127.0.0.1, getCredentials ->", len(creds["credentials"]))
                cdp.detach(); page.close()
                results["other_hosts"] = oh = {}
                for host, rpid in [("gatehost.localhost", "gatehost.localhost"), ("gatehost.localhost", "localhost"),
                                   ("[::1]", ""), ("127.0.0.2", "")]:
                    page = ctx.new_page()
                    try:
                        page.goto(f"http://{host}:{port}/", timeout=5000)
                    except Exception as e:
                        log(f"[{host}] goto failed: {str(e).splitlines()[0]}")
                        page.close(); continue
                    cdp = ctx.new_cdp_session(page)
                    cdp.send("WebAuthn.enable", {"enableUI": False})
                    cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {"protocol": "ctap2", "transport": "internal",
                             "hasResidentKey": True, "hasUserVerification": True, "isUserVerified": True,
                             "automaticPresenceSimulation": True}})
                    cr = run(page, "#reg", rpid=rpid)
                    summarize(f"{host} create rpId={rpid or '(omitted)'}", cr)
                    oh[f"{host} {rpid}"] = cr
                    cdp.detach(); page.close()
            finally:
                ctx.close()
    finally:
        srv.terminate(); srv.wait()
        log("server stopped")
    results["log"] = LOG
    with open(os.path.join(HERE, "results.json"), "w") as f:
        json.dump(results, f, indent=1)

if __name__ == "__main__":
    main()
