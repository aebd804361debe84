#!/usr/bin/env python3
"""Fake model API for gatehost's tests of real agent CLIs.

gatehost's integration tests run real agent CLIs (for now Claude Code in
print mode, `claude -p`, used as a judge adapter) against this stand-in
instead of a real model service. It listens on loopback only, records every
request it receives, and answers every model call with one fixed text, so a
test can check both what the CLI printed and exactly what it sent.

It speaks the Anthropic Messages API (streaming and not); other providers'
shapes live in their own modules beside it and register in MODEL_ROUTES.

Usage:
    python3 fake_model_api.py --port-file FILE --log FILE (--reply TEXT | --script FILE) [--port 0]

--script FILE is a JSON array of steps, one per model call in arrival order
(counted across every provider's model route; token counting and probes do
not count). A step is an object:
    "text": the assistant's text (default "");
    "hold_until": a path; the answer waits until that file exists (polled every
        20 ms, at most 120 s), so a test can act between two model calls;
    "tool_use" (Anthropic, Chat Completions and Responses routes): {"names": [NAME, ...], "input": {...}} (or
        "name": NAME), or a list of such objects: the answer calls the first
        of the names that the request's `tools` offer, with that input (after
        the text, when the text is not empty), id "toolu_fake_...",
        stop_reason "tool_use". An entry none of whose names is offered is
        dropped; with none left the step is answered as plain text, end_turn
        (and still used up), so a request that cannot run the tool (a
        sub-agent's, a side call's) is never handed it;
    matchers, each optional: "when_tools" / "unless_tools" (a name or a list:
        the request offers at least one / none of them), "when_system" /
        "unless_system" (a string or a list: the request's system prompt
        contains all / none of them). A step with matchers applies only to a
        request they all hold for;
    provider modules may read more keys.
Each model call takes the first step not yet used whose matchers hold for
it; when none is left, the last step whose matchers hold (used or not), and
when no step holds at all, an empty text. Without matchers this is plain
arrival order, the last step repeating past the end.
--reply TEXT is the script [{"text": TEXT}].

Once listening on 127.0.0.1 it writes the port number to --port-file
(atomically: temp file then rename). Each request is appended to --log as one
JSON line: {"method", "path", "headers" (lowercased names), "body" (parsed JSON
if it is JSON, else text)}, and for a model call "step": the index of the
script step that answered it (null: none held). It exits cleanly on SIGTERM or SIGINT.

Standard library only; see README.md beside it for how the CLI is pointed here.
"""

import argparse
import json
import os

import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from token_count import count_tokens

MODEL_FALLBACK = "claude-sonnet-4-6"


def message_usage(input_tokens, output_tokens):
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def _names(value):
    """A matcher's value as a list of strings (one string, or a list)."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def offered_tools(req):
    """The tool names a model request offers: Anthropic's and the OpenAI
    Responses API's `tools[].name`, Chat Completions' `tools[].function.name`,
    Gemini's `tools[].functionDeclarations[].name`."""
    names = []
    for tool in req.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get("name"), str):
            names.append(tool["name"])
        elif isinstance(tool.get("function"), dict):
            names.append(str(tool["function"].get("name")))
        for decl in tool.get("functionDeclarations") or []:
            if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                names.append(decl["name"])
    return names


def system_text(req):
    """The request's system prompt as one string (Anthropic's `system`, a
    string or text blocks; else Responses' `instructions`; else Chat
    Completions' `system` and `developer` messages)."""
    system = req.get("system", req.get("instructions"))
    if system is None and isinstance(req.get("messages"), list):
        system = [{"text": m["content"]} if isinstance(m.get("content"), str)
                  else {"text": "\n".join(p.get("text", "") for p in m["content"]
                                          if isinstance(p, dict))}
                  for m in req["messages"]
                  if isinstance(m, dict) and m.get("role") in ("system", "developer")
                  and isinstance(m.get("content"), (str, list))]
    if isinstance(system, list):
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
    return system if isinstance(system, str) else ""


def step_matches(step, req):
    """Whether a script step applies to this request: every matcher the step
    has must hold (a step without matchers applies to any request)."""
    tools = offered_tools(req)
    when = _names(step.get("when_tools"))
    if when and not any(n in tools for n in when):
        return False
    if any(n in tools for n in _names(step.get("unless_tools"))):
        return False
    system = system_text(req)
    if any(t not in system for t in _names(step.get("when_system"))):
        return False
    if any(t in system for t in _names(step.get("unless_system"))):
        return False
    return True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-model-api/1"

    # Set on the class by main().
    script = [{"text": ""}]
    log_path = ""
    log_lock = threading.Lock()
    calls = 0
    consumed = set()  # indexes of the script's steps already used
    calls_lock = threading.Lock()

    def pick_step(self, req):
        """This model call's step and its index in the script (see the docstring)."""
        with self.calls_lock:
            Handler.calls += 1
            for i, step in enumerate(self.script):
                if i not in Handler.consumed and step_matches(step, req):
                    Handler.consumed.add(i)
                    return i, step
            # Past the end: the last step that matches, consumed or not.
            for i in range(len(self.script) - 1, -1, -1):
                if step_matches(self.script[i], req):
                    return i, self.script[i]
        return None, {"text": ""}

    @staticmethod
    def hold(step):
        """Waits for the step's hold_until file (polled every 20 ms, at most 120 s)."""
        hold = step.get("hold_until")
        if hold:
            deadline = time.monotonic() + 120
            while not os.path.exists(hold) and time.monotonic() < deadline:
                time.sleep(0.02)

    def log_message(self, fmt, *args):  # keep stderr quiet; the log file says it all
        pass

    def _read_raw_body(self):
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            raw = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return raw
                raw += self.rfile.read(size)
                self.rfile.readline()  # CRLF after each chunk
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _read_body(self):
        text = self._read_raw_body().decode("utf-8", errors="replace")
        try:
            return json.loads(text) if text else None
        except ValueError:
            return text

    def _record(self, body, step=None):
        entry = {
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
        }
        if step is not None:
            entry["step"] = step
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self.log_lock, open(self.log_path, "a", encoding="utf-8") as f:
            f.write(line)

    def _send_json(self, status, obj):
        data = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_fake_" + uuid.uuid4().hex[:24])
        self.end_headers()
        self.wfile.write(data)

    def _handle(self):
        body = self._read_body() if self.command in ("POST", "PUT", "PATCH") else None
        path = urlsplit(self.path).path.rstrip("/")
        route = MODEL_ROUTES.get(path) if self.command == "POST" else None
        if route is None and self.command == "POST":
            route = next((r for p, r in MODEL_ROUTE_PATTERNS if p.fullmatch(path)), None)
        if route is not None:
            req = body if isinstance(body, dict) else {}
            index, step = self.pick_step(req)
            self._record(body, step=index)  # logged at once, even when held
            self.hold(step)
            route(self, req, step)
            return
        self._record(body)
        if self.command == "POST" and path == "/v1/messages/count_tokens":
            payload = body if isinstance(body, dict) else {}
            self._send_json(200, {"input_tokens": count_tokens(payload.get("messages", []))})
        elif self.command == "HEAD":
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()
        else:
            # Anything else the CLI may probe: a harmless empty answer.
            self._send_json(200, {})

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

    def tool_calls(self, step, req):
        """The step's tool calls this request can take (see `tool_calls`),
        for the provider routes in other modules."""
        return tool_calls(step, req)

    def send_sse(self, data):
        """Sends a complete server-sent-events body (already encoded)."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_fake_" + uuid.uuid4().hex[:24])
        self.end_headers()
        self.wfile.write(data)


def tool_calls(step, req):
    """The step's tool calls that this request can take: for each entry of
    `tool_use` (one object or a list), the first of its `names` (or its
    `name`) that the request's `tools` offer, with its `input`. Entries none
    of whose names are offered are dropped."""
    entries = step.get("tool_use")
    if entries is None:
        return []
    if isinstance(entries, dict):
        entries = [entries]
    offered = offered_tools(req)
    calls = []
    for entry in entries:
        names = _names(entry.get("names")) or _names(entry.get("name"))
        name = next((n for n in names if n in offered), None)
        if name is not None:
            calls.append({"type": "tool_use", "id": "toolu_fake_" + uuid.uuid4().hex[:24],
                          "name": name, "input": entry.get("input", {})})
    return calls


def anthropic_messages(handler, req, step):
    """POST /v1/messages: the step's text (when not empty) and tool calls
    (when it has `tool_use` and the request offers the tool), stop_reason
    `tool_use` if there is a tool call, else `end_turn`."""
    reply = step.get("text", "")
    calls = tool_calls(step, req)
    model = req.get("model") or MODEL_FALLBACK
    msg_id = "msg_fake_" + uuid.uuid4().hex[:24]
    input_tokens = count_tokens([req.get("system"), req.get("messages")])
    # Plain text with end_turn unless the step calls a tool the request
    # offers, so an agent loop stops after one turn.
    content = ([{"type": "text", "text": reply}] if reply or not calls else []) + calls
    stop_reason = "tool_use" if calls else "end_turn"
    output_tokens = count_tokens(content if calls else reply)
    message = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": message_usage(input_tokens, output_tokens),
    }
    if not req.get("stream"):
        handler._send_json(200, message)
        return
    start = dict(message, content=[], stop_reason=None,
                 usage=message_usage(input_tokens, 1))
    events = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(content):
        if block["type"] == "text":
            first = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            first = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(("content_block_start", {"type": "content_block_start",
                                               "index": index, "content_block": first}))
        if index == 0:
            events.append(("ping", {"type": "ping"}))
        events.append(("content_block_delta", {"type": "content_block_delta",
                                               "index": index, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events += [
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                           "usage": {"output_tokens": output_tokens}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    data = "".join(
        "event: %s\ndata: %s\n\n" % (name, json.dumps(ev)) for name, ev in events
    ).encode("utf-8")
    handler.send_sse(data)


# Model-call routes: exact POST paths, then regular expressions over the path.
# Provider modules beside this file add theirs here.
MODEL_ROUTES = {"/v1/messages": anthropic_messages}
MODEL_ROUTE_PATTERNS = []

import openai_responses  # noqa: E402  (beside this file: the OpenAI Responses API, for Codex)

MODEL_ROUTES.update(openai_responses.ROUTES)

import gemini_api  # noqa: E402  (Gemini API: /v1beta/models/MODEL:…GenerateContent)

gemini_api.register(MODEL_ROUTE_PATTERNS)

import openai_chat  # noqa: E402  (the OpenAI Chat Completions API, for Aider)

MODEL_ROUTES.update(openai_chat.ROUTES)


def write_port_file(path, port):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("%d\n" % port)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port-file", required=True, help="where to write the port once listening")
    ap.add_argument("--log", required=True, help="JSON-lines file to append each request to")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--reply", help="assistant text for every model call")
    what.add_argument("--script", help="JSON file: an array of steps, one per model call")
    ap.add_argument("--port", type=int, default=0, help="port to bind (default 0: any free one)")
    args = ap.parse_args(argv)

    if args.script is not None:
        with open(args.script, encoding="utf-8") as f:
            script = json.load(f)
        if not isinstance(script, list) or not script or not all(isinstance(s, dict) for s in script):
            ap.error("--script must hold a non-empty JSON array of objects")
        Handler.script = script
    else:
        Handler.script = [{"text": args.reply}]
    Handler.log_path = args.log
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True

    def stop(_signum, _frame):
        # shutdown() waits for serve_forever() to return, so call it off-thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    write_port_file(args.port_file, server.server_address[1])
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
