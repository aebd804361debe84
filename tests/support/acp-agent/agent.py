#!/usr/bin/env python3
"""A scripted ACP agent for the tests: JSON-RPC 2.0 over stdio, one JSON
message a line, as the Agent Client Protocol says.

It answers `initialize` and `session/new`, and for each `session/prompt`
runs the prompt's lines as commands, then streams one agent message chunk
and answers `stopReason: end_turn`:

  PERMISSION KIND NAME   asks session/request_permission for a tool
  READ PATH              asks the client fs/read_text_file
  WRITE PATH             asks the client fs/write_text_file
  TERMINAL CMD           asks the client terminal/create
  OPEN PATH              opens PATH itself (the sandbox test)
  EXIT                   exits at once

Its argv may hold a mode (the routine tests'):

  --ask-first   the first prompt's answer ends without a `STEP DONE` line
                (it asks a question), every later one ends with it
  --done        every answer ends with a `STEP DONE` line
  --asks-always (as no mode) no answer ends with `STEP DONE`
  --fix-second  at its second prompt (a gate's nudge) it first creates
                the file DONE in its working directory: the fix a gate
                `test -f DONE` wants

Everything it receives and the result of every command are appended, one
JSON object a line, to acp-log.jsonl in its working directory: the test
reads what the agent got.
"""
import json
import os
import sys

LOG = os.path.join(os.getcwd(), "acp-log.jsonl")
next_id = [1000]


def log(obj):
    with open(LOG, "a") as f:
        f.write(json.dumps(obj) + "\n")


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def read():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    msg = json.loads(line)
    log({"received": msg})
    return msg


def ask(method, params):
    """Sends a request to the client and waits for its answer."""
    next_id[0] += 1
    rid = next_id[0]
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    while True:
        msg = read()
        if msg.get("id") == rid and "method" not in msg:
            return msg


def run(sid, text):
    done = []
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        cmd, args = words[0], words[1:]
        if cmd == "PERMISSION":
            kind, name = args[0], args[1]
            r = ask("session/request_permission", {
                "sessionId": sid,
                "toolCall": {"toolCallId": "call-" + name, "kind": kind, "title": name},
                "options": [
                    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
                ],
            })
            outcome = r.get("result", {}).get("outcome", {})
            answer = outcome.get("optionId", outcome.get("outcome"))
            log({"action": "permission", "name": name, "answer": answer})
            done.append(f"{name}={answer}")
        elif cmd == "READ":
            r = ask("fs/read_text_file", {"sessionId": sid, "path": args[0]})
            log({"action": "read", "path": args[0], "answer": r})
            done.append("read=" + ("error" if "error" in r else "content"))
        elif cmd == "WRITE":
            r = ask("fs/write_text_file", {"sessionId": sid, "path": args[0], "content": "pwned"})
            log({"action": "write", "path": args[0], "answer": r})
            done.append("write=" + ("error" if "error" in r else "ok"))
        elif cmd == "TERMINAL":
            r = ask("terminal/create", {"sessionId": sid, "command": args[0], "args": args[1:]})
            log({"action": "terminal", "answer": r})
            done.append("terminal=" + ("error" if "error" in r else "ok"))
        elif cmd == "OPEN":
            try:
                with open(args[0]) as f:
                    f.read()
                result = "read"
            except OSError as e:
                result = "errno " + str(e.errno)
            log({"action": "open", "path": args[0], "result": result})
            done.append("open=" + result)
        elif cmd == "EXIT":
            sys.exit(3)
    return done


def closing(turn):
    """The last line of the answer to the `turn`th prompt, by the mode."""
    if "--done" in sys.argv or ("--ask-first" in sys.argv and turn > 1):
        return "\nSTEP DONE"
    if "--ask-first" in sys.argv:
        return "\nQUESTION: which branch should I use?"
    return ""


def main():
    sid = "acp-session-1"
    turn = 0
    while True:
        msg = read()
        method, rid = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": False},
                "authMethods": [],
            }})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": sid}})
        elif method == "session/prompt":
            text = "".join(b.get("text", "") for b in msg["params"]["prompt"] if b.get("type") == "text")
            done = run(sid, text)
            turn += 1
            if "--fix-second" in sys.argv and turn == 2:
                with open("DONE", "w") as f:
                    f.write("fixed\n")
                log({"action": "fixed", "turn": turn})
            send({"jsonrpc": "2.0", "method": "session/update", "params": {
                "sessionId": sid,
                "update": {"sessionUpdate": "agent_message_chunk",
                           "content": {"type": "text", "text": "done: " + " ".join(done) + closing(turn)}},
            }})
            send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
        elif rid is not None:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found"}})


main()
