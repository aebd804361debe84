// The diff's rendering, from the daemon's structure (`GET
// /v1/policies/{id}/diff`'s `files`: path, old path, kind, modes, counts
// and hunks whose lines carry their kind and their number on each side),
// never from the patch text read back: a name git quotes is shown as it
// is, and an added line that reads like a header is an added line.
// Shown unified or split. Everything agent-written goes through
// textContent.
"use strict";
// A file's header: its name and what happened to it.
function fileLabel(f) {
  const what = [f.kind === "renamed" && f.from ? "renamed from " + f.from : f.kind];
  if (f.oldMode && f.newMode && f.oldMode !== f.newMode) what.push("mode " + f.oldMode + " \u2192 " + f.newMode);
  if (f.binary) what.push("binary"); else what.push("+" + f.added + " \u2212" + f.removed);
  if (f.emptied) what.push("emptied");
  return f.path + "  (" + what.join(", ") + ")";
}
// A hunk's header as git writes it (a side of one line has no count).
function hunkHeader(h) {
  const range = (start, n) => n === 1 ? String(start) : start + "," + n;
  return "@@ -" + range(h.oldStart, h.oldLines) + " +" + range(h.newStart, h.newLines) + " @@";
}
const MARK = { context: " ", added: "+", removed: "-" };
const CLS = { context: "", added: "add", removed: "del" };
// The items of `files`: {text, cls, file?, old?, new?}, `old`/`new` the
// {path, line, side} a line stands at on that side (a removed line has
// only `old`, an added one only `new`, a context line both).
// Files shown collapsed now (by path); which files' first state was
// decided (by path and blob: a file that changes is decided again); the
// policy whose "Viewed" marks are read (set by app.js).
const collapsed = new Set(), decided = new Set();
let viewedScope = "";
function forgetFiles() { collapsed.clear(); decided.clear(); }
// "Viewed" is kept per policy, per file and per content (its blob): a
// file that changes is not viewed any more.
const viewedKey = (f) => "gatehost:viewed:" + viewedScope + ":" + f.path + ":" + (f.newBlob || f.oldBlob || "");
const isViewed = (f) => localStorage.getItem(viewedKey(f)) === "1";
function markViewed(f, yes) { if (yes) localStorage.setItem(viewedKey(f), "1"); else localStorage.removeItem(viewedKey(f)); }
function fileItems(files) {
  const out = [];
  for (const f of files) {
    // Collapsed at first: a generated file, or one viewed as it is.
    const seen = f.path + ":" + (f.newBlob || f.oldBlob || "");
    if (!decided.has(seen)) { decided.add(seen); if (f.generated || isViewed(f)) collapsed.add(f.path); else collapsed.delete(f.path); }
    out.push({ text: fileLabel(f), cls: "file", file: f.path, f, of: f.path });
    if (f.binary) out.push({ text: "binary content: not shown", cls: "note", of: f.path });
    else if (f.cut) out.push({ text: "over the page's size: its lines are not shown", cls: "note", of: f.path });
    for (const h of f.hunks || []) {
      out.push({ text: hunkHeader(h), cls: "hunk", of: f.path });
      for (const l of h.lines) {
        const it = { text: MARK[l.kind] + l.text, cls: CLS[l.kind], of: f.path };
        if (l.old != null) it.old = { path: f.path, line: l.old, side: "old" };
        if (l.new != null) it.new = { path: f.path, line: l.new, side: "new" };
        out.push(it);
        if (l.noNewline) out.push({ text: "\\ No newline at end of file", cls: "hunk", of: f.path });
      }
    }
  }
  return out;
}
// Syntax colouring where cheap: by the file's extension, a line at a time
// (no state across lines, so a block comment or a multi-line string is not
// seen), keywords, strings, numbers and line comments as spans; the text
// itself is unchanged (textContent is the line, marker included).
const LANGS = {
  rs: ["//", /"(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)'/,
    "as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while"],
  js: ["//", /"(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?|`(?:[^`\\]|\\.)*`?/,
    "async await break case catch class const continue default delete do else export extends false finally for from function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while yield"],
  py: ["#", /"(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?/,
    "and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield"],
  go: ["//", /"(?:[^"\\]|\\.)*"?|`[^`]*`?|'(?:[^'\\]|\\.)'/,
    "break case chan const continue default defer else fallthrough false for func go goto if import interface map nil package range return select struct switch true type var"],
  sh: ["#", /"(?:[^"\\]|\\.)*"?|'[^']*'?/,
    "case do done elif else esac export fi for function if in local return set then while"],
  c: ["//", /"(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)'/,
    "auto bool break case char class const continue default delete do double else enum extern false float for goto if int long namespace new private protected public return short signed sizeof static struct switch template this true typedef union unsigned void volatile while"],
};
const EXTS = { rs: "rs", js: "js", mjs: "js", cjs: "js", ts: "js", tsx: "js", jsx: "js", py: "py", go: "go",
  sh: "sh", bash: "sh", c: "c", h: "c", cc: "c", cpp: "c", hpp: "c", java: "c", kt: "c", cs: "c" };
const lexers = {};
function lexer(lang) {
  if (!lexers[lang]) {
    const [comment, strings, words] = LANGS[lang];
    const c = comment.replace(/[/]/g, "\\/");
    lexers[lang] = { kw: new Set(words.split(" ")),
      re: new RegExp("(" + c + ".*$)|(" + strings.source + ")|(\\b\\d[\\w.]*)|([A-Za-z_][A-Za-z0-9_]*)", "g") };
  }
  return lexers[lang];
}
function highlight(e, text, path) {
  const m = path.match(/\.([A-Za-z0-9]+)$/);
  const lang = m && EXTS[m[1].toLowerCase()];
  if (!lang || text.length > 2000) return;
  const { kw, re } = lexer(lang);
  const code = text.slice(1);
  const parts = [document.createTextNode(text.slice(0, 1))];
  let at = 0;
  re.lastIndex = 0;
  for (let t; (t = re.exec(code)) !== null;) {
    const cls = t[1] ? "com" : t[2] ? "str" : t[3] ? "num" : kw.has(t[4]) ? "kw" : null;
    if (!cls) continue;
    if (t.index > at) parts.push(document.createTextNode(code.slice(at, t.index)));
    parts.push(el("span", t[0], cls));
    at = t.index + t[0].length;
  }
  if (at < code.length) parts.push(document.createTextNode(code.slice(at)));
  e.replaceChildren(...parts);
}
// One line's element; commentable (a click calls `onComment(el, at)`) when
// it stands at a line.
function lineEl(text, cls, at, onComment) {
  const e = el("div", text, cls);
  if (at) {
    highlight(e, text, at.path);
    // Focusable by the keys (j/k), never a stop of the Tab key each.
    e.classList.add("commentable"); e.tabIndex = -1; e.title = "Comment on " + at.path + ":" + at.line;
    e.dataset.path = at.path; e.dataset.line = String(at.line); e.dataset.side = at.side;
    e.addEventListener("click", () => onComment(e, at));
  }
  return e;
}
// A line's numbers in the gutter (CSS shows `data-ln` before the text,
// outside its textContent).
const num = (at) => String(at ? at.line : "").padStart(5);
// One element a line, as `git diff` prints it, its old and new numbers in
// the gutter.
function renderUnified(items, onComment) {
  return items.map((it) => {
    if (it.f) return fileHeader(it.f);
    const e = lineEl(it.text, it.cls, it.new || it.old, onComment);
    if (it.old || it.new) e.dataset.ln = num(it.old) + " " + num(it.new);
    return belongs(e, it);
  });
}
// A row of file `it.of`: marked as its, hidden while the file is collapsed.
function belongs(e, it) {
  if (it.of) { e.dataset.of = it.of; e.hidden = collapsed.has(it.of); }
  return e;
}
// A file's header: a button that collapses or expands it, its name and
// what happened to it, why it is collapsed at first (generated), and
// "Viewed" (which collapses it too).
function fileHeader(f) {
  const e = el("div", undefined, "file"); e.dataset.file = f.path; e.dataset.of = f.path; e.tabIndex = -1;
  const t = el("button", "", "toggle"); t.type = "button";
  t.addEventListener("click", () => setCollapsed(f.path, !collapsed.has(f.path)));
  e.append(t, " ", el("span", fileLabel(f), "label"));
  if (f.generated) e.append(" ", el("span", "generated: " + f.generated, "tag"));
  const box = el("input"); box.type = "checkbox"; box.checked = isViewed(f);
  box.addEventListener("change", () => { markViewed(f, box.checked); setCollapsed(f.path, box.checked); });
  const label = el("label", undefined, "viewed"); label.append(box, " Viewed");
  e.append(" ", label);
  toggleState(t, f.path);
  return e;
}
function toggleState(t, path) {
  const open = !collapsed.has(path);
  t.textContent = open ? "\u25be" : "\u25b8";
  t.setAttribute("aria-expanded", String(open));
  t.setAttribute("aria-label", (open ? "Collapse " : "Expand ") + path);
}
function setCollapsed(path, yes) {
  if (yes) collapsed.add(path); else collapsed.delete(path);
  for (const r of document.querySelectorAll("#p-diff [data-of]")) {
    if (r.dataset.of !== path) continue;
    if (r.dataset.file !== undefined) { const t = r.querySelector(".toggle"); if (t) toggleState(t, path); }
    else r.hidden = yes;
  }
}
// The old side on the left, the new on the right: a run of removed lines
// beside the run of added lines after it, context on both sides.
function renderSplit(items, onComment) {
  const out = [];
  let dels = [], adds = [];
  const cell = (it, side) => {
    if (!it) return el("div", "", "cell empty");
    const e = lineEl(it.text, (it.cls || "ctx") + " cell", it[side], onComment);
    e.dataset.ln = num(it[side]);
    return e;
  };
  const pair = (l, r) => { const row = el("div", undefined, "split-row"); row.append(cell(l, "old"), cell(r, "new")); return belongs(row, l || r); };
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) out.push(pair(dels[i], adds[i]));
    dels = []; adds = [];
  };
  for (const it of items) {
    if (it.cls === "del") { dels.push(it); continue; }
    if (it.cls === "add") { adds.push(it); continue; }
    flush();
    if (it.old && it.new) { out.push(pair(it, it)); continue; }
    if (it.f) { out.push(fileHeader(it.f)); continue; }
    out.push(belongs(el("div", it.text, (it.cls ? it.cls + " " : "") + "split-full"), it));
  }
  flush();
  return out;
}
