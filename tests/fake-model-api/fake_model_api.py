#!/usr/bin/env python3
"""Fake model API for gatehost's tests of real agent CLIs.

gatehost's integration tests run real agent CLIs (for now Claude Code in
print mode, `claude -p`, used as a judge adapter) against this stand-in
instead of a real model service. It listens on loopback only, records every
request it receives, and answers every model call with one fixed text, so a
test can check both what the CLI printed and exactly what it sent.

Today it speaks the Anthropic Messages API (streaming and not); OpenAI and
Gemini shapes may be added later beside it.

Usage:
    python3 fake_model_api.py --port-file FILE --log FILE --reply TEXT [--port 0]

Once listening on 127.0.0.1 it writes the port number to --port-file
(atomically: temp file then rename). Each request is appended to --log as one
JSON line: {"method", "path", "headers" (lowercased names), "body" (parsed JSON
if it is JSON, else text)}. It exits cleanly on SIGTERM or SIGINT.

Standard library only; see README.md beside it for how the CLI is pointed here.
"""

import argparse
import json
import os
import signal
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

MODEL_FALLBACK = "claude-sonnet-4-6"


def count_tokens(value):
    """A rough, deterministic token count: about four characters a token."""
    return max(1, len(json.dumps(value, ensure_ascii=False)) // 4)


def message_usage(input_tokens, output_tokens):
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-model-api/1"

    # Set on the class by main().
    reply = ""
    log_path = ""
    log_lock = threading.Lock()

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

    def _record(self, body):
        entry = {
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
        }
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
        self._record(body)
        path = urlsplit(self.path).path.rstrip("/")
        if self.command == "POST" and path == "/v1/messages":
            self._messages(body if isinstance(body, dict) else {})
        elif self.command == "POST" and path == "/v1/messages/count_tokens":
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

    def _messages(self, req):
        model = req.get("model") or MODEL_FALLBACK
        msg_id = "msg_fake_" + uuid.uuid4().hex[:24]
        input_tokens = count_tokens([req.get("system"), req.get("messages")])
        output_tokens = count_tokens(self.reply)
        # Always plain text with end_turn, even when tools are offered, so an
        # agent loop stops after one turn.
        message = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": self.reply}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": message_usage(input_tokens, output_tokens),
        }
        if not req.get("stream"):
            self._send_json(200, message)
            return
        start = dict(message, content=[], stop_reason=None,
                     usage=message_usage(input_tokens, 1))
        events = [
            ("message_start", {"type": "message_start", "message": start}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
            ("ping", {"type": "ping"}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": self.reply}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                               "usage": {"output_tokens": output_tokens}}),
            ("message_stop", {"type": "message_stop"}),
        ]
        data = "".join(
            "event: %s\ndata: %s\n\n" % (name, json.dumps(ev)) for name, ev in events
        ).encode("utf-8")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_fake_" + uuid.uuid4().hex[:24])
        self.end_headers()
        self.wfile.write(data)


def write_port_file(path, port):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("%d\n" % port)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port-file", required=True, help="where to write the port once listening")
    ap.add_argument("--log", required=True, help="JSON-lines file to append each request to")
    ap.add_argument("--reply", required=True, help="assistant text for every model call")
    ap.add_argument("--port", type=int, default=0, help="port to bind (default 0: any free one)")
    args = ap.parse_args(argv)

    Handler.reply = args.reply
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
