"""Verify the browser-produced attestation/assertion with Duo Labs' `webauthn` (py_webauthn 3.0.1).
Run: ./venv/bin/python verify.py  (reads results.json written by driver.py)"""
import base64, json, os, struct
from webauthn import verify_registration_response, verify_authentication_response
from webauthn.helpers import parse_authenticator_data

HERE = os.path.dirname(os.path.abspath(__file__))
res = json.load(open(os.path.join(HERE, "results.json")))
port = res["port"]

def unb64u(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))

def attempt(label, fn):
    try:
        v = fn()
        keep = {k: getattr(v, k) for k in ("sign_count", "new_sign_count", "user_verified", "fmt") if hasattr(v, k)}
        print(f"  {label}: OK", keep)
        return v
    except Exception as e:
        print(f"  {label}: REJECTED {type(e).__name__}: {e}")

def check(host, rp_label, case, rp_id):
    origin = f"http://{host}:{port}"
    cr = case["create"]
    if not cr.get("ok"):
        return
    print(f"== {host} / {rp_label} (expected rp_id={rp_id}, origin={origin})")
    reg = attempt("registration", lambda: verify_registration_response(
        credential=cr["credential"], expected_challenge=unb64u(cr["sentChallenge"]),
        expected_origin=origin, expected_rp_id=rp_id, require_user_verification=True))
    if not reg:
        return
    print(f"    credential_id={base64.urlsafe_b64encode(reg.credential_id).rstrip(b'=').decode()[:16]}... "
          f"sign_count={reg.sign_count} uv={reg.user_verified} fmt={reg.fmt} device_type={reg.credential_device_type} "
          f"backed_up={reg.credential_backed_up} aaguid={reg.aaguid}")
    g = case.get("get_uv_required") or case.get("get")
    if not g or not g.get("ok"):
        return
    ad = parse_authenticator_data(unb64u(g["credential"]["response"]["authenticatorData"]))
    print(f"    assertion authData flags: up={ad.flags.up} uv={ad.flags.uv} be={ad.flags.be} bs={ad.flags.bs} sign_count={ad.sign_count}")
    kw = dict(credential=g["credential"], expected_rp_id=rp_id, expected_origin=origin,
              credential_public_key=reg.credential_public_key, credential_current_sign_count=reg.sign_count,
              require_user_verification=True)
    attempt("authentication (correct challenge, UV required)",
            lambda: verify_authentication_response(expected_challenge=unb64u(g["sentChallenge"]), **kw))
    attempt("authentication with a DIFFERENT expected challenge (must fail)",
            lambda: verify_authentication_response(expected_challenge=b"other-policy/other-tree", **kw))
    kw2 = dict(kw, expected_origin=f"http://127.0.0.1:{port}")
    attempt("authentication with expected_origin http://127.0.0.1 (must fail)",
            lambda: verify_authentication_response(expected_challenge=unb64u(g["sentChallenge"]), **kw2))
    kw3 = dict(kw, credential_current_sign_count=ad.sign_count)
    attempt("authentication replay (stored sign_count == assertion's, must fail)",
            lambda: verify_authentication_response(expected_challenge=unb64u(g["sentChallenge"]), **kw3))

for host, cases in res["cases"].items():
    for rp_label, case in cases.items():
        rp_id = case["rpid_sent"] or host
        check(host, rp_label, case, rp_id)

# no-UV assertion (authenticator without UV, userVerification=discouraged): server must refuse when UV is required
nouv = res.get("no_uv")
if nouv and nouv.get("create", {}).get("ok") and nouv.get("get_discouraged", {}).get("ok"):
    host = nouv["host"]; origin = f"http://{host}:{port}"
    print(f"== no-UV authenticator at {origin}")
    cr = nouv["create"]
    reg = attempt("registration (require_user_verification=False)", lambda: verify_registration_response(
        credential=cr["credential"], expected_challenge=unb64u(cr["sentChallenge"]),
        expected_origin=origin, expected_rp_id=host, require_user_verification=False))
    attempt("registration (require_user_verification=True, must fail)", lambda: verify_registration_response(
        credential=cr["credential"], expected_challenge=unb64u(cr["sentChallenge"]),
        expected_origin=origin, expected_rp_id=host, require_user_verification=True))
    g = nouv["get_discouraged"]
    ad = parse_authenticator_data(unb64u(g["credential"]["response"]["authenticatorData"]))
    print(f"    assertion authData flags: up={ad.flags.up} uv={ad.flags.uv}")
    if reg:
        for req in (False, True):
            attempt(f"authentication require_user_verification={req}", lambda: verify_authentication_response(
                credential=g["credential"], expected_challenge=unb64u(g["sentChallenge"]), expected_rp_id=host,
                expected_origin=origin, credential_public_key=reg.credential_public_key,
                credential_current_sign_count=reg.sign_count, require_user_verification=req))
