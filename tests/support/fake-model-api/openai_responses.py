"""The OpenAI Responses API (`POST /v1/responses`), as Codex CLI calls it.

Imported by fake_model_api.py, which registers `ROUTES` into its
MODEL_ROUTES. Every call is answered with one assistant message holding the
step's `text`, streamed as server-sent events (or as one JSON object when the
request does not ask for a stream), and no tool call, so an agent's turn ends
after one model call; unless the step has `tool_use` naming a function the
request's `tools` offer (`{"type": "function", "name": ...}`): then the
output also holds one `function_call` item per such entry (`call_id`
"call_fake_...", `arguments` the input as JSON text), after the message when
its text is not empty. Standard library only.
"""

import json
import time
import uuid

from token_count import count_tokens

MODEL_FALLBACK = "gpt-5.5"


def _usage(input_tokens, output_tokens):
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def _response(resp_id, model, created, status, output, usage):
    return {
        "id": resp_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "model": model,
        "output": output,
        "usage": usage,
        "error": None,
        "incomplete_details": None,
    }


def function_calls(step, req):
    """The step's `tool_use` entries (one object or a list) the request can
    take, as Responses `function_call` items: for each entry, the first of
    its names (or its `name`) among the request's function tools."""
    entries = step.get("tool_use")
    if not entries:
        return []
    if isinstance(entries, dict):
        entries = [entries]
    offered = [str(t.get("name")) for t in req.get("tools") or []
               if isinstance(t, dict) and t.get("type") == "function"]
    calls = []
    for e in entries:
        names = e.get("names") or [e.get("name")]
        name = next((n for n in names if n in offered), None)
        if name is None:
            continue
        calls.append({"id": "fc_fake_" + uuid.uuid4().hex[:24], "type": "function_call",
                      "status": "completed", "call_id": "call_fake_" + uuid.uuid4().hex[:24],
                      "name": name, "arguments": json.dumps(e.get("input") or {})})
    return calls


def responses(handler, req, step):
    """POST /v1/responses: one assistant message with the step's text."""
    reply = step.get("text", "")
    model = req.get("model") or MODEL_FALLBACK
    created = int(time.time())
    resp_id = "resp_fake_" + uuid.uuid4().hex[:24]
    item_id = "msg_fake_" + uuid.uuid4().hex[:24]
    usage = _usage(count_tokens([req.get("instructions"), req.get("input")]),
                   count_tokens(reply))
    part = {"type": "output_text", "text": reply, "annotations": []}
    item = {"id": item_id, "type": "message", "role": "assistant",
            "status": "completed", "content": [part]}
    calls = function_calls(step, req)
    output = ([item] if reply or not calls else []) + calls
    done = _response(resp_id, model, created, "completed", output, usage)
    if not req.get("stream"):
        handler._send_json(200, done)
        return
    started = _response(resp_id, model, created, "in_progress", [], None)
    empty_item = dict(item, status="in_progress", content=[])
    empty_part = dict(part, text="")
    where = {"item_id": item_id, "output_index": 0, "content_index": 0}
    events = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    if output and output[0] is item:
        events += [
            {"type": "response.output_item.added", "output_index": 0, "item": empty_item},
            dict(where, type="response.content_part.added", part=empty_part),
            dict(where, type="response.output_text.delta", delta=reply),
            dict(where, type="response.output_text.done", text=reply),
            dict(where, type="response.content_part.done", part=part),
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ]
    for n, call in enumerate(calls, start=len(output) - len(calls)):
        at = {"item_id": call["id"], "output_index": n}
        events += [
            {"type": "response.output_item.added", "output_index": n,
             "item": dict(call, status="in_progress", arguments="")},
            dict(at, type="response.function_call_arguments.delta", delta=call["arguments"]),
            dict(at, type="response.function_call_arguments.done", arguments=call["arguments"]),
            {"type": "response.output_item.done", "output_index": n, "item": call},
        ]
    events.append({"type": "response.completed", "response": done})
    body = "".join(
        "event: %s\ndata: %s\n\n" % (ev["type"], json.dumps(dict(ev, sequence_number=n)))
        for n, ev in enumerate(events)
    )
    handler.send_sse(body.encode("utf-8"))


# Exact POST paths (after the trailing slash is stripped) to register.
ROUTES = {"/v1/responses": responses}
