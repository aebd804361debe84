// The inbox: the policies waiting for a person, blocked ones, the rest,
// the sessions and the hosts, each a page at a time with its count, and
// each row redrawn in place when an event names it (app.js gathers the
// events). Everything agent-written goes through textContent. It uses
// app.js's helpers ($, el, api, show) once the page is loaded.
"use strict";
// The inbox's policy lists: the statuses each holds, newest first, a page
// of PAGE at a time ("More" appends the next; its cursor kept).
const PAGE = 50;
const LISTS = {
  waiting: { statuses: ["awaiting-ack"], count: "waiting-count", more: "more-waiting" },
  blocked: { statuses: ["blocked"], count: "blocked-count", more: "more-blocked" },
  others: { statuses: ["watching", "queued", "gating", "nudging", "committing", "reviewing", "done", "cancelled"], count: "others-count", more: "more" },
};
const cursors = {};
// The host that owns a record (a daemon of hosts sharing PostgreSQL says;
// one of SQLite has none: nothing shown).
function hostTag(x) {
  const t = el("span", x.host ? "on " + x.host : "", "host"); t.dataset.host = x.host || "";
  return x.host ? [" ", t] : [];
}
// What a policy is, for a person: its commit message (or label), the
// agent of its first session, its size and its age. All agent-written:
// text only.
function title(p) { return (p.plan && p.plan.message) || (p.spec && p.spec.label) || ""; }
function agentOf(p) { const s = (p.sessions || [])[0] || ""; const c = s.indexOf(":"); return c > 0 ? s.slice(0, c) : s; }
function size(p) {
  const d = p.plan && p.plan.diffSummary;
  return d && d.files ? d.files.length + (d.files.length === 1 ? " file" : " files") + " +" + d.added + " \u2212" + d.removed : "";
}
function item(p) {
  const li = el("li"); const a = el("a", title(p).split("\n")[0].slice(0, 120) || p.id); a.href = "#policy/" + encodeURIComponent(p.id);
  li.dataset.policy = p.id; li.dataset.status = p.status;
  li.append(a, " ", el("strong", p.status), " ", el("span", agentOf(p), "agent"), " ", el("span", size(p), "size"),
    " ", el("span", ago(p.updatedAt), "when"), " ", el("code", p.id, "id"), ...hostTag(p));
  if (p.status === "blocked" && p.reason) li.append(el("div", p.reason, "reason"));
  if (p.status === "blocked") {
    const b = el("button", "Dismiss"); b.className = "small";
    b.addEventListener("click", () => dismiss(p.id));
    li.append(b);
  }
  return li;
}
// Dismiss a blocked policy: cancel it, once the operator confirms.
async function dismiss(id) {
  if (!confirm("Dismiss policy " + id + "? It is cancelled: nothing of it will be committed.")) return;
  try { await api("POST", "/v1/policies/" + encodeURIComponent(id) + "/cancel"); await refreshPolicy(id); await counts(); }
  catch (e) { $("inbox-error").textContent = e.message; }
}
function listOf(status) { return Object.keys(LISTS).find((k) => LISTS[k].statuses.includes(status)) || "others"; }
// The filter box: words to find (in a policy's id, label, commit message
// or reason), and `agent:NAME`, `repo:TEXT`, `host:ID`; as the route's
// query (empty: no filter).
function filterQuery() {
  const words = [], params = [];
  for (const t of ($("filter").value || "").trim().split(/\s+/)) {
    const m = t.match(/^(agent|repo|host):(.+)$/);
    if (m) params.push(m[1] + "=" + encodeURIComponent(m[2])); else if (t) words.push(t);
  }
  if (words.length) params.push("q=" + encodeURIComponent(words.join(" ")));
  return params.length ? "&" + params.join("&") : "";
}
let filterTimer = null;
function onFilter() {
  clearTimeout(filterTimer);
  filterTimer = setTimeout(() => {
    $("filter-note").textContent = filterQuery() ? "only the policies the filter keeps are listed (the counts are of all)" : "";
    Promise.all(Object.keys(LISTS).map((n) => loadList(n))).catch((e) => { $("inbox-error").textContent = e.message; });
  }, 250);
}
async function loadList(name, append) {
  const l = LISTS[name];
  const cursor = append ? "&cursor=" + cursors[name] : "";
  const r = await api("GET", "/v1/policies?order=newest&limit=" + PAGE + "&status=" + l.statuses.join(",") + cursor + filterQuery());
  const items = r.policies.map(item);
  if (append) $(name).append(...items); else { $(name).replaceChildren(...items); $(name).dataset.query = filterQuery(); }
  cursors[name] = r.nextCursor; $(l.more).hidden = r.nextCursor == null;
}
// How many policies of each list, and those waiting in the tab's title.
async function counts() {
  const r = await api("GET", "/v1/policies?limit=1&counts=true");
  const c = r.counts || {};
  const n = (name) => LISTS[name].statuses.reduce((t, s) => t + (c[s] || 0), 0);
  for (const name of Object.keys(LISTS)) $(LISTS[name].count).textContent = String(n(name));
  const waiting = n("waiting") + n("blocked");
  document.title = (waiting ? "(" + waiting + ") " : "") + "gatehost";
}
async function inbox() {
  show("inbox");
  await Promise.all([loadList("waiting"), loadList("blocked"), loadList("others"), counts(), sessionsPage()]);
  // For the benchmark (host/benches/page.rs): the lists on screen.
  requestAnimationFrame(() => performance.mark("gatehost:inbox-shown"));
  await hosts();
  await passkeys();
}
async function sessionsPage() {
  const ss = await api("GET", "/v1/sessions?limit=50");
  $("sessions").replaceChildren(...ss.sessions.map(sessionItem));
  sessionCursor = ss.nextCursor; $("more-sessions").hidden = sessionCursor == null;
}
// One policy again, as an event named it: its row moved to the list of
// its status now (at the top: the newest change), or its page redrawn.
async function refreshPolicy(id) {
  const p = await api("GET", "/v1/policies/" + encodeURIComponent(id));
  for (const old of document.querySelectorAll("#inbox li[data-policy]")) if (old.dataset.policy === id) old.remove();
  $(listOf(p.status)).prepend(item(p));
}
async function refreshSession(id) {
  const x = await api("GET", "/v1/sessions/" + encodeURIComponent(id));
  const li = sessionItem(x);
  const old = [...document.querySelectorAll("#sessions li[data-session]")].find((e) => e.dataset.session === id);
  if (old) old.remove();
  $("sessions").prepend(li);
}
// The hosts sharing the daemon's store: each one's state (live, stopped,
// or what the store says: stale, taken) and whether its lease runs. A
// daemon of one host (SQLite) lists none: the panel stays hidden.
async function hosts() {
  const h = await api("GET", "/v1/hosts");
  const list = h.hosts || [];
  $("hosts-panel").hidden = !list.length;
  $("hosts").replaceChildren(...list.map((x) => {
    const li = el("li"); li.dataset.host = x.id;
    li.append(el("strong", x.id), " ", el("span", x.state, x.live ? "up" : "down"), " ",
      el("span", x.live ? "lease runs" : "lease ended " + ago(x.leaseUntil), "reason"));
    if (x.id === h.this) li.append(" ", el("span", "(this page's host)", "hint"));
    li.title = x.machine + " pid " + x.pid + ", gatehost " + x.version + ", heard from " + ago(x.heartbeatAt);
    return li;
  }));
}
// A session: its id and label, state, when it was last heard from, and its
// last message (the agent's words: text only, cut).
let sessionCursor = null;
function ago(ms) {
  if (!ms) return "never";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return s < 90 ? s + " s ago" : s < 5400 ? Math.round(s / 60) + " min ago" : Math.round(s / 3600) + " h ago";
}
function sessionItem(x) {
  const li = el("li"); li.dataset.session = x.id;
  li.append(el("code", x.id), " ", el("strong", x.state), " ", el("span", x.label || ""), ...hostTag(x),
    " ", el("span", "heard from " + ago(Math.max(x.heartbeatAt || 0, x.updatedAt || 0)), "reason"));
  if (x.lastMessage) {
    const m = x.lastMessage.length > 200 ? x.lastMessage.slice(0, 200) + "…" : x.lastMessage;
    li.append(el("div", m, "reason"));
  }
  return li;
}
async function moreSessions() {
  const ss = await api("GET", "/v1/sessions?limit=50&cursor=" + sessionCursor);
  $("sessions").append(...ss.sessions.map(sessionItem));
  sessionCursor = ss.nextCursor; $("more-sessions").hidden = sessionCursor == null;
}
