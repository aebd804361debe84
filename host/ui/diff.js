// The diff's rendering: a patch parsed into lines (each added, removed or
// context line knowing its file and its line number on each side), shown
// unified or split. Everything agent-written goes through textContent.
"use strict";
// A patch line's class: a file's headers, a hunk's, an added or removed line.
function lineClass(l) {
  if (l.startsWith("+++ ") || l.startsWith("--- ") || l.startsWith("diff --git ") || l.startsWith("index ")) return "file";
  if (l.startsWith("@@")) return "hunk";
  return l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : "";
}
// Each line of `patch`: {text, cls, file?, old?, new?}, `old`/`new` the
// {path, line, side} it stands at on that side (a removed line has only
// `old`, an added one only `new`, a context line both).
function parsePatch(patch) {
  let path = null, oldN = 0, newN = 0;
  return patch.split("\n").map((text) => {
    const cls = lineClass(text);
    const item = { text, cls };
    if (cls === "file") {
      const g = text.match(/^diff --git a\/.* b\/(.*)$/);
      if (g) item.file = g[1];
      const m = g || text.match(/^\+\+\+ b\/(.*)$/);
      if (m) path = m[1];
    } else if (cls === "hunk") {
      const m = text.match(/^@@ -(\d+)(?:,\d+)? \+(\d+)/);
      if (m) { oldN = Number(m[1]); newN = Number(m[2]); }
    } else if (path && (cls === "add" || cls === "del" || text.startsWith(" "))) {
      if (cls !== "add") item.old = { path, line: oldN++, side: "old" };
      if (cls !== "del") item.new = { path, line: newN++, side: "new" };
    }
    return item;
  });
}
// One line's element; commentable (a click calls `onComment(el, at)`) when
// it stands at a line.
function lineEl(text, cls, at, onComment) {
  const e = el("div", text, cls);
  if (at) {
    e.classList.add("commentable"); e.tabIndex = 0; e.title = "Comment on " + at.path + ":" + at.line;
    e.dataset.path = at.path; e.dataset.line = String(at.line); e.dataset.side = at.side;
    e.addEventListener("click", () => onComment(e, at));
  }
  return e;
}
// One element a line, as `git diff` prints it.
function renderUnified(items, onComment) {
  return items.map((it) => {
    const e = lineEl(it.text, it.cls, it.new || it.old, onComment);
    if (it.file) e.dataset.file = it.file;
    return e;
  });
}
// The old side on the left, the new on the right: a run of removed lines
// beside the run of added lines after it, context on both sides.
function renderSplit(items, onComment) {
  const out = [];
  let dels = [], adds = [];
  const cell = (it, side) => it ? lineEl(it.text, (it.cls || "ctx") + " cell", it[side], onComment) : el("div", "", "cell empty");
  const pair = (l, r) => { const row = el("div", undefined, "split-row"); row.append(cell(l, "old"), cell(r, "new")); return row; };
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) out.push(pair(dels[i], adds[i]));
    dels = []; adds = [];
  };
  for (const it of items) {
    if (it.cls === "del") { dels.push(it); continue; }
    if (it.cls === "add") { adds.push(it); continue; }
    flush();
    if (it.old && it.new) { out.push(pair(it, it)); continue; }
    const e = el("div", it.text, (it.cls ? it.cls + " " : "") + "split-full");
    if (it.file) e.dataset.file = it.file;
    out.push(e);
  }
  flush();
  return out;
}
