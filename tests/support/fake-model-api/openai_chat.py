"""The OpenAI Chat Completions API (`POST /v1/chat/completions`), as Aider
calls it through litellm (`--model openai/NAME --openai-api-base
http://127.0.0.1:PORT/v1`), and OpenCode and GitHub Copilot CLI (a custom
provider) call it.

Imported by fake_model_api.py, which registers `ROUTES` into its
MODEL_ROUTES. Every call is answered with one assistant message holding the
step's `text`, `finish_reason: "stop"` and no tool call (unless the step has
`tool_use` naming a tool the request offers: then the message also holds
`tool_calls`, `finish_reason: "tool_calls"`; see `tool_calls` below): streamed as
server-sent events (`data: {chunk}` lines, the text in one
`choices[0].delta.content`, a last chunk with the finish reason and, when
`stream_options.include_usage` asks for it, `usage`, then `data: [DONE]`),
or as one `chat.completion` JSON object when the request has no
`"stream": true`. Standard library only.
"""

import json
import time
import uuid

from token_count import count_tokens

MODEL_FALLBACK = "gpt-4o"


def _usage(prompt_tokens, completion_tokens):
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _names(value):
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def tool_calls(step, req):
    """The step's `tool_use` entries (one object or a list, as on the
    Anthropic route: `{"names": [...], "input": {...}}` or `"name"`) that this
    request can take, as Chat Completions `tool_calls`: for each entry, the
    first of its names the request's `tools[].function.name` offer, its input
    as the JSON text `arguments`, id "call_fake_...". Entries none of whose
    names is offered are dropped (with none left the step is plain text)."""
    entries = step.get("tool_use")
    if entries is None:
        return []
    if isinstance(entries, dict):
        entries = [entries]
    offered = [str((t.get("function") or {}).get("name")) for t in req.get("tools") or []
               if isinstance(t, dict)]
    calls = []
    for entry in entries:
        names = _names(entry.get("names")) or _names(entry.get("name"))
        name = next((n for n in names if n in offered), None)
        if name is not None:
            calls.append({"id": "call_fake_" + uuid.uuid4().hex[:24], "type": "function",
                          "function": {"name": name,
                                       "arguments": json.dumps(entry.get("input", {}))}})
    return calls


def chat_completions(handler, req, step):
    """POST /v1/chat/completions: one assistant message with the step's text
    (and its tool calls, when it has `tool_use` and the request offers the tool)."""
    reply = step.get("text", "")
    calls = tool_calls(step, req)
    finish = "tool_calls" if calls else "stop"
    model = req.get("model") or MODEL_FALLBACK
    created = int(time.time())
    chat_id = "chatcmpl-fake" + uuid.uuid4().hex[:24]
    usage = _usage(count_tokens(req.get("messages")), count_tokens(reply))
    head = {"id": chat_id, "created": created, "model": model, "system_fingerprint": None}
    if not req.get("stream"):
        message = {"role": "assistant", "content": reply if reply or not calls else None,
                   "refusal": None}
        if calls:
            message["tool_calls"] = calls
        handler._send_json(200, dict(
            head, object="chat.completion",
            choices=[{"index": 0, "message": message, "logprobs": None,
                      "finish_reason": finish}],
            usage=usage))
        return
    chunk = dict(head, object="chat.completion.chunk")
    chunks = [
        dict(chunk, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                              "logprobs": None, "finish_reason": None}]),
    ]
    if reply or not calls:
        chunks.append(dict(chunk, choices=[{"index": 0, "delta": {"content": reply},
                                            "logprobs": None, "finish_reason": None}]))
    for index, call in enumerate(calls):
        chunks.append(dict(chunk, choices=[{"index": 0, "delta": {"tool_calls": [
            dict(call, index=index)]}, "logprobs": None, "finish_reason": None}]))
    chunks.append(dict(chunk, choices=[{"index": 0, "delta": {}, "logprobs": None,
                                        "finish_reason": finish}]))
    if (req.get("stream_options") or {}).get("include_usage"):
        chunks.append(dict(chunk, choices=[], usage=usage))
    body = "".join("data: %s\n\n" % json.dumps(c) for c in chunks) + "data: [DONE]\n\n"
    handler.send_sse(body.encode("utf-8"))


# Exact POST paths (after the trailing slash is stripped) to register.
ROUTES = {"/v1/chat/completions": chat_completions}
