// no-debug-js: a gatehost gate plugin written in JavaScript.
//
// Built into a WASI component with jco / componentize-js (see build.sh).
// Fails when a change leaves a debugging statement (`console.log(`,
// `debugger;`) in a changed JavaScript or TypeScript file. It takes the
// changed files from the context, reads them through the host's
// `read-files` (one host call per batch), and with `addedLinesOnly` (the
// default) looks only at the lines the change adds (`file-diff`), so a
// statement that was already there does not block an unrelated change.
//
// Config (the wasm gate's `config`; every key optional, unknown keys are
// an error):
//   {
//     "extensions": [".js", ".ts", ...],  // which files (replaces the default list)
//     "patterns": [{"id": "no-alert", "pattern": "\\balert\\(",
//                   "message": "...", "severity": "error"}],  // replaces the defaults
//     "addedLinesOnly": true,             // false: every line of a changed file
//     "skipComments": true,               // a match after `//` or on a `*` line is not one
//     "ignore": ["vendor/", "scripts/dev.js"],  // a path, or a directory ending in `/`
//     "maxFileBytes": 1048576             // larger files are skipped (an info finding)
//   }
// A line holding `no-debug-js: allow` is never flagged.

import { log, fileDiff, readFiles } from 'gatehost:gate/host@0.1.2';

const DEFAULT_EXTENSIONS = ['.js', '.mjs', '.cjs', '.jsx', '.ts', '.mts', '.cts', '.tsx'];

const DEFAULT_PATTERNS = [
  { id: 'console-log', pattern: '\\bconsole\\.log\\s*\\(', message: 'console.log( left in' },
  { id: 'debugger', pattern: '\\bdebugger\\s*(?:;|$)', message: 'debugger statement left in' },
];

const CONFIG_KEYS = ['extensions', 'patterns', 'addedLinesOnly', 'skipComments', 'ignore', 'maxFileBytes'];
const PATTERN_KEYS = ['id', 'pattern', 'message', 'severity'];
const SEVERITIES = ['info', 'warning', 'error'];
const ALLOW_MARKER = 'no-debug-js: allow';
// Files read per host call: a batch's contents are in memory at once.
const READ_BATCH = 64;

function fail(message) {
  // A thrown value is the `err` of `evaluate`: the host reports an `error`.
  throw message;
}

function stringList(value, key) {
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    fail(`bad plugin config: ${key} must be a list of strings`);
  }
  return value;
}

function boolean(value, key) {
  if (typeof value !== 'boolean') fail(`bad plugin config: ${key} must be true or false`);
  return value;
}

function parseConfig(json) {
  let raw;
  try {
    raw = JSON.parse(json || '{}');
  } catch (e) {
    fail(`bad plugin config: ${e.message}`);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    fail('bad plugin config: not an object');
  }
  for (const key of Object.keys(raw)) {
    if (!CONFIG_KEYS.includes(key)) fail(`bad plugin config: unknown key ${key} (${CONFIG_KEYS.join(', ')})`);
  }
  const config = {
    extensions: raw.extensions === undefined ? DEFAULT_EXTENSIONS : stringList(raw.extensions, 'extensions'),
    addedLinesOnly: raw.addedLinesOnly === undefined ? true : boolean(raw.addedLinesOnly, 'addedLinesOnly'),
    skipComments: raw.skipComments === undefined ? true : boolean(raw.skipComments, 'skipComments'),
    ignore: raw.ignore === undefined ? [] : stringList(raw.ignore, 'ignore'),
    maxFileBytes: 1048576,
    patterns: [],
  };
  if (raw.maxFileBytes !== undefined) {
    if (!Number.isSafeInteger(raw.maxFileBytes) || raw.maxFileBytes < 0) {
      fail('bad plugin config: maxFileBytes must be a whole number of bytes');
    }
    config.maxFileBytes = raw.maxFileBytes;
  }
  const patterns = raw.patterns === undefined ? DEFAULT_PATTERNS : raw.patterns;
  if (!Array.isArray(patterns) || patterns.length === 0) {
    fail('bad plugin config: patterns must be a non-empty list');
  }
  for (const p of patterns) {
    if (p === null || typeof p !== 'object' || typeof p.id !== 'string' || typeof p.pattern !== 'string') {
      fail('bad plugin config: each pattern needs a string id and a string pattern');
    }
    for (const key of Object.keys(p)) {
      if (!PATTERN_KEYS.includes(key)) fail(`bad plugin config: pattern ${p.id}: unknown key ${key}`);
    }
    const severity = p.severity === undefined ? 'error' : p.severity;
    if (!SEVERITIES.includes(severity)) {
      fail(`bad plugin config: pattern ${p.id}: unknown severity ${severity} (${SEVERITIES.join(', ')})`);
    }
    let regex;
    try {
      regex = new RegExp(p.pattern);
    } catch (e) {
      fail(`bad plugin config: pattern ${p.id}: ${e.message}`);
    }
    config.patterns.push({
      id: p.id,
      regex,
      severity,
      message: typeof p.message === 'string' ? p.message : `matches ${p.pattern}`,
    });
  }
  return config;
}

function ignored(path, ignore) {
  return ignore.some((entry) => (entry.endsWith('/') ? path.startsWith(entry) : path === entry));
}

// The line numbers (1-based, in the new file) that a unified diff adds.
function addedLines(diff) {
  const added = new Set();
  let number = null;
  for (const line of diff.split('\n')) {
    if (line.startsWith('@@ ')) {
      const m = /^@@ -\S+ \+(\d+)/.exec(line);
      number = m ? Number(m[1]) : null;
    } else if (number !== null) {
      if (line.startsWith('+') && !line.startsWith('+++')) {
        added.add(number);
        number += 1;
      } else if (line.startsWith(' ') || line === '') {
        number += 1;
      }
    }
  }
  return added;
}

// Whether the match at `index` of `line` sits in a comment: after `//`,
// or on a line of a block comment (starting with `/*` or `*`). A
// heuristic: a `//` inside a string counts too.
function inComment(line, index) {
  const trimmed = line.trimStart();
  if (trimmed.startsWith('*') || trimmed.startsWith('/*')) return true;
  const slashes = line.indexOf('//');
  return slashes !== -1 && slashes < index;
}

// Each file's bytes (a Uint8Array) or why it could not be read, in order.
function readAll(paths, maxBytes) {
  const out = [];
  for (let i = 0; i < paths.length; i += READ_BATCH) {
    const batch = paths.slice(i, i + READ_BATCH);
    let answers;
    try {
      answers = readFiles(batch, BigInt(maxBytes));
    } catch (e) {
      // Too much for one answer (the memory budget): one by one.
      answers = batch.map((p) => {
        try {
          return readFiles([p], BigInt(maxBytes))[0];
        } catch (e1) {
          return { tag: 'err', val: { tag: 'unreadable', val: String(e1.payload ?? e1) } };
        }
      });
    }
    out.push(...answers);
  }
  return out;
}

function scan(path, text, config, only, findings) {
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const number = i + 1;
    if (only && !only.has(number)) continue;
    const line = lines[i];
    if (line.includes(ALLOW_MARKER)) continue;
    for (const p of config.patterns) {
      const m = p.regex.exec(line);
      if (!m || (config.skipComments && inComment(line, m.index))) continue;
      findings.push({ path, line: number, severity: p.severity, message: `[${p.id}] ${p.message}` });
    }
  }
}

export function evaluate(ctx) {
  const config = parseConfig(ctx.configJson);
  if (ctx.changedFiles.length === 0) {
    fail('the host gave no changed files (pass the change with --diff)');
  }
  const paths = ctx.changedFiles
    .filter((f) => f.kind !== 'deleted')
    .map((f) => f.path)
    .filter((p) => config.extensions.some((ext) => p.endsWith(ext)) && !ignored(p, config.ignore));
  const findings = [];
  const decoder = new TextDecoder();
  let scanned = 0;
  const answers = readAll(paths, config.maxFileBytes);
  paths.forEach((path, i) => {
    const answer = answers[i];
    if (answer.tag === 'err') {
      if (answer.val.tag === 'too-large') {
        findings.push({ path, severity: 'info', message: `skipped: more than ${config.maxFileBytes} bytes (maxFileBytes)` });
      } else {
        findings.push({ path, severity: 'warning', message: `cannot be read: ${answer.val.val}` });
      }
      return;
    }
    let only = null;
    if (config.addedLinesOnly) {
      try {
        only = addedLines(fileDiff(path));
      } catch (e) {
        findings.push({ path, severity: 'warning', message: `no diff: ${e.payload ?? e}` });
        return;
      }
    }
    scanned += 1;
    scan(path, decoder.decode(answer.val), config, only, findings);
  });
  log('info', `no-debug-js scanned ${scanned} of ${ctx.changedFiles.length} changed file(s)`);
  const errors = findings.filter((f) => f.severity === 'error').length;
  if (errors > 0) {
    return { decision: 'fail', summary: `${errors} debugging statement(s) left in ${scanned} file(s)`, findings };
  }
  return { decision: 'pass', summary: `no debugging statement in ${scanned} file(s)`, findings };
}
