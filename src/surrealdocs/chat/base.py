"""What every chat model shares: its options, the streamed request with the one retry
policy of the providers (:class:`~surrealdocs.parts.http_api.RetryPolicy`), failures named
with the provider, endpoint and model (never the API key)."""


from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..errors import ChatModelError
from ..parts.http_api import (
    MAX_SERVER_WAIT,
    RetryPolicy,
    checked_base_url,
    retry_after,
)
from ..parts.secrets_mask import mask

HOW_TO_SET = (
    "set a chat model: --llm openai:MODEL for any OpenAI-compatible server (its URL in"
    " SURREALDOCS_LLM_BASE_URL or OPENAI_BASE_URL, its key in SURREALDOCS_LLM_API_KEY or"
    " OPENAI_API_KEY), or --llm ollama:MODEL (OLLAMA_HOST, default http://127.0.0.1:11434);"
    " SURREALDOCS_LLM sets it for every command")


@dataclass(frozen=True)
class ChatOptions:
    base_url: str
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 120.0  # for the connection and between two pieces of the answer
    retries: int = 3
    deadline: float = 600.0  # for the whole answer: a model that never ends is stopped
    backoff: float = 0.5


class ChatModel:
    """One chat model behind an HTTP API; :meth:`stream` yields the answer's text."""

    provider = ""
    default_base_url = ""
    base_url_env = ""
    default_port: int | None = None  # for a bare host[:port] (OLLAMA_HOST)

    def __init__(self, model: str, options: ChatOptions) -> None:
        self.model = model
        self.options = options
        base = checked_base_url(
            options.base_url, f"the chat model's URL (SURREALDOCS_LLM_BASE_URL, or"
            f" {self.base_url_env}, default {self.default_base_url})",
            default_port=self.default_port)
        self.url = self.endpoint(base)
        self.name = f"{self.provider}:{model}"

    def endpoint(self, base: httpx.URL) -> httpx.URL:
        raise NotImplementedError

    def payload(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        return {"model": self.model, "messages": messages, "stream": True}

    def pieces(self, line: str) -> tuple[str, bool]:
        """The text one streamed line carries, and whether the answer is complete."""
        raise NotImplementedError

    @property
    def where(self) -> str:
        public = self.url.copy_with(userinfo=b"", query=None, fragment=None)
        return f"the {self.provider} chat server at {public} (model {self.model!r})"

    async def stream(self, messages: list[dict[str, str]]) -> AsyncIterator[str]:
        """The answer's text as it comes."""
        headers = {"Accept": "text/event-stream, application/x-ndjson, application/json"}
        if self.options.api_key:
            headers["Authorization"] = f"Bearer {self.options.api_key}"
        timeout = httpx.Timeout(self.options.timeout, connect=min(10.0, self.options.timeout))
        deadline = time.monotonic() + self.options.deadline
        yielded = False
        async with httpx.AsyncClient(timeout=timeout) as client:
            attempt = 0
            while True:
                try:
                    async with client.stream("POST", self.url, json=self.payload(messages),
                                             headers=headers) as response:
                        if response.status_code >= 400:
                            await response.aread()
                            failure = self._failure(response)
                            if RetryPolicy.retryable(response.status_code):
                                raise _Retry(failure, retry_after(response))
                            raise ChatModelError(f"{self.where} {failure}")
                        async for line in response.aiter_lines():
                            if time.monotonic() > deadline:
                                raise ChatModelError(
                                    f"{self.where} did not finish its answer within"
                                    f" {self.options.deadline:g} s")
                            if not line.strip():
                                continue
                            try:
                                text, done = self.pieces(line)
                            except Malformed as exc:
                                raise ChatModelError(
                                    f"{self.where} answered in a shape that is not its"
                                    f" API's ({mask(str(exc), [self.options.api_key])})"
                                ) from None
                            if text:
                                yielded = True
                                yield text
                            if done:
                                return
                        if not yielded:
                            raise ChatModelError(f"{self.where} ended its answer without"
                                                 " any text")
                        return
                except _Retry as retry:
                    failure, wait = str(retry), retry.after
                except (httpx.TimeoutException, httpx.TransportError) as exc:
                    if yielded:  # part of the answer is out: asking again would repeat it
                        raise ChatModelError(f"{self.where} stopped in the middle of its"
                                             f" answer ({type(exc).__name__})") from None
                    failure, wait = f"cannot be reached ({type(exc).__name__})", None
                pause = RetryPolicy(self.options.retries, self.options.backoff).pause(
                    attempt, wait)
                if pause is None or time.monotonic() + pause > deadline:
                    asked = (f"; it asks to retry after {wait:g} s, over {MAX_SERVER_WAIT:g} s"
                             if RetryPolicy.too_long(wait) else "")
                    raise ChatModelError(f"{self.where} {failure}, after {attempt + 1}"
                                         f" attempt{'s' if attempt else ''}{asked}")
                await asyncio.sleep(pause)
                attempt += 1

    def _failure(self, response: httpx.Response) -> str:
        detail = mask(" ".join(response.text.split())[:2000], [self.options.api_key])[:300]
        if response.status_code == 404:
            asked = self.url.copy_with(userinfo=b"", query=None, fragment=None)
            return (f"answered HTTP 404 for POST {asked}: a model it does not know, or no such"
                    f" endpoint (check the base URL) ({detail})")
        if response.status_code in (401, 403):
            return f"refused the API key (HTTP {response.status_code}: {detail})"
        return f"answered HTTP {response.status_code} ({detail})"


class Malformed(Exception):
    """The server answered, but not in its API's shape."""


def json_object(text: str) -> dict[str, Any]:
    """One streamed line as the JSON object it must be; an error object is a failure."""
    try:
        body = json.loads(text)
    except ValueError:
        raise Malformed(f"a line that is not JSON: {text[:80]!r}") from None
    if not isinstance(body, dict):
        raise Malformed(f"JSON that is not an object: {text[:80]!r}")
    if "error" in body:
        raise Malformed(f"an error: {str(body['error'])[:200]}")
    return body


class _Retry(Exception):
    def __init__(self, failure: str, after: float | None) -> None:
        super().__init__(failure)
        self.after = after
