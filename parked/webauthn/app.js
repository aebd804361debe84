"use strict";
function b64uDecode(s) {
  s = s.replace(/-/g, "+").replace(/_/g, "/");
  while (s.length % 4) s += "=";
  const bin = atob(s);
  const u = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
  return u;
}
function b64uEncode(buf) {
  const u = new Uint8Array(buf);
  let bin = "";
  for (let i = 0; i < u.length; i++) bin += String.fromCharCode(u[i]);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
function val(id) { return document.getElementById(id).value; }
function show(obj) {
  obj.isSecureContext = window.isSecureContext;
  obj.origin = window.location.origin;
  document.getElementById("out").textContent = JSON.stringify(obj);
}
function errObj(e) { return { ok: false, name: e && e.name, message: e && e.message, str: String(e) }; }

async function register() {
  try {
    if (!window.PublicKeyCredential || !navigator.credentials) {
      show({ ok: false, name: "NoAPI", message: "PublicKeyCredential undefined" });
      return;
    }
    const rp = { name: "gatehost probe" };
    if (val("rpid")) rp.id = val("rpid");
    const cred = await navigator.credentials.create({ publicKey: {
      rp: rp,
      user: { id: new Uint8Array([1, 2, 3, 4]), name: "operator", displayName: "Operator" },
      challenge: b64uDecode(val("challenge")),
      pubKeyCredParams: [{ type: "public-key", alg: -7 }, { type: "public-key", alg: -257 }],
      authenticatorSelection: { residentKey: "required", userVerification: val("uv") || "required" },
      attestation: "none",
      timeout: 20000,
    }});
    const r = cred.response;
    show({ ok: true, kind: "create",
      credential: {
        id: cred.id, rawId: b64uEncode(cred.rawId), type: cred.type,
        authenticatorAttachment: cred.authenticatorAttachment,
        response: {
          clientDataJSON: b64uEncode(r.clientDataJSON),
          attestationObject: b64uEncode(r.attestationObject),
          transports: r.getTransports ? r.getTransports() : [],
        },
        clientExtensionResults: cred.getClientExtensionResults(),
      },
      clientData: JSON.parse(new TextDecoder().decode(r.clientDataJSON)),
    });
  } catch (e) { show(errObj(e)); }
}

async function authenticate() {
  try {
    const pk = {
      challenge: b64uDecode(val("challenge")),
      userVerification: val("uv") || "required",
      timeout: 5000,
    };
    if (val("rpid")) pk.rpId = val("rpid");
    if (val("credid")) pk.allowCredentials = [{ type: "public-key", id: b64uDecode(val("credid")) }];
    const cred = await navigator.credentials.get({ publicKey: pk });
    const r = cred.response;
    const ad = new Uint8Array(r.authenticatorData);
    show({ ok: true, kind: "get",
      credential: {
        id: cred.id, rawId: b64uEncode(cred.rawId), type: cred.type,
        authenticatorAttachment: cred.authenticatorAttachment,
        response: {
          clientDataJSON: b64uEncode(r.clientDataJSON),
          authenticatorData: b64uEncode(r.authenticatorData),
          signature: b64uEncode(r.signature),
          userHandle: r.userHandle ? b64uEncode(r.userHandle) : null,
        },
        clientExtensionResults: cred.getClientExtensionResults(),
      },
      clientData: JSON.parse(new TextDecoder().decode(r.clientDataJSON)),
      flags: ad[32],
    });
  } catch (e) { show(errObj(e)); }
}

document.getElementById("reg").addEventListener("click", register);
document.getElementById("auth").addEventListener("click", authenticate);
