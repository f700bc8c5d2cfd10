"""Any OpenAI-compatible chat-completions server (``openai:MODEL``)."""

from __future__ import annotations

import httpx

from ..parts.http_api import openai_endpoint
from .base import ChatModel, Malformed, json_object


class OpenAIChat(ChatModel):
    provider = "openai"
    default_base_url = "https://api.openai.com/v1"
    base_url_env = "OPENAI_BASE_URL"

    def endpoint(self, base: httpx.URL) -> httpx.URL:
        return openai_endpoint(base, "chat/completions")  # the embedder's rule

    def pieces(self, line: str) -> tuple[str, bool]:
        if line.startswith(":"):  # a server-sent events comment (a keep-alive)
            return "", False
        if line.startswith("data:"):
            data = line[5:].strip()
            if data == "[DONE]":
                return "", True
        else:
            data = line.strip()  # a server that answered without streaming: one JSON body
        body = json_object(data)
        choices = body.get("choices")
        if choices == [] and "usage" in body:  # the closing usage report
            return "", False
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise Malformed(f"no choices in the answer: {data[:80]!r}")
        choice = choices[0]
        delta = choice.get("delta") or choice.get("message") or {}
        if not isinstance(delta, dict) or not isinstance(delta.get("content") or "", str):
            raise Malformed(f"a choice without text: {data[:80]!r}")
        return str(delta.get("content") or ""), choice.get("finish_reason") is not None
