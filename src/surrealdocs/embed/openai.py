"""``openai:MODEL``: any server that speaks OpenAI's embeddings API.

That is OpenAI itself and the many servers copying its API (vLLM, llama.cpp's server,
LM Studio, LocalAI, text-embeddings-inference, LiteLLM, Ollama's ``/v1``, hosted services).
``POST {api}/embeddings`` with ``{"model", "input": [texts]}`` answers
``{"data": [{"index", "embedding"}, ...]}``; the key goes in ``Authorization: Bearer``.

The base URL is read the way the OpenAI SDK reads ``OPENAI_BASE_URL``: it is the API root,
version included (``https://api.openai.com/v1``, ``https://host/openai/v1``). A URL that is
just a server (``http://host:8000``) means its API is under ``/v1``, so both
``http://host:8000`` and ``http://host:8000/v1`` post to ``http://host:8000/v1/embeddings``.
"""

from __future__ import annotations

from typing import Any

import httpx

from ..errors import ConfigurationError
from ..parts.http_api import openai_endpoint
from .http import HTTPEmbedder, ProviderOptions


class OpenAIEmbedder(HTTPEmbedder):
    provider = "openai"
    default_base_url = "https://api.openai.com/v1"
    base_url_env = "OPENAI_BASE_URL"
    api_key_env = "OPENAI_API_KEY"

    def __init__(self, model: str, options: ProviderOptions) -> None:
        host = httpx.URL(options.base_url.strip()).host if "://" in options.base_url else ""
        if host == "api.openai.com" and not options.api_key:
            # Known to fail: say so before a round trip.
            raise ConfigurationError(
                f"openai:{model} needs an API key: set SURREALDOCS_EMBED_API_KEY or "
                "OPENAI_API_KEY (or point SURREALDOCS_EMBED_BASE_URL at a server that "
                "needs none)")
        super().__init__(model, options)

    def endpoint_url(self, base: httpx.URL) -> httpx.URL:
        return openai_endpoint(base, "embeddings")

    def parse(self, body: Any) -> list[Any]:
        data = body["data"]
        if not isinstance(data, list):
            raise TypeError(f"'data' is {type(data).__name__}, not a list")
        if all(isinstance(item, dict) and "index" in item for item in data):
            # The API documents an index per item and no order: put them in order.
            by_index = {int(item["index"]): item["embedding"] for item in data}
            if sorted(by_index) != list(range(len(data))):
                raise ValueError(f"indexes {sorted(by_index)} are not 0..{len(data) - 1}")
            return [by_index[i] for i in range(len(data))]
        return [item["embedding"] for item in data]
