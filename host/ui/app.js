// The operator's page: everything agent-written goes through textContent.
"use strict";
let csrf = sessionStorage.getItem("csrf");
const $ = (id) => document.getElementById(id);
const el = (tag, text, cls) => { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; };
async function api(method, path, body) {
  const h = { "Content-Type": "application/json" };
  if (csrf) h["X-CSRF-Token"] = csrf;
  const r = await fetch(path, { method, headers: h, credentials: "same-origin", body: body ? JSON.stringify(body) : undefined });
  const j = await r.json().catch(() => ({}));
  if (r.status === 401) { show("login"); throw new Error("log in"); }
  if (!r.ok) throw new Error((j.error && j.error.message) || r.statusText);
  return j;
}
function show(id) { for (const s of ["login", "inbox", "policy"]) $(s).hidden = s !== id; }
const WAITING = "awaiting-ack,blocked,error";
function item(p) {
  const li = el("li"); const a = el("a", p.id); a.href = "#policy/" + encodeURIComponent(p.id);
  li.append(a, " ", el("strong", p.status), " ", el("span", p.sessionId || ""));
  return li;
}
let cursor = 0;
async function inbox() {
  show("inbox");
  const w = await api("GET", "/v1/policies?order=newest&status=" + WAITING);
  $("waiting").replaceChildren(...w.policies.map(item));
  const o = await api("GET", "/v1/policies?order=newest&limit=50");
  $("others").replaceChildren(...o.policies.filter((p) => !WAITING.split(",").includes(p.status)).map(item));
  cursor = o.nextCursor; $("more").hidden = cursor == null;
}
async function more() {
  const o = await api("GET", "/v1/policies?order=newest&limit=50&cursor=" + cursor);
  $("others").append(...o.policies.filter((p) => !WAITING.split(",").includes(p.status)).map(item));
  cursor = o.nextCursor; $("more").hidden = cursor == null;
}
let current = null;
async function policy(id) {
  show("policy"); $("p-error").textContent = "";
  const p = await api("GET", "/v1/policies/" + encodeURIComponent(id));
  current = p;
  $("p-title").textContent = p.id; $("p-status").textContent = p.status;
  $("p-plan").textContent = JSON.stringify(p.plan, null, 2);
  $("p-verdicts").textContent = JSON.stringify(p.verdict ?? null, null, 2);
  $("actions").hidden = p.status !== "awaiting-ack";
  try {
    const d = await api("GET", "/v1/policies/" + encodeURIComponent(id) + "/diff");
    current.tree = d.tree;
    $("p-diff").replaceChildren(...d.patch.split("\n").map((l) =>
      el("div", l, l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : l.startsWith("@@") ? "hunk" : "")));
  } catch (e) { $("p-diff").textContent = e.message; }
}
async function act(body, path) {
  try { await api("POST", "/v1/policies/" + encodeURIComponent(current.id) + path, body); await policy(current.id); }
  catch (e) { $("p-error").textContent = e.message; }
}
function route() {
  const m = location.hash.match(/^#policy\/(.+)$/);
  (m ? policy(decodeURIComponent(m[1])) : inbox()).catch(() => {});
}
function live() {
  const es = new EventSource("/v1/events/stream");
  es.onmessage = null;
  for (const t of ["policy:awaiting-ack", "policy:blocked", "policy:done", "policy:approved", "policy:rejected", "policy:attached"])
    es.addEventListener(t, () => { if (!$("inbox").hidden) inbox().catch(() => {}); });
}
document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const j = await api("POST", "/ui/login", { token: $("token").value });
      csrf = j.csrf; sessionStorage.setItem("csrf", csrf); $("token").value = ""; live(); route();
    } catch (e) { $("login-error").textContent = e.message; }
  });
  $("more").addEventListener("click", () => more().catch(() => {}));
  $("approve").addEventListener("click", () => act({ approve: true, tree: current.tree }, "/ack"));
  $("reject").addEventListener("click", () => {
    const comment = $("reject-comment").value.trim();
    act(comment ? { approve: false, comment } : { approve: false }, "/ack").then(() => { $("reject-comment").value = ""; });
  });
  $("cancel").addEventListener("click", () => act(null, "/cancel"));
  window.addEventListener("hashchange", route);
  // A one-time login link (`gatehost ui`) lands here with the CSRF token in
  // the fragment: kept, and dropped from the address bar and history.
  const m = location.hash.match(/^#login=([0-9a-f]+)$/);
  if (m) { csrf = m[1]; sessionStorage.setItem("csrf", csrf); history.replaceState(null, "", "/ui/"); }
  if (csrf) { live(); route(); } else show("login");
});
