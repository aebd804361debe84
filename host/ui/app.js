// The operator's page: everything agent-written goes through textContent.
"use strict";
// The login's CSRF token, in localStorage: only this exact origin reads
// it, and every tab of the page shares it (a policy's link opened in a new
// tab needs no second login while the cookie lives).
const csrf = () => localStorage.getItem("csrf");
const $ = (id) => document.getElementById(id);
const el = (tag, text, cls) => { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; };
async function api(method, path, body) {
  const h = { "Content-Type": "application/json" };
  const t = csrf(); if (t) h["X-CSRF-Token"] = t;
  const r = await fetch(path, { method, headers: h, credentials: "same-origin", body: body ? JSON.stringify(body) : undefined });
  const j = await r.json().catch(() => ({}));
  // Logged out (the token is then of no use: dropped), or the token is not
  // the cookie's login's: the login form (the address, a policy's link,
  // is kept and shown once logged in).
  if (r.status === 401) localStorage.removeItem("csrf");
  if (r.status === 401 || (r.status === 403 && j.error && j.error.code === "csrf")) { show("login"); throw new Error("log in"); }
  if (!r.ok) throw new Error((j.error && j.error.message) || r.statusText);
  return j;
}
function show(id) { for (const s of ["login", "inbox", "policy"]) $(s).hidden = s !== id; }
let current = null;
// Comments on diff lines not sent yet: {row, at: {path, line, side}, box}.
let drafts = [];
let renderedTree = null;
// The diff shown: its pages' lines, unified or split.
let pages = [];
let view = sessionStorage.getItem("view") === "split" ? "split" : "unified";
function rendered(items) { return (view === "split" ? renderSplit : renderUnified)(items, onLine); }
// The diff's rows are drawn lazily: the first FIRST_ROWS at once (the
// first screen), the rest SLICE_ROWS at a time between tasks, so a diff of
// 10,000 lines never blocks the page for long; a slice never splits a run
// of removed and added lines in the split view (it pairs them). A new diff
// (another policy, the other view) replaces what is still to draw.
const FIRST_ROWS = 150, SLICE_ROWS = 300;
let toDraw = [];
function paint(items, append) {
  if (!append) { toDraw = []; $("p-diff").replaceChildren(); }
  const idle = !toDraw.length;
  toDraw = toDraw.concat(items);
  if (idle) drawRows(FIRST_ROWS, !append);
}
const changeRow = (it) => it.cls === "add" || it.cls === "del";
// Where a slice of `n` rows of toDraw ends: anywhere in the unified view;
// in the split view never inside a run of removed and added lines (they
// are paired row by row), unless the run is all of one kind.
function sliceEnd(n) {
  const end = Math.min(toDraw.length, n);
  if (view !== "split" || end === toDraw.length || !changeRow(toDraw[end]) || !changeRow(toDraw[end - 1])) return end;
  let from = end, to = end;
  while (from > 0 && changeRow(toDraw[from - 1])) from--;
  while (to < toDraw.length && changeRow(toDraw[to])) to++;
  const kinds = new Set(toDraw.slice(from, to).map((it) => it.cls));
  return kinds.size > 1 ? to : end;
}
function drawRows(n, first) {
  const end = sliceEnd(n);
  $("p-diff").append(...rendered(toDraw.slice(0, end)));
  toDraw = toDraw.slice(end);
  // For the benchmark (host/benches/page.rs): when the first screen is
  // on screen, and when the whole diff is.
  if (first) requestAnimationFrame(() => performance.mark("gatehost:diff-first-screen"));
  if (toDraw.length) setTimeout(() => drawRows(SLICE_ROWS, false), 0);
  else requestAnimationFrame(() => performance.mark("gatehost:diff-drawn"));
}
function toggleView() {
  if (drafts.some((d) => d.box.value.trim())) { $("p-error").textContent = "send your comments (Request changes) before switching the view"; return; }
  view = view === "split" ? "unified" : "split"; sessionStorage.setItem("view", view);
  drafts = [];
  paint(pages.flat());
  $("split-toggle").textContent = view === "split" ? "Unified view" : "Split view";
}
function openComment(row, at) {
  const open = drafts.find((d) => d.row === row);
  if (open) { open.box.focus(); return; }
  // In the split view the box goes under the row of both sides.
  const anchor = row.parentElement.classList.contains("split-row") ? row.parentElement : row;
  const box = el("textarea", undefined, "line-comment");
  box.setAttribute("aria-label", "Comment on " + at.path + ":" + at.line);
  box.placeholder = "What to change at " + at.path + ":" + at.line;
  anchor.after(box); drafts.push({ row, at, box });
  // A line of the new side can be suggested as it should read: a
  // ```suggestion block holding the line, which the agent receives as
  // written.
  if (at.side === "new") {
    const s = el("button", "Suggest a change", "small suggest"); s.type = "button";
    s.addEventListener("click", () => {
      const text = row.textContent.slice(1);
      box.value = (box.value ? box.value + "\n" : "") + "```suggestion\n" + text + "\n```";
      box.focus();
    });
    box.after(s);
  }
  box.focus();
}
function requestChanges() {
  const comments = drafts.filter((d) => d.box.value.trim())
    .map((d) => ({ path: d.at.path, line: d.at.line, side: d.at.side, body: d.box.value.trim() }));
  if (!comments.length) { $("p-error").textContent = "click a line of the diff and write what to change first"; return; }
  const { id, tree } = current;
  act({ tree, comments }, "/request-changes").then(() => {
    if ($("p-error").textContent) return;
    // The tree reviewed: the next round can show what changed since.
    drafts = []; localStorage.setItem(reviewedKey(id), tree);
  });
}
// "Changes since your last review": the tree of the last round's request
// for changes (kept by this browser), and whether the diff shown is from it.
const reviewedKey = (id) => "gatehost:reviewed:" + id;
let sinceMode = false;
function toggleSince() {
  if (drafts.some((d) => d.box.value.trim())) { $("p-error").textContent = "send your comments (Request changes) before switching the diff"; return; }
  sinceMode = !sinceMode; renderedTree = null; drafts = [];
  policy(current.id).catch(() => {});
}
// A click on a line: its comment, except in the changes since the last
// review (their old side is the last snapshot, not the branch).
function onLine(row, at) {
  if (sinceMode) { $("p-diff-note").textContent = "The changes since your last review are read-only: \"The whole change\" to comment on a line."; return; }
  openComment(row, at);
}
// Each showing of a policy page is numbered: an answer that comes back
// after a later showing began (the operator went to another policy, or a
// live event asked again) writes nothing, so the page never puts one
// policy's status, diff or tree under another's.
let showing = 0;
async function policy(id) {
  const mine = ++showing;
  const stale = () => mine !== showing;
  show("policy"); $("p-error").textContent = "";
  // Another policy's page: nothing of the last one stays on screen (a line
  // of its diff to comment on, its actions) while this one loads.
  if (!current || current.id !== id) blank(id);
  // The diff is asked for beside the policy (it is the long one).
  const diff = diffPage(id, 0);
  diff.catch(() => {});
  const p = await api("GET", "/v1/policies/" + encodeURIComponent(id));
  if (stale()) return;
  // The tree an action names is the one of the diff on screen: kept until
  // this showing's diff replaces it.
  p.tree = current && current.id === id ? current.tree : undefined;
  current = p;
  // What is being approved: the commit message's first line, where it
  // comes from, its size.
  $("p-title").textContent = title(p).split("\n")[0] || p.id; $("p-id").textContent = p.id;
  $("p-status").textContent = p.status; $("p-size").textContent = size(p);
  where(p, stale).catch(() => {});
  $("p-host").textContent = p.host || ""; $("p-host-line").hidden = !p.host;
  $("p-plan").textContent = JSON.stringify(p.plan, null, 2);
  $("p-verdicts").textContent = JSON.stringify(p.verdict ?? null, null, 2);
  since(p.plan && p.plan.changedAfterSnapshot);
  timeline(p, stale).catch((e) => { if (!stale()) $("p-timeline").replaceChildren(el("li", e.message, "error")); });
  if (p.status !== "awaiting-ack") $("actions").hidden = true;
  try {
    const d = await diff;
    if (stale()) return;
    current.tree = d.tree;
    // Comments being written are kept while the diff is the same policy's
    // same tree.
    const key = id + ":" + d.tree;
    if (key !== renderedTree || !drafts.length) {
      drafts = []; renderedTree = key;
      pages = [fileItems(d.files)];
      $("p-files").replaceChildren(...d.files.map(fileLink));
      paint(pages[0]);
      paged(d);
      const last = localStorage.getItem(reviewedKey(id));
      $("since-toggle").hidden = !last || (last === d.tree && !sinceMode);
      $("since-toggle").textContent = sinceMode ? "The whole change" : "Changes since your last review";
      if (sinceMode) $("p-diff-note").textContent = "What changed since your last review (its tree " + (d.since || "").slice(0, 12) + "): read-only.";
      if (!d.files.length) $("p-diff-note").textContent = "The diff is empty: the snapshot's paths are as the branch holds them now, so there is nothing to commit.";
    }
  } catch (e) {
    if (stale()) return;
    toDraw = []; $("p-diff").textContent = e.message; $("more-files").hidden = true; $("p-diff-note").textContent = "";
  }
  // Offered once the diff they are about is shown (or could not be).
  $("actions").hidden = p.status !== "awaiting-ack";
}
// Where a policy comes from: its first session, that session's agent and
// workspace (the session's record) and the branch of its snapshot
// (agent-written: text only).
async function where(p, stale) {
  const sid = (p.sessions || [])[0];
  if (!sid) return;
  const x = await api("GET", "/v1/sessions/" + encodeURIComponent(sid));
  if (stale()) return;
  const agent = agentOf(p);
  const ref = p.plan && p.plan.snapshot && p.plan.snapshot.reference;
  $("p-where").textContent = "session " + sid + (agent && agent !== sid ? " (" + agent + ")" : "") + " in " + (x.workspace || x.cwd || "?") +
    (ref ? " on " + ref.replace(/^refs\/heads\//, "") : "");
}
// A file of the list above the diff: a button that opens the file and
// brings its header into view (drawing the rows before it if need be).
function fileLink(f) {
  const li = el("li");
  const b = el("button", f.path, "link"); b.type = "button";
  b.addEventListener("click", () => reveal(f.path));
  li.append(b, " ", el("span", f.binary ? "binary" : "+" + f.added + " \u2212" + f.removed, "size"));
  if (f.generated) li.append(" ", el("span", "generated: " + f.generated, "tag"));
  return li;
}
function reveal(path) {
  const find = () => [...document.querySelectorAll("#p-diff [data-file]")].find((e) => e.dataset.file === path);
  while (!find() && toDraw.length) drawRows(SLICE_ROWS, false);
  const h = find();
  if (!h) return;
  setCollapsed(path, false);
  h.scrollIntoView({ block: "start" }); h.focus();
}
// The page of policy `id` before its first answer: its id, and nothing of
// the policy shown before it.
function blank(id) {
  current = null; drafts = []; renderedTree = null; pages = []; nextFrom = null; toDraw = [];
  forgetFiles(); viewedScope = id; sinceMode = false;
  $("p-title").textContent = ""; $("p-id").textContent = id; $("p-status").textContent = "";
  $("p-where").textContent = ""; $("p-size").textContent = ""; $("p-files").replaceChildren();
  $("p-host").textContent = ""; $("p-host-line").hidden = true;
  $("actions").hidden = true;
  for (const e of ["p-plan", "p-verdicts", "p-diff-note", "p-timeline-note"]) $(e).textContent = "";
  for (const e of ["p-diff", "p-runs", "p-timeline", "p-since-list", "p-rounds"]) $(e).replaceChildren();
  $("p-rounds-panel").hidden = true; $("since-toggle").hidden = true;
  $("p-since").hidden = true; $("more-files").hidden = true;
}
// What the workspace holds now that the snapshot (the commit) does not:
// paths, as the daemon read them for this page (or why it could not).
function since(changed) {
  $("p-since").hidden = changed == null || (Array.isArray(changed) && !changed.length);
  if (changed == null) return;
  $("p-since-list").replaceChildren(...(Array.isArray(changed)
    ? changed.map((path) => el("li", path))
    : [el("li", "cannot be read: " + (changed.error || JSON.stringify(changed)), "error")]));
}
// The policy's events, oldest first (at most HISTORY): the timeline, and
// every gate run (`policy:passed` / `policy:failed`) with its gates'
// outcomes, reasons and findings; the newest run's output tails come from
// the stored verdict. Everything is agent-influenced text: textContent.
const HISTORY = 200;
async function timeline(p, stale) {
  const page = await api("GET", "/v1/events?policy=" + encodeURIComponent(p.id) + "&limit=" + HISTORY);
  if (stale()) return;
  const events = page.events || [];
  $("p-timeline").replaceChildren(...events.map((e) => {
    const li = el("li"); const x = e.payload || {};
    li.append(el("span", new Date(e.at).toLocaleTimeString(), "when"), " ", el("code", e.type));
    const said = x.reason || x.message || x.outcome || "";
    if (said) li.append(" ", el("span", String(said).slice(0, 300), "reason"));
    return li;
  }));
  $("p-timeline-note").textContent = events.length >= HISTORY ? "the first " + HISTORY + " events; `gatehost events poll --policy " + p.id + "` has the rest" : "";
  rounds(events);
  const runs = events.filter((e) => e.type === "policy:passed" || e.type === "policy:failed");
  const last = (p.verdict && p.verdict.gates) || [];
  $("p-runs").replaceChildren(...runs.map((e, n) => gateRun(e, n + 1, n === runs.length - 1 ? last : [])));
  if (!runs.length) $("p-runs").replaceChildren(el("li", "no gate has run yet", "hint"));
}
// Each earlier round of "Request changes" (its `policy:nudge` with
// comments): when, and each comment at its file and line (a button that
// shows the line when this diff has it). The operator's words.
function rounds(events) {
  const asked = events.filter((e) => e.type === "policy:nudge" && e.payload && Array.isArray(e.payload.comments));
  $("p-rounds-panel").hidden = !asked.length;
  $("p-rounds").replaceChildren(...asked.map((e, n) => {
    const li = el("li"); li.dataset.round = String(n + 1);
    li.append(el("strong", "round " + (n + 1)), " ", el("span", new Date(e.at).toLocaleTimeString(), "when"));
    for (const c of e.payload.comments) {
      const d = el("div", undefined, "finding");
      const b = el("button", c.path + ":" + c.line + (c.side === "old" ? " (old side)" : ""));
      b.dataset.path = c.path; b.dataset.line = String(c.line);
      if (c.side !== "old") b.addEventListener("click", () => showLine(c.path, c.line, b));
      d.append(b, " ", el("span", c.body));
      li.append(d);
    }
    return li;
  }));
}
function gateRun(e, n, tails) {
  const x = e.payload || {}; const li = el("li");
  li.dataset.run = String(n);
  li.append(el("strong", "run " + n + ": " + (x.outcome || e.type), x.outcome === "pass" ? "pass" : "fail"),
    " ", el("span", new Date(e.at).toLocaleTimeString(), "when"));
  if (x.reason) li.append(el("div", x.reason, "reason"));
  (x.gates || []).forEach((g, i) => {
    const gd = el("div", undefined, "gate");
    gd.append(el("code", g.gate), " ", el("span", g.outcome, g.outcome === "pass" ? "pass" : "fail"));
    if (g.reason) gd.append(" ", el("span", g.reason, "reason"));
    for (const f of g.findings || []) gd.append(finding(f));
    const t = tails[i];
    for (const stream of ["stdout", "stderr"]) {
      if (t && t[stream] && t[stream].text) {
        const pre = el("pre", t[stream].text, "tail"); pre.dataset.stream = stream; gd.append(pre);
      }
    }
    li.append(gd);
  });
  return li;
}
// A finding; one at a path and line is a button that shows that line of
// the diff (when the diff has it).
function finding(f) {
  const d = el("span", undefined, "finding");
  d.append(el("span", (f.severity || "") + ": ", "reason"), el("span", f.message));
  if (f.path && f.line) {
    const b = el("button", f.path + ":" + f.line);
    b.dataset.path = f.path; b.dataset.line = String(f.line);
    b.addEventListener("click", () => showLine(f.path, f.line, b));
    d.prepend(b, " ");
  } else if (f.path) d.prepend(el("code", f.path), " ");
  return d;
}
function showLine(path, line, from) {
  for (const t of document.querySelectorAll("#p-diff .target")) t.classList.remove("target");
  const find = () => [...document.querySelectorAll("#p-diff [data-path][data-line]")]
    .find((r) => r.dataset.path === path && r.dataset.line === String(line) && r.dataset.side === "new");
  // Drawn first if it is still to draw, and its file opened.
  while (!find() && toDraw.length) drawRows(SLICE_ROWS, false);
  if (find()) setCollapsed(path, false);
  const row = find();
  if (!row) { from.title = "not in the diff shown"; from.classList.add("missing"); return; }
  row.classList.add("target"); row.scrollIntoView({ block: "center" }); row.focus();
}
// A large diff comes DIFF_FILES files at a time: "More files" appends the next.
const DIFF_FILES = 100;
let nextFrom = null;
function diffPage(id, from) {
  const last = localStorage.getItem(reviewedKey(id));
  const since = sinceMode && last ? "&since=" + encodeURIComponent(last) : "";
  return api("GET", "/v1/policies/" + encodeURIComponent(id) + "/diff?limit=" + DIFF_FILES + "&from=" + from + since);
}
function paged(d) {
  nextFrom = d.nextFrom ?? null;
  $("more-files").hidden = nextFrom == null;
  $("p-diff-note").textContent = d.note || "";
}
async function moreFiles() {
  if (nextFrom == null || !current) return;
  const id = current.id;
  const d = await diffPage(id, nextFrom);
  // The operator went to another policy meanwhile: not its files.
  if (!current || current.id !== id) return;
  if (d.tree !== current.tree) { await policy(current.id); return; }
  const items = fileItems(d.files);
  $("p-files").append(...d.files.map(fileLink));
  pages.push(items);
  paint(items, true);
  paged(d);
}
async function approve() {
  $("p-error").textContent = "";
  const body = { approve: true, tree: current.tree };
  try {
    if (!keys) await passkeys();
    if (keys.ackRequires === "passkey") body.passkey = await assertion({ for: "approve", policy: current.id, tree: current.tree });
  } catch (e) { $("p-error").textContent = e.name ? e.name + ": " + e.message : e.message; return; }
  await act(body, "/ack");
}
// `a` from the keyboard: approve once the operator confirms.
function approveConfirmed() {
  if (current && confirm("Approve policy " + current.id + "? Its change is committed.")) approve();
}
// An action's answer: the policy shown again and the focus on its status
// (or on the error).
async function act(body, path) {
  try {
    await api("POST", "/v1/policies/" + encodeURIComponent(current.id) + path, body); await policy(current.id);
    $("p-status").focus();
  } catch (e) { $("p-error").textContent = e.message; $("p-error").focus(); }
}
function route() {
  const m = location.hash.match(/^#policy\/(.+)$/);
  (m ? policy(decodeURIComponent(m[1])) : inbox()).catch(() => {});
}
// Every event that changes what the inbox or a policy page shows.
const LIVE = ["attached", "watching", "queued", "gating", "passed", "failed", "nudge", "commit-ready", "approved",
  "rejected", "stale", "committed", "commit-failed", "done", "blocked", "cancelled", "expired"].map((t) => "policy:" + t)
  .concat(["registered", "turn-start", "turn-end", "awaiting-input", "exited"].map((t) => "session:" + t))
  .concat(["passkey:registered", "passkey:removed"]);
// Live events, coalesced: the policies and sessions they name are
// gathered for FLUSH_MS (at most FLUSH_MAX_MS after the first), then each
// is read once and its row moved or redrawn in place; past FLUSH_IDS of
// them at once, the lists' first pages are read again instead, once. No
// event reloads a list by itself.
const FLUSH_MS = 250, FLUSH_MAX_MS = 1000, FLUSH_IDS = 20;
const changed = { policies: new Set(), sessions: new Set(), passkeys: false };
let flushAt = null, firstChange = 0;
function onLive(type, data) {
  let x = {};
  try { x = JSON.parse(data); } catch (_) { /* not an event of ours */ }
  if (x.policyId) changed.policies.add(x.policyId);
  if (x.sessionId && type.startsWith("session:")) changed.sessions.add(x.sessionId);
  if (type.startsWith("passkey:")) changed.passkeys = true;
  const now = Date.now();
  if (flushAt === null) firstChange = now; else clearTimeout(flushAt);
  flushAt = setTimeout(() => { flushAt = null; flush().catch(() => {}); }, Math.max(0, Math.min(FLUSH_MS, firstChange + FLUSH_MAX_MS - now)));
}
async function flush() {
  const policies = [...changed.policies], sessions = [...changed.sessions], keys = changed.passkeys;
  changed.policies.clear(); changed.sessions.clear(); changed.passkeys = false;
  if (!$("policy").hidden) {
    if (current && policies.includes(current.id)) await policy(current.id);
    return;
  }
  if ($("inbox").hidden) return;
  const work = [];
  // (With a filter, the lists again: a row moved in place might not be one
  // the filter keeps.)
  if (policies.length > FLUSH_IDS || filterQuery()) work.push(loadList("waiting"), loadList("blocked"), loadList("others"));
  else for (const id of policies) work.push(refreshPolicy(id).catch(() => {}));
  if (policies.length) work.push(counts());
  if (sessions.length > FLUSH_IDS) work.push(sessionsPage());
  else for (const id of sessions) work.push(refreshSession(id).catch(() => {}));
  if (keys) work.push(passkeys());
  await Promise.all(work);
}
// One server-sent event (its lines, without the blank line ending it).
let lastEventId = null;
function dispatch(block) {
  let type = "message"; const data = [];
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const c = line.indexOf(":");
    const field = c < 0 ? line : line.slice(0, c);
    let v = c < 0 ? "" : line.slice(c + 1);
    if (v.startsWith(" ")) v = v.slice(1);
    if (field === "event") type = v; else if (field === "data") data.push(v); else if (field === "id") lastEventId = v;
  }
  if (LIVE.includes(type)) onLive(type, data.join("\n"));
}
// The bus, read with fetch rather than an EventSource: the cookie alone
// authorises nothing, and an EventSource cannot send the page's token.
// A stream that ends (the daemon ends each after a while) or fails is
// opened again after the last event seen (Last-Event-ID).
let living = false;
async function live() {
  if (living) return;
  living = true;
  while (csrf()) {
    try {
      const h = { "Accept": "text/event-stream", "X-CSRF-Token": csrf() };
      if (lastEventId) h["Last-Event-ID"] = lastEventId;
      // Events in bursts of 100 ms (the page applies them in batches).
      const r = await fetch("/v1/events/stream?coalesce=100", { headers: h, credentials: "same-origin" });
      if (r.status === 401 || r.status === 403) { show("login"); break; }
      if (r.ok && r.body) {
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) { dispatch(buf.slice(0, i)); buf = buf.slice(i + 2); }
        }
      }
    } catch (_) { /* opened again below */ }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  living = false;
}
document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const j = await api("POST", "/ui/login", { token: $("token").value });
      localStorage.setItem("csrf", j.csrf); $("token").value = ""; live(); route();
    } catch (e) { $("login-error").textContent = e.message; }
  });
  for (const name of Object.keys(LISTS)) $(LISTS[name].more).addEventListener("click", () => loadList(name, true).catch((e) => { $("inbox-error").textContent = e.message; }));
  $("more-sessions").addEventListener("click", () => moreSessions().catch(() => {}));
  $("approve").addEventListener("click", approve);
  $("passkey-form").addEventListener("submit", registerPasskey);
  $("reject").addEventListener("click", () => {
    const comment = $("reject-comment").value.trim();
    act(comment ? { approve: false, comment } : { approve: false }, "/ack").then(() => { $("reject-comment").value = ""; });
  });
  $("cancel").addEventListener("click", () => {
    if (current && confirm("Cancel policy " + current.id + "? Nothing of it will be committed.")) act(null, "/cancel");
  });
  $("request-changes").addEventListener("click", requestChanges);
  $("split-toggle").addEventListener("click", toggleView);
  $("filter").addEventListener("input", onFilter);
  $("since-toggle").addEventListener("click", toggleSince);
  $("split-toggle").textContent = view === "split" ? "Unified view" : "Split view";
  $("more-files").addEventListener("click", () => moreFiles().catch((e) => { $("p-error").textContent = e.message; }));
  window.addEventListener("hashchange", route);
  // Another tab logged in: this one, on its login form, goes on.
  window.addEventListener("storage", (e) => {
    if (e.key === "csrf" && e.newValue && !$("login").hidden) { live(); route(); }
  });
  // A one-time login link (`gatehost ui`) lands here with the CSRF token in
  // the fragment (and the policy it opens, `gatehost ui --policy`): the
  // token kept, and dropped from the address bar and history.
  const m = location.hash.match(/^#login=([0-9a-f]+)(?:&policy=([A-Za-z0-9%_.~:-]+))?$/);
  if (m) { localStorage.setItem("csrf", m[1]); history.replaceState(null, "", "/ui/" + (m[2] ? "#policy/" + m[2] : "")); }
  if (csrf()) { live(); route(); } else show("login");
});
