#!/usr/bin/env bash
# An offline stand-in for an LLM judge, for trying gatehost without an API
# key. It speaks the judge protocol (prompt on stdin, reasoning, then one
# verdict line, with the run's code when the prompt asks for one) but its
# "judgement" is a keyword rule: the material must mention a test.
set -euo pipefail
prompt=$(cat)
material=$(printf '%s\n' "$prompt" | sed -n '/BEGIN UNTRUSTED DATA>>>/,/END UNTRUSTED DATA>>>/p')
code=$(printf '%s\n' "$prompt" | grep -o 'followed by the code [0-9a-f]*' | awk '{print $NF}' || true)
if printf '%s' "$material" | grep -qi 'test'; then
  echo "The message explains the change and names the test that covers it."
  decision=PASS
else
  echo "The message does not say which test covers the change."
  decision=FAIL
fi
echo "VERDICT: $decision${code:+ $code}"
