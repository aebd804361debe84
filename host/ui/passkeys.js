// The passkeys' panel of the inbox and the WebAuthn ceremonies: what
// approving takes, the registered passkeys, registering and removing one,
// and the assertion an approval carries when the daemon needs one. It
// uses app.js's helpers ($, el, api) once the page is loaded.
"use strict";
// Passkeys (WebAuthn): what approving takes here, and the registered ones.
// A ceremony's options come from the daemon as JSON; the browser parses
// them and the answer goes back as its toJSON().
let keys = null;
async function passkeys() {
  keys = await api("GET", "/v1/passkeys");
  $("ack-mode").textContent = keys.ackRequires === "passkey"
    ? "Approvals need a passkey on this daemon: the operator token alone approves nothing."
    : "Approvals take the operator token (set [daemon] ack_requires = \"passkey\" to need a passkey).";
  const away = keys.origin && location.origin !== keys.origin;
  $("passkey-where").hidden = !away && !keys.unavailable;
  $("passkey-origin").textContent = keys.origin + "/ui/"; $("passkey-origin").href = keys.origin + "/ui/";
  $("passkeys").replaceChildren(...keys.passkeys.map((k) => {
    const li = el("li", k.name + " "); li.dataset.passkey = k.id;
    li.append(el("span", "added " + ago(k.createdAt) + (k.lastUsedAt ? ", used " + ago(k.lastUsedAt) : ", never used"), "hint"));
    if (k.damage) li.append(el("div", k.damage, "reason"));
    const rm = el("button", "Remove"); rm.addEventListener("click", () => removePasskey(k.id));
    const rn = el("button", "Rename", "rename"); rn.addEventListener("click", () => renamePasskey(k.id, k.name));
    li.append(" ", rm, " ", rn);
    return li;
  }));
  // The first passkey needs the enrolment code; every later one an
  // assertion of a registered one.
  const first = keys.passkeys.length === 0;
  $("passkey-code-label").hidden = !first; $("passkey-code-hint").hidden = !first;
}
async function assertion(purpose) {
  const c = await api("POST", "/v1/passkeys/challenge", purpose);
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(c.options.publicKey);
  publicKey.timeout = 60000;
  const cred = await navigator.credentials.get({ publicKey });
  return { ceremony: c.ceremony, credential: cred.toJSON() };
}
async function registerPasskey(ev) {
  ev.preventDefault();
  $("passkey-error").textContent = "";
  try {
    if (!keys) await passkeys();
    const name = $("passkey-name").value.trim() || "passkey";
    const body = { name };
    if (keys.passkeys.length) body.assertion = await assertion({ for: "add-passkey" });
    else body.code = $("passkey-code").value.trim();
    const c = await api("POST", "/v1/passkeys/register", body);
    const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(c.options.publicKey);
    publicKey.timeout = 60000;
    const cred = await navigator.credentials.create({ publicKey });
    await api("POST", "/v1/passkeys/register/finish", { ceremony: c.ceremony, credential: cred.toJSON() });
    $("passkey-name").value = ""; $("passkey-code").value = "";
    await passkeys();
  } catch (e) { $("passkey-error").textContent = e.name ? e.name + ": " + e.message : e.message; }
}
async function renamePasskey(id, name) {
  $("passkey-error").textContent = "";
  const to = prompt("A new name for the passkey '" + name + "'", name);
  if (to === null || !to.trim() || to.trim() === name) return;
  try { await api("POST", "/v1/passkeys/" + encodeURIComponent(id) + "/rename", { name: to.trim() }); await passkeys(); }
  catch (e) { $("passkey-error").textContent = e.message; }
}
async function removePasskey(id) {
  $("passkey-error").textContent = "";
  try {
    const a = await assertion({ for: "remove-passkey", passkey: id });
    await api("POST", "/v1/passkeys/" + encodeURIComponent(id) + "/remove", { assertion: a });
    await passkeys();
  } catch (e) { $("passkey-error").textContent = e.name ? e.name + ": " + e.message : e.message; }
}
