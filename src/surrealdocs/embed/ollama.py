"""``ollama:MODEL``: a model served by Ollama's own embeddings API.

``POST {host}/api/embed`` with ``{"model", "input": [texts]}`` answers
``{"embeddings": [[...], ...]}``. The host is read like Ollama's clients read
``OLLAMA_HOST``: ``http://localhost:11434`` by default, and a bare ``HOST`` or ``HOST:PORT``
means ``http://`` with port 11434 unless given. Model names keep their tag
(``ollama:nomic-embed-text:latest``). Texts are sent as they are: models that want task
prefixes (nomic-embed-text's ``search_query:``) do not get them.
"""

from __future__ import annotations

from typing import Any

import httpx

from ..parts.http_api import OLLAMA_PORT, checked_base_url
from .http import HTTPEmbedder

DEFAULT_PORT = OLLAMA_PORT


class OllamaEmbedder(HTTPEmbedder):
    provider = "ollama"
    default_base_url = f"http://localhost:{DEFAULT_PORT}"
    base_url_env = "OLLAMA_HOST"

    @classmethod
    def parse_base_url(cls, base_url: str) -> httpx.URL:
        return checked_base_url(base_url, cls._where(), default_port=DEFAULT_PORT)

    def endpoint_url(self, base: httpx.URL) -> httpx.URL:
        path = base.path.rstrip("/").removesuffix("/api/embed").removesuffix("/api")
        return base.copy_with(path=path + "/api/embed")

    def parse(self, body: Any) -> list[Any]:
        embeddings = body["embeddings"]
        if not isinstance(embeddings, list):
            raise TypeError(f"'embeddings' is {type(embeddings).__name__}, not a list")
        return embeddings

    def missing_model_hint(self) -> str:
        return f" (pull it first: ollama pull {self.model})"
