"""A rerank server (``rerank:MODEL``): the request Cohere, Jina, Voyage, Mixedbread, TEI,
vLLM and Infinity share. Retried as every provider is (``parts.http_api.RetryPolicy``:
429, 5xx, timeouts), within the search's ``rerank_timeout``."""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Sequence
from typing import Any

import httpx

from ..config import Settings
from ..parts.http_api import RetryPolicy, checked_base_url
from ..parts.http_api import retry_after as server_wait
from ..parts.secrets_mask import mask
from .base import RerankError, in_batches, unit

BATCH = 64  # passages in one request
BASE_URL_ENV = "SURREALDOCS_RERANK_BASE_URL"


class RerankService:
    def __init__(self, model: str, settings: Settings) -> None:
        self.name = f"rerank:{model}"
        self.model = model
        base = settings.rerank_base_url or os.environ.get(BASE_URL_ENV) or ""
        if not base:
            from ..errors import ConfigurationError

            raise ConfigurationError(
                "rerank:MODEL needs the rerank server's address: SURREALDOCS_RERANK_BASE_URL"
                " (e.g. https://api.cohere.com/v2, http://localhost:8080 for TEI)")
        self.url = str(checked_base_url(base, "rerank_base_url")).rstrip("/") + "/rerank"
        self.key = settings.rerank_api_key
        self.timeout = settings.rerank_timeout
        self.policy = RetryPolicy(retries=2, backoff=0.2)
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        self._client = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(
            self.timeout, connect=min(5.0, self.timeout)))

    async def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        return await in_batches(texts, BATCH, lambda batch: self._batch(query, batch))

    async def _batch(self, query: str, texts: list[str]) -> list[float]:
        body = {"model": self.model, "query": query, "documents": texts, "top_n": len(texts)}
        attempt = 0
        while True:
            asked: float | None = None
            try:
                response = await self._client.post(self.url, json=body)
            except httpx.HTTPError as exc:
                failure = f"cannot reach {self.url}: {type(exc).__name__}"
            else:
                if response.status_code == 200:
                    return _scores(response, len(texts))
                failure = f"{self.url} answered {response.status_code}"
                if not RetryPolicy.retryable(response.status_code):
                    raise RerankError(mask(f"{failure}: {response.text[:200]}", [self.key]))
                asked = server_wait(response)
            delay = self.policy.pause(attempt, asked)
            if delay is None:
                raise RerankError(failure)
            attempt += 1
            await asyncio.sleep(delay)

    async def close(self) -> None:
        await self._client.aclose()


def _scores(response: httpx.Response, count: int) -> list[float]:
    """The scores of a rerank answer, in the documents' order; garbage is a RerankError."""
    try:
        data: Any = response.json()
    except ValueError:
        raise RerankError("the rerank server answered no JSON") from None
    results = data.get("results") if isinstance(data, dict) else data
    if not isinstance(results, list):
        raise RerankError("the rerank server's answer holds no results list")
    scores: list[float | None] = [None] * count
    for item in results:
        if not isinstance(item, dict):
            raise RerankError("a rerank result is not an object")
        index, score = item.get("index"), item.get("relevance_score", item.get("score"))
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count \
                or isinstance(score, bool) or not isinstance(score, (int, float)) \
                or not math.isfinite(score):
            raise RerankError(f"a rerank result is not an index and a score: {item!r:.120}")
        scores[index] = unit(float(score))
    if any(s is None for s in scores):
        raise RerankError(f"the rerank server scored {sum(s is not None for s in scores)}"
                          f" of {count} passages")
    return [float(s) for s in scores if s is not None]
