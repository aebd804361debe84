// The policy page from the keyboard: j/k the next and previous line of
// the diff, n/p the next and previous file, c or Enter on a line opens its
// comment, Ctrl+Enter in a comment sends "Request changes", a approves
// (after a confirmation). Keys typed in a field are the field's. Loaded
// after diff.js and before app.js, whose functions it calls when a key
// comes.
"use strict";
// The rows a key moves between, in order.
// (Those of a collapsed file are not on screen: skipped.)
const shown = (e) => e.getClientRects().length > 0;
const lineRows = () => [...document.querySelectorAll("#p-diff .commentable")].filter(shown);
const fileRows = () => [...document.querySelectorAll("#p-diff [data-file]")];
// Focus `list`'s next (+1) or previous (-1) element from the focused one.
function step(list, by) {
  if (!list.length) return;
  const at = list.indexOf(document.activeElement);
  let to;
  if (at >= 0) to = Math.min(list.length - 1, Math.max(0, at + by));
  else {
    // From where the focus is (a file's header, the page): the first one
    // after it (or before it, going back).
    const after = list.findIndex((e) => document.activeElement.compareDocumentPosition(e) & Node.DOCUMENT_POSITION_FOLLOWING);
    to = by > 0 ? (after < 0 ? list.length - 1 : after) : (after <= 0 ? 0 : after - 1);
  }
  const e = list[to];
  if (e.tabIndex < 0) e.tabIndex = -1;
  e.focus(); e.scrollIntoView({ block: "nearest" });
}
function onKey(ev) {
  if (document.getElementById("policy").hidden || ev.altKey || ev.metaKey) return;
  const t = ev.target;
  if (t.classList && t.classList.contains("line-comment") && ev.key === "Enter" && ev.ctrlKey) {
    ev.preventDefault(); document.getElementById("request-changes").click(); return;
  }
  if (ev.ctrlKey || (t.closest && t.closest("input, textarea, select, button, a"))) return;
  const row = t.classList && t.classList.contains("commentable") ? t : null;
  switch (ev.key) {
    case "j": step(lineRows(), +1); break;
    case "k": step(lineRows(), -1); break;
    case "n": step(fileRows(), +1); break;
    case "p": step(fileRows(), -1); break;
    case "c": case "Enter": if (!row) return; row.click(); break;
    case "a": if (document.getElementById("actions").hidden) return; approveConfirmed(); break;
    default: return;
  }
  ev.preventDefault();
}
document.addEventListener("keydown", onKey);
