"""Chat models for answers (``kb.ask``): any OpenAI-compatible chat-completions server
(``openai:MODEL``) or Ollama's chat API (``ollama:MODEL``), streamed token by token.

A request is retried after a 429, a 5xx, a timeout or a refused connection, with
exponential backoff (or the server's ``Retry-After``), until its first token; a failure is a
:class:`~surrealdocs.errors.ChatModelError` that names the provider, endpoint and model,
never the API key.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..config import Settings
from ..errors import ChatModelError, ConfigurationError, ForbiddenError
from ..parts.http_api import (
    OLLAMA_PORT,
    backoff,
    checked_base_url,
    openai_endpoint,
    retry_after,
)
from ..parts.secrets_mask import mask

MAX_BACKOFF = 20.0
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
                            if response.status_code == 429 or response.status_code >= 500:
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
                if attempt >= self.options.retries or time.monotonic() > deadline:
                    raise ChatModelError(f"{self.where} {failure}, after {attempt + 1}"
                                         f" attempt{'s' if attempt else ''}")
                await asyncio.sleep(min(wait, MAX_BACKOFF) if wait is not None else backoff(
                    attempt, self.options.backoff, MAX_BACKOFF))
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
        body = _json_object(data)
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


class OllamaChat(ChatModel):
    provider = "ollama"
    default_base_url = f"http://127.0.0.1:{OLLAMA_PORT}"
    base_url_env = "OLLAMA_HOST"
    default_port = OLLAMA_PORT

    def endpoint(self, base: httpx.URL) -> httpx.URL:
        return base.copy_with(path=base.path.rstrip("/") + "/api/chat")

    def pieces(self, line: str) -> tuple[str, bool]:
        body = _json_object(line)
        message = body.get("message") or {}
        if not isinstance(message, dict) or not isinstance(message.get("content") or "", str):
            raise Malformed(f"a message without text: {line[:80]!r}")
        return str(message.get("content") or ""), bool(body.get("done"))


class Malformed(Exception):
    """The server answered, but not in its API's shape."""


def _json_object(text: str) -> dict[str, Any]:
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


def chat_model(name: str | None, settings: Settings,
               env: Mapping[str, str] | None = None) -> ChatModel:
    """The chat model ``name`` (``openai:MODEL`` / ``ollama:MODEL``; default
    ``settings.llm``), reached as the settings and environment say.

    The configured key (``llm_api_key``) goes to the configured model's server only: a
    model that resolves to another address (another provider's default) is not sent it."""
    env = os.environ if env is None else env
    name = (name or settings.llm or "").strip()
    if not name:
        raise ConfigurationError(f"no chat model to answer with: {HOW_TO_SET}")
    cls, model = _provider(name)
    base = _base_url(cls, settings, env)
    key = settings.llm_api_key
    if key and settings.llm and settings.llm.strip() != name:
        own, _ = _provider(settings.llm.strip())
        if _base_url(own, settings, env) != base:
            key = None
    if not key and cls is OpenAIChat:
        key = env.get("OPENAI_API_KEY")
    return cls(model, ChatOptions(base, key or None, settings.llm_timeout,
                                  settings.llm_retries))


def _provider(name: str) -> tuple[type[ChatModel], str]:
    provider, _, model = name.partition(":")
    classes: dict[str, type[ChatModel]] = {"openai": OpenAIChat, "ollama": OllamaChat}
    if provider not in classes or not model.strip():
        raise ConfigurationError(f"unknown chat model {name!r}: {HOW_TO_SET}")
    return classes[provider], model.strip()


def _base_url(cls: type[ChatModel], settings: Settings, env: Mapping[str, str]) -> str:
    return settings.llm_base_url or env.get(cls.base_url_env) or cls.default_base_url


def allowed_model(requested: str | None, settings: Settings,
                  allowed: Sequence[str] = ()) -> str | None:
    """The chat model a client of a server may have: ``None`` (the server's own,
    ``settings.llm``) when it asks for none, else one of the models the operator allowed
    (``settings.llm`` itself and ``allowed``), named ``MODEL`` or ``PROVIDER:MODEL`` with the
    server's provider. A client never chooses a provider, a host or a key: those stay the
    operator's, and anything else is refused (:class:`ForbiddenError`)."""
    if requested is None or not requested.strip():
        return None
    own = (settings.llm or "").strip()
    provider, _, own_model = own.partition(":")
    if not own:
        raise ConfigurationError(f"no chat model to answer with: {HOW_TO_SET}")
    asked = requested.strip()
    if ":" in asked:
        asked_provider, _, asked = asked.partition(":")
        if asked_provider != provider:
            raise ForbiddenError(f"this server answers with {provider} models only: a request"
                                 " may choose a model the operator allowed, not a provider")
    permitted = {own_model.strip()} | {a.strip().removeprefix(f"{provider}:")
                                        for a in allowed if a.strip()}
    if asked.strip() not in permitted:
        raise ForbiddenError(
            f"the model {asked.strip()!r} is not one this server allows (allowed:"
            f" {', '.join(sorted(permitted))}; the operator adds more with serve --llm-allow)")
    return f"{provider}:{asked.strip()}"
