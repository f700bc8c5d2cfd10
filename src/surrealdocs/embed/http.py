"""Hosted embedding providers over HTTP: what an OpenAI-compatible server and Ollama share.

An :class:`HTTPEmbedder` posts texts in batches of ``batch_size`` to one endpoint, with at
most ``concurrency`` requests in flight (shared by every thread that uses the embedder). It
retries 429s, 5xx answers, timeouts and connection errors with exponential backoff, or after
the server's ``Retry-After``; checks that every answer holds one vector per text, all of the
model's dimension; and L2-normalises the vectors. The dimension comes from the options or
from one probe request when the embedder is made. Whatever fails is an
:class:`EmbeddingProviderError` that names the provider, endpoint and model, never the API
key. Subclasses say where to post, what to send and where the vectors are in the answer.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import httpx
import numpy as np

from ..config import Settings
from ..errors import ConfigurationError, EmbeddingProviderError
from ..parts.http_api import MAX_SERVER_WAIT, RetryPolicy, checked_base_url
from ..parts.http_api import retry_after as server_wait
from ..parts.secrets_mask import mask
from .vectors import Vectors

log = logging.getLogger(__name__)

PROBE_TEXT = "surrealdocs dimension probe"
_DETAIL_CHARS = 300

E = TypeVar("E", bound="HTTPEmbedder")


@dataclass(frozen=True)
class ProviderOptions:
    """Where a provider listens and how hard to try. ``api_key`` stays out of ``repr``."""

    base_url: str
    api_key: str | None = field(default=None, repr=False)
    batch_size: int = 32
    concurrency: int = 4
    timeout: float = 60.0
    retries: int = 4
    backoff: float = 0.5
    dimension: int | None = None


class HTTPEmbedder:
    """An :class:`~surrealdocs.embed.Embedder` whose model runs behind an HTTP API.

    ``name`` is ``PROVIDER:MODEL`` (what the store records); ``provenance`` holds the
    provider and the endpoint without credentials, for the store's record as well.
    """

    provider: ClassVar[str]
    default_base_url: ClassVar[str]
    base_url_env: ClassVar[str]
    api_key_env: ClassVar[str | None] = None

    name: str
    dimension: int
    model: str
    url: str
    endpoint: str
    provenance: dict[str, str]

    _instances: ClassVar[dict[tuple[type[HTTPEmbedder], str, ProviderOptions],
                              HTTPEmbedder]] = {}
    _instances_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, model: str, options: ProviderOptions) -> None:
        if not model:
            raise ConfigurationError(
                f"{self.provider}: wants a model name, e.g. {self.provider}:MODEL")
        self.model = model
        self.name = f"{self.provider}:{model}"
        self.options = options
        base = self.parse_base_url(options.base_url)
        self.url = str(self.endpoint_url(base))
        self.endpoint = str(base.copy_with(userinfo=b"", query=None, fragment=None)).rstrip("/")
        self.provenance = {"provider": self.provider, "endpoint": self.endpoint}
        headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(options.timeout))
        self._slots = threading.BoundedSemaphore(options.concurrency)
        self._pool = ThreadPoolExecutor(max_workers=options.concurrency,
                                        thread_name_prefix=f"surrealdocs-{self.provider}")
        self.dimension = options.dimension or 0
        if not self.dimension:
            try:
                self.dimension = int(self._embed_batch([PROBE_TEXT]).shape[1])
            except BaseException:
                self.close()
                raise

    # What subclasses define.

    @classmethod
    def parse_base_url(cls, base_url: str) -> httpx.URL:
        """The configured base URL, checked."""
        return checked_base_url(base_url, cls._where())

    def endpoint_url(self, base: httpx.URL) -> httpx.URL:
        """The URL texts are posted to."""
        raise NotImplementedError

    def payload(self, texts: list[str]) -> dict[str, Any]:
        """The JSON body asking for the vectors of ``texts`` (the same for both APIs)."""
        return {"model": self.model, "input": texts}

    def parse(self, body: Any) -> list[Any]:
        """The vectors in an answer's JSON body, in the order of the texts sent."""
        raise NotImplementedError

    # Making one.

    @classmethod
    def options_from(cls, settings: Settings,
                     env: Mapping[str, str] | None = None) -> ProviderOptions:
        """Options from ``settings``; base URL and key fall back to the provider's usual
        environment variables (``env``, default ``os.environ``), then to its default URL."""
        env = os.environ if env is None else env
        key_env = env.get(cls.api_key_env) if cls.api_key_env else None
        return ProviderOptions(
            base_url=settings.embed_base_url or env.get(cls.base_url_env) or cls.default_base_url,
            api_key=settings.embed_api_key or key_env or None,
            batch_size=settings.embed_batch_size,
            concurrency=settings.embed_concurrency,
            timeout=settings.embed_timeout,
            retries=settings.embed_retries,
            backoff=settings.embed_backoff,
            dimension=settings.embed_dimension,
        )

    @classmethod
    def shared(cls: type[E], model: str, settings: Settings) -> E:
        """The embedder for ``model`` with these settings, made (and probed) once per
        process; a failed probe is not remembered."""
        key = (cls, model, cls.options_from(settings))
        with cls._instances_lock:
            found = cls._instances.get(key)
            if found is None:
                found = cls._instances[key] = cls(model, key[2])
        assert isinstance(found, cls)
        return found

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(name={self.name!r}, endpoint={self.endpoint!r}, "
                f"dimension={self.dimension})")

    # The Embedder interface.

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        size = self.options.batch_size
        batches = [texts[i:i + size] for i in range(0, len(texts), size)]
        if len(batches) == 1:
            return self._embed_batch(batches[0])
        futures = [self._pool.submit(self._embed_batch, batch) for batch in batches]
        wait(futures, return_when=FIRST_EXCEPTION)
        for future in futures:
            error = future.exception() if future.done() else None
            if error is not None:
                _cancel(futures)
                raise error
        return np.concatenate([f.result() for f in futures])

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self._embed_batch([text])[0]
        return vector

    # One batch.

    def _embed_batch(self, texts: list[str]) -> Vectors:
        body = self._post(self.payload(texts))
        try:
            raw = self.parse(body)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self._error(f"answered in an unexpected shape ({exc.__class__.__name__}: "
                              f"{exc}); is it an {self.provider} API?") from exc
        return self._vectors(raw, len(texts))

    def _vectors(self, raw: list[Any], count: int) -> Vectors:
        if len(raw) != count:
            raise self._error(f"returned {len(raw)} vectors for {count} texts")
        try:
            array = np.asarray(raw, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise self._error(
                "returned vectors that are not lists of numbers of one length") from exc
        if array.ndim != 2 or array.shape[1] == 0:
            raise self._error(f"returned vectors of shape {array.shape}, not (texts, dimension)")
        if self.dimension and array.shape[1] != self.dimension:
            origin = ("embed_dimension" if self.options.dimension
                      else "its first answer")
            raise self._error(
                f"returned vectors of {array.shape[1]} dimensions, but the model's have "
                f"{self.dimension} (from {origin}): the model behind the name changed, or "
                "the server mixes models")
        if not np.isfinite(array).all():
            raise self._error("returned vectors with NaN or infinite values")
        norms = np.linalg.norm(array, axis=1, keepdims=True)
        if (norms == 0).any():
            raise self._error("returned an all-zero vector, which has no direction")
        normalised: Vectors = (array / norms).astype(np.float32)
        return normalised

    def _post(self, payload: dict[str, Any]) -> Any:
        """The JSON answer to ``payload``, retrying what may pass."""
        attempt = 0
        while True:
            retry_after: float | None = None
            status: int | None = None
            try:
                with self._slots:
                    response = self._client.post(self.url, json=payload)
            except httpx.TimeoutException as exc:
                failure = f"no answer within {self.options.timeout:g} s ({_name(exc)})"
                unreachable = isinstance(exc, httpx.ConnectTimeout)
            except httpx.TransportError as exc:  # refused, reset, DNS, closed mid-answer
                failure = f"{_name(exc)}: {self._scrub(str(exc)) or 'no details'}"
                unreachable = isinstance(exc, httpx.ConnectError)
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return self._json(response)
                if not RetryPolicy.retryable(status):
                    raise self._refusal(response)
                failure = f"HTTP {status} {response.reason_phrase}{self._detail(response)}"
                unreachable = False
                retry_after = server_wait(response)
            attempts = f"{attempt + 1} attempt" + ("s" if attempt else "")
            policy = RetryPolicy(self.options.retries, self.options.backoff)
            if policy.too_long(retry_after):
                raise self._error(f"asks to retry after {retry_after:g} s ({failure}); giving "
                                  f"up rather than waiting over {MAX_SERVER_WAIT:g} s",
                                  status=status)
            delay = policy.pause(attempt, retry_after)
            if delay is None:
                if unreachable:
                    raise self._error(
                        f"cannot be reached: {failure}, after {attempts}. Is it running? Its "
                        f"URL comes from {self._where()}", status=status)
                verb = "kept failing" if attempt else "failed"
                raise self._error(f"{verb}: {failure}, after {attempts}", status=status)
            log.warning("%s embedding request to %s failed (%s); retry %d/%d in %.2f s",
                        self.name, self.endpoint, failure, attempt + 1, self.options.retries,
                        delay)
            self.sleep(delay)
            attempt += 1

    def sleep(self, seconds: float) -> None:
        """The pause between two tries (a test counts them instead)."""
        time.sleep(seconds)

    @classmethod
    def close_shared(cls) -> None:
        """Close and forget every shared instance (:meth:`shared`)."""
        with cls._instances_lock:
            for embedder in cls._instances.values():
                embedder.close()
            cls._instances.clear()

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            kind = response.headers.get("content-type", "no content type")
            raise self._error(f"answered HTTP {response.status_code} with something that is "
                              f"not JSON ({kind}); is {self.url_public} an {self.provider} "
                              "API?", status=response.status_code) from exc

    def _refusal(self, response: httpx.Response) -> EmbeddingProviderError:
        """The error for an answer that retrying will not change (4xx but 429, 3xx)."""
        status = response.status_code
        detail = self._detail(response)
        http = f"HTTP {status} {response.reason_phrase}{detail}"
        if status in (401, 403):
            key = (f"SURREALDOCS_EMBED_API_KEY (or {self.api_key_env})" if self.api_key_env
                   else "SURREALDOCS_EMBED_API_KEY")
            told = ("refused the API key" if self.options.api_key
                    else "wants an API key, and none was set")
            return self._error(f"{told} ({http}); set the right one in {key}", status=status)
        if status == 404:
            return self._error(
                f"does not know the model {self.model!r} ({http} for POST "
                f"{self.url_public}){self.missing_model_hint()}; check the model name, and "
                f"that the base URL ({self._where()}) points at the API", status=status)
        if 300 <= status < 400:
            where = response.headers.get("location", "elsewhere")
            return self._error(f"redirects to {where} ({http}); use that as the base URL",
                               status=status)
        return self._error(f"refused the request ({http})", status=status)

    def missing_model_hint(self) -> str:
        """Said after "does not know the model": how to get it, if there is a way."""
        return ""

    @property
    def url_public(self) -> str:
        """The POST URL without credentials or query."""
        return str(httpx.URL(self.url).copy_with(userinfo=b"", query=None, fragment=None))

    def _detail(self, response: httpx.Response) -> str:
        """The server's own words about a failure, shortened and without the key."""
        text = ""
        try:
            body = response.json()
        except ValueError:
            text = response.text
        else:
            text = _message(body) or response.text
        text = self._scrub(" ".join(text.split()))
        if len(text) > _DETAIL_CHARS:
            text = text[:_DETAIL_CHARS] + "…"
        return f": {text}" if text else ""

    def _scrub(self, text: str) -> str:
        return mask(text, [self.options.api_key])

    def _error(self, what: str, *, status: int | None = None) -> EmbeddingProviderError:
        return EmbeddingProviderError(
            f"the {self.provider} embedding server at {self.endpoint} (model "
            f"{self.model!r}) {self._scrub(what)}", status=status)

    @classmethod
    def _where(cls) -> str:
        return (f"SURREALDOCS_EMBED_BASE_URL (or {cls.base_url_env}, default "
                f"{cls.default_base_url})")


def _message(body: Any) -> str:
    """The error text in the usual error bodies: OpenAI's ``{"error": {"message"}}``,
    Ollama's ``{"error": "..."}``, vLLM's ``{"message"}``, FastAPI's ``{"detail"}``."""
    if not isinstance(body, dict):
        return ""
    error = body.get("error")
    if isinstance(error, dict):
        error = error.get("message")
    for value in (error, body.get("message"), body.get("detail")):
        if isinstance(value, str) and value:
            return value
    return ""


def _name(exc: BaseException) -> str:
    return type(exc).__name__


def _cancel(futures: list[Future[Vectors]]) -> None:
    for future in futures:
        future.cancel()
