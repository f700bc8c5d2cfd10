"""What the clients of model servers (embedding providers, chat models) share: the base URL
they are given, checked; how long a server asks them to wait; when to try again
(:class:`RetryPolicy`, one for every provider)."""

from __future__ import annotations

import email.utils
import random
from dataclasses import dataclass
from datetime import datetime, timezone

import httpx

from ..errors import ConfigurationError

OLLAMA_PORT = 11434  # where Ollama listens unless told otherwise


def checked_base_url(text: str, where: str, *, default_port: int | None = None) -> httpx.URL:
    """``text`` as an http:// or https:// URL (``where`` names the setting it came from).
    With ``default_port``, a bare ``host[:port]`` (as ``OLLAMA_HOST`` may be) is taken as
    ``http://`` with that port."""
    text = text.strip()
    if default_port is not None and "://" not in text:
        url = checked_base_url("http://" + text, where)
        return url if url.port else url.copy_with(port=default_port)
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise ConfigurationError(f"{where} is not a URL: {text!r}") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigurationError(f"{where} must be an http:// or https:// URL, got {text!r}")
    return url


def openai_endpoint(base: httpx.URL, name: str) -> httpx.URL:
    """An OpenAI-compatible server's endpoint ``name`` (``embeddings``,
    ``chat/completions``), read as the OpenAI SDK reads ``OPENAI_BASE_URL``: the base is the
    API root, version included (``https://api.openai.com/v1``, ``https://host/openai/v1``);
    a URL that is just a server (``http://host:8000``) has its API under ``/v1``; the
    endpoint's own path at the end is taken off (``…/v1/embeddings`` is ``…/v1``). The one
    rule for every OpenAI-compatible provider (embeddings, chat)."""
    path = base.path.rstrip("/").removesuffix("/" + name)
    return base.copy_with(path=(path or "/v1") + "/" + name)


def retry_after(response: httpx.Response) -> float | None:
    """Seconds the server asks to wait: ``retry-after-ms`` (OpenAI), ``Retry-After`` as
    seconds or as an HTTP date."""
    ms = response.headers.get("retry-after-ms")
    if ms:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max((when - datetime.now(timezone.utc)).total_seconds(), 0.0)


def backoff(attempt: int, base: float, most: float) -> float:
    """The pause before try ``attempt + 2``: exponential from ``base``, at most ``most``,
    jittered so that clients that failed together do not come back together."""
    return min(base * 2.0 ** attempt, most) * random.uniform(0.5, 1.0)


# Longer waits than this are quota resets, not congestion: better said than slept through.
MAX_SERVER_WAIT = 60.0
MAX_BACKOFF = 30.0


@dataclass(frozen=True)
class RetryPolicy:
    """When a provider's request (embeddings, chat, and those to come) is tried again: after
    a 429, a 5xx, a timeout or a failed connection, ``retries`` more times, pausing as long
    as the server asks (``Retry-After``), else exponentially from ``backoff`` seconds (at most
    :data:`MAX_BACKOFF`, jittered). A server asking for more than :data:`MAX_SERVER_WAIT` is
    not waited for."""

    retries: int = 3
    backoff: float = 0.5

    @staticmethod
    def retryable(status: int) -> bool:
        """Whether an HTTP answer of ``status`` may pass when asked again."""
        return status == 429 or status >= 500

    def pause(self, attempt: int, asked: float | None) -> float | None:
        """Seconds to wait before the try after ``attempt`` (0 for the first), or ``None``
        when there is none: no retry left, or the server asks for too long (see
        :meth:`too_long`)."""
        if attempt >= self.retries or self.too_long(asked):
            return None
        return asked if asked is not None else backoff(attempt, self.backoff, MAX_BACKOFF)

    @staticmethod
    def too_long(asked: float | None) -> bool:
        return asked is not None and asked > MAX_SERVER_WAIT
