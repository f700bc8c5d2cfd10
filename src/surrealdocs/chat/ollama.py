"""Ollama's chat API (``ollama:MODEL``)."""

from __future__ import annotations

import httpx

from ..parts.http_api import OLLAMA_PORT
from .base import ChatModel, Malformed, json_object


class OllamaChat(ChatModel):
    provider = "ollama"
    default_base_url = f"http://127.0.0.1:{OLLAMA_PORT}"
    base_url_env = "OLLAMA_HOST"
    default_port = OLLAMA_PORT

    def endpoint(self, base: httpx.URL) -> httpx.URL:
        return base.copy_with(path=base.path.rstrip("/") + "/api/chat")

    def pieces(self, line: str) -> tuple[str, bool]:
        body = json_object(line)
        message = body.get("message") or {}
        if not isinstance(message, dict) or not isinstance(message.get("content") or "", str):
            raise Malformed(f"a message without text: {line[:80]!r}")
        return str(message.get("content") or ""), bool(body.get("done"))
