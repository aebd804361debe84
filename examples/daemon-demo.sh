#!/usr/bin/env bash
# The daemon end to end on a scratch copy of examples/workspace: start
# `gatehost serve`, register a session, attach a commit policy whose gate is
# `cargo test`, let an "agent" end a turn with a failing change (the policy
# nudges), fix it (the gate passes, the commit waits for an ack), approve it
# as the operator, and show the commit. Usage: bash examples/daemon-demo.sh
# [path to the gatehost binary; default: build it with cargo].
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# Each stage's line says how long the demo has run (bash's $SECONDS).
say() { printf '\n\033[1m== %s\033[0m  [%ss]\n' "$*" "$SECONDS"; }

if [[ $# -ge 1 ]]; then
  gatehost=$1
else
  # cargo's own progress is shown (on stderr): from a fresh clone the debug
  # build takes about 12 minutes on 2 cores, seconds once built.
  say "building gatehost with cargo (debug; about 12 minutes on 2 cores from a fresh clone)"
  "${CARGO:-cargo}" build -p gatehost
  gatehost=$root/target/debug/gatehost
fi

# The daemon's data directory and files in $tmp; the agent's workspace under
# the root examples/gatehost.toml lists, apart from them (a root that holds
# the data directory is refused at start).
tmp=$(mktemp -d)
mkdir -p -m 1777 /tmp/gatehost-demo
wsdir=$(mktemp -d /tmp/gatehost-demo/ws.XXXXXX)
daemon=
cleanup() {
  [[ -n $daemon ]] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$tmp" "$wsdir"
}
trap cleanup EXIT

g() { GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git -C "$wsdir/ws" -c user.name=demo -c user.email=demo@example.invalid "$@"; }

say "a scratch git repository from examples/workspace"
mkdir -p "$wsdir/ws"
cp -r examples/workspace/Cargo.toml examples/workspace/src "$wsdir/ws/"
printf '/target\n' > "$wsdir/ws/.gitignore"
g init -q -b main && g add -A && g commit -q -m "initial" && g log --oneline

say "gatehost serve"
"$gatehost" serve --data-dir "$tmp/data" --listen 127.0.0.1:0 --config examples/gatehost.toml > "$tmp/serve.out" 2> "$tmp/serve.log" &
daemon=$!
for _ in $(seq 100); do [[ -s $tmp/data/server.url ]] && break; sleep 0.1; done
cat "$tmp/serve.out"
export GATEHOST_SERVER=$(cat "$tmp/data/server.url")
export GATEHOST_TOKEN=$(cat "$tmp/data/agent.token")   # what the agent holds
operator=$(cat "$tmp/data/operator.token")             # what only the human holds

say "register the agent's session and attach a policy"
"$gatehost" session register --id demo --cwd "$wsdir/ws"
cat > "$tmp/policy.json" <<EOF
{
  "sessionId": "demo",
  "gate": {"name": "unit tests", "command": "cargo", "args": ["test", "--quiet", "--offline"], "timeoutMs": 300000},
  "then": "commit",
  "commit": {"paths": ["src"], "message": "Keep add() saturating; note the review"},
  "onFail": {"nudge": "The tests fail ({code}). Fix them:\n{output}", "maxRetries": 2}
}
EOF
policy=$("$gatehost" policy attach "$tmp/policy.json")
"$gatehost" policy status "$policy"

say "the agent ends a turn with a broken change: the gate fails, the agent is nudged"
sed -i 's/a.saturating_add(b)/a.wrapping_add(b)/' "$wsdir/ws/src/lib.rs"
"$gatehost" session report demo turn-end --message "switched add() to wrapping_add"
echo "(the gate runs cargo test in the workspace: its first build takes a while)"
for _ in $(seq 600); do
  [[ $("$gatehost" policy status "$policy" --json | grep -c '"status": "watching"') -eq 1 ]] && \
  [[ $("$gatehost" events poll --policy "$policy" --types nudge --json | grep -c '"policy:nudge"') -ge 1 ]] && break
  sleep 0.2
done
"$gatehost" events poll --policy "$policy"

say "the agent fixes it and ends its turn: the gate passes, the commit waits for the human"
sed -i 's/a.wrapping_add(b)/a.saturating_add(b)/' "$wsdir/ws/src/lib.rs"
echo "// reviewed by the gate" >> "$wsdir/ws/src/lib.rs"
"$gatehost" session report demo turn-end --message "back to saturating_add; tests pass"
"$gatehost" wait --policy "$policy" --timeout 5m
"$gatehost" policy status "$policy"

say "the agent's token cannot approve; the operator's can"
"$gatehost" policy ack "$policy" --approve || echo "(refused, as it must be)"
GATEHOST_TOKEN=$operator "$gatehost" policy ack "$policy" --approve
# (The status is read whole before matching: `grep -q` stops reading at the
# first match, and under `pipefail` the writer's SIGPIPE would fail the test.)
is_done() { [[ $("$gatehost" policy status "$policy" --json) == *'"status": "done"'* ]]; }
for _ in $(seq 600); do
  is_done && break
  sleep 0.1
done
"$gatehost" policy status "$policy"

if ! is_done; then
  echo "demo: the policy did not end committed; the daemon's log:" >&2
  cat "$tmp/serve.log" >&2
  exit 1
fi

say "the commit"
g log --stat -1 --format='%h %s'
say "every event of the policy"
"$gatehost" events poll --policy "$policy" --limit 100
