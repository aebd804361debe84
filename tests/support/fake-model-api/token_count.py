"""The fake model APIs' token count, for the usage their answers report.
Standard library only; imported by fake_model_api.py and the provider
modules beside it (openai_chat.py, openai_responses.py, gemini_api.py)."""

import json


def count_tokens(value):
    """A rough, deterministic token count: about four characters a token."""
    return max(1, len(json.dumps(value, ensure_ascii=False)) // 4)
