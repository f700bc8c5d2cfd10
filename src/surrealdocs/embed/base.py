"""What an embedding model is (:class:`Embedder`), what it may say of itself (its window,
its provenance)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

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


def provenance(embedder: Embedder) -> dict[str, str]:
    """Where an embedder's vectors come from beyond its name (a hosted provider and its
    endpoint, never credentials), for the store's record; empty for local models."""
    value = getattr(embedder, "provenance", None)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}
