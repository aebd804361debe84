"""no-secrets: a gatehost gate plugin written in Python.

Built into a component with componentize-py (see build.sh). Fails when a
change adds a line that looks like a credential: cloud access keys,
private key blocks, tokens, or `password = "..."` style assignments. It
reads the change only through the host (`changed-files` and `file-diff`),
so it is built with every WASI import stubbed out: the Python runtime
links `wasi:sockets`, which gatehost refuses, and this plugin needs no
WASI at all.
"""

import json
import re

import wit_world
from componentize_py_types import Err
from wit_world.imports import host, types

PATTERNS = [
    ("aws-access-key", re.compile(r"AKIA[0-9A-Z]{16}")),
    ("private-key", re.compile(r"-----BEGIN (?:RSA |EC |OPENSSH |DSA )?PRIVATE KEY-----")),
    ("github-token", re.compile(r"gh[pousr]_[A-Za-z0-9]{36,}")),
    ("slack-token", re.compile(r"xox[baprs]-[A-Za-z0-9-]{10,}")),
    (
        "assigned-secret",
        re.compile(r"(?i)(api[_-]?key|secret|password|passwd|token)\s*[:=]\s*['\"][^'\"\s]{12,}['\"]"),
    ),
]


def added_lines(diff):
    """(line number, text) of each line a unified diff adds."""
    number = None
    for line in diff.splitlines():
        if line.startswith("@@ "):
            new = [p for p in line.split() if p.startswith("+")]
            number = int(new[0][1:].split(",")[0]) if new else None
        elif number is not None:
            if line.startswith("+") and not line.startswith("+++"):
                yield number, line[1:]
                number += 1
            elif line.startswith(" ") or line == "":
                number += 1


class WitWorld(wit_world.WitWorld):
    def evaluate(self, ctx: types.Context) -> types.Verdict:
        try:
            config = json.loads(ctx.config_json or "{}")
        except ValueError as e:
            raise Err(f"bad plugin config: {e}")
        if not ctx.changed_files:
            raise Err("the host gave no changed files (pass the change with --diff)")
        ignore = set(config.get("ignore", []))
        findings = []
        checked = 0
        for changed in ctx.changed_files:
            if changed.kind == types.ChangeKind.DELETED or changed.path in ignore:
                continue
            try:
                diff = host.file_diff(changed.path)
            except Err as e:
                findings.append(types.Finding(path=changed.path, line=None, severity=types.Severity.WARNING, message=f"no diff: {e.value}"))
                continue
            checked += 1
            for number, text in added_lines(diff):
                for name, pattern in PATTERNS:
                    if pattern.search(text):
                        findings.append(
                            types.Finding(path=changed.path, line=number, severity=types.Severity.ERROR, message=f"looks like a secret ({name})")
                        )
        host.log(host.LogLevel.INFO, f"no-secrets checked the added lines of {checked} file(s)")
        errors = [f for f in findings if f.severity == types.Severity.ERROR]
        if errors:
            return types.Verdict(decision=types.Decision.FAIL, summary=f"{len(errors)} secret-looking string(s)", findings=findings)
        return types.Verdict(
            decision=types.Decision.PASS, summary=f"no secret-looking string added in {checked} file(s)", findings=findings
        )
