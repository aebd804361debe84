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
