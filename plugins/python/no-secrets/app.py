"""no-secrets: a gatehost gate plugin written in Python.

Built into a WASI component with componentize-py (see build.sh). Fails
when a changed file (or, with {"scope": "all"}, any file) holds a string
that looks like a credential: cloud access keys, private key blocks,
tokens, or `password = "..."` style assignments.
"""

import json
import os
import re

import wit_world
from componentize_py_types import Err
from wit_world.imports import host, types

WORKSPACE = "/workspace"

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


def all_files():
    out = []
    for root, dirs, files in os.walk(WORKSPACE):
        dirs[:] = sorted(d for d in dirs if d not in (".git", "target"))
        for name in sorted(files):
            out.append(os.path.relpath(os.path.join(root, name), WORKSPACE))
    return out


class WitWorld(wit_world.WitWorld):
    def evaluate(self, ctx: types.Context) -> types.Verdict:
        try:
            config = json.loads(ctx.config_json or "{}")
        except ValueError as e:
            raise Err(f"bad plugin config: {e}")
        scope = config.get("scope", "changed")
        if scope == "all":
            files = all_files()
        elif scope == "changed":
            if not ctx.changed_files:
                raise Err('scope is "changed" but the host gave no changed files (pass --diff)')
            files = [f.path for f in ctx.changed_files if f.kind != types.ChangeKind.DELETED]
        else:
            raise Err(f"unknown scope '{scope}' (changed, all)")

        findings = []
        for path in files:
            try:
                with open(os.path.join(WORKSPACE, path), encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
            except OSError as e:
                findings.append(types.Finding(path=path, line=None, severity=types.Severity.WARNING, message=f"cannot be read: {e}"))
                continue
            for number, line in enumerate(text.splitlines(), 1):
                for name, pattern in PATTERNS:
                    if pattern.search(line):
                        findings.append(
                            types.Finding(path=path, line=number, severity=types.Severity.ERROR, message=f"looks like a secret ({name})")
                        )
        host.log(host.LogLevel.INFO, f"no-secrets scanned {len(files)} file(s)")
        errors = [f for f in findings if f.severity == types.Severity.ERROR]
        if errors:
            return types.Verdict(decision=types.Decision.FAIL, summary=f"{len(errors)} secret-looking string(s)", findings=findings)
        return types.Verdict(
            decision=types.Decision.PASS, summary=f"no secret-looking string in {len(files)} file(s)", findings=findings
        )
