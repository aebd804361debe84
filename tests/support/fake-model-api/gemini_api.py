"""The Gemini API (generativelanguage v1beta) for fake_model_api.py.

Gemini CLI, with `GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT` and API-key
auth, calls

    POST /v1beta/models/MODEL:streamGenerateContent?alt=sse   (the agent's turns)
    POST /v1beta/models/MODEL:generateContent                 (side calls: the
        model router's classifier when the model is "auto", and others)
    POST /v1beta/models/MODEL:countTokens

Every generate call answers the script step's text as one candidate with
finishReason STOP; a step with `tool_use` (as on the Anthropic route:
`{"names": [...], "input": {...}}`) adds a `functionCall` part for the first
of its names the request's `functionDeclarations` offer, with the input as
its `args` (the agent then runs the tool and calls again with its
`functionResponse`). countTokens answers a rough count and is not a model
call.

Standard library only; imported by fake_model_api.py, which calls
register(MODEL_ROUTE_PATTERNS).
"""

import json
import re

from token_count import count_tokens


def _usage(req, reply):
    prompt = count_tokens([req.get("systemInstruction"), req.get("contents")])
    candidates = count_tokens(reply)
    return {
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates,
    }


def _response(handler, req, step, model):
    reply = step.get("text", "")
    calls = handler.tool_calls(step, req)
    parts = [{"text": reply}] if reply or not calls else []
    parts += [{"functionCall": {"name": c["name"], "args": c["input"]}} for c in calls]
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": _usage(req, reply),
        "modelVersion": model,
        "responseId": "fake-%d" % (abs(hash(reply)) % 10**12),
    }


def _model(handler):
    m = re.search(r"/models/([^/:]+):", handler.path)
    return m.group(1) if m else "gemini-fake"


def generate_content(handler, req, step):
    """POST /v1beta/models/MODEL:generateContent: one JSON response."""
    handler._send_json(200, _response(handler, req, step, _model(handler)))


def stream_generate_content(handler, req, step):
    """POST /v1beta/models/MODEL:streamGenerateContent?alt=sse: one SSE event
    holding the whole answer."""
    chunk = _response(handler, req, step, _model(handler))
    handler.send_sse(("data: %s\r\n\r\n" % json.dumps(chunk)).encode("utf-8"))


MODEL_ROUTES = [
    (re.compile(r"/v1(?:beta|alpha)?/models/[^/:]+:streamGenerateContent"), stream_generate_content),
    (re.compile(r"/v1(?:beta|alpha)?/models/[^/:]+:generateContent"), generate_content),
]


def register(patterns):
    """Adds the Gemini model routes to fake_model_api's MODEL_ROUTE_PATTERNS."""
    patterns.extend(MODEL_ROUTES)
