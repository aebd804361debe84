"""The OpenAI Chat Completions API (`POST /v1/chat/completions`), as Aider
calls it through litellm (`--model openai/NAME --openai-api-base
http://127.0.0.1:PORT/v1`).

Imported by fake_model_api.py, which registers `ROUTES` into its
MODEL_ROUTES. Every call is answered with one assistant message holding the
step's `text`, `finish_reason: "stop"` and no tool call: streamed as
server-sent events (`data: {chunk}` lines, the text in one
`choices[0].delta.content`, a last chunk with the finish reason and, when
`stream_options.include_usage` asks for it, `usage`, then `data: [DONE]`),
or as one `chat.completion` JSON object when the request has no
`"stream": true`. Standard library only.
"""

import json
import time
import uuid

MODEL_FALLBACK = "gpt-4o"


def _count_tokens(value):
    """A rough, deterministic token count: about four characters a token."""
    return max(1, len(json.dumps(value, ensure_ascii=False)) // 4)


def _usage(prompt_tokens, completion_tokens):
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def chat_completions(handler, req, step):
    """POST /v1/chat/completions: one assistant message with the step's text."""
    reply = step.get("text", "")
    model = req.get("model") or MODEL_FALLBACK
    created = int(time.time())
    chat_id = "chatcmpl-fake" + uuid.uuid4().hex[:24]
    usage = _usage(_count_tokens(req.get("messages")), _count_tokens(reply))
    head = {"id": chat_id, "created": created, "model": model, "system_fingerprint": None}
    if not req.get("stream"):
        message = {"role": "assistant", "content": reply, "refusal": None}
        handler._send_json(200, dict(
            head, object="chat.completion",
            choices=[{"index": 0, "message": message, "logprobs": None,
                      "finish_reason": "stop"}],
            usage=usage))
        return
    chunk = dict(head, object="chat.completion.chunk")
    chunks = [
        dict(chunk, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                              "logprobs": None, "finish_reason": None}]),
        dict(chunk, choices=[{"index": 0, "delta": {"content": reply},
                              "logprobs": None, "finish_reason": None}]),
        dict(chunk, choices=[{"index": 0, "delta": {}, "logprobs": None,
                              "finish_reason": "stop"}]),
    ]
    if (req.get("stream_options") or {}).get("include_usage"):
        chunks.append(dict(chunk, choices=[], usage=usage))
    body = "".join("data: %s\n\n" % json.dumps(c) for c in chunks) + "data: [DONE]\n\n"
    handler.send_sse(body.encode("utf-8"))


# Exact POST paths (after the trailing slash is stripped) to register.
ROUTES = {"/v1/chat/completions": chat_completions}
