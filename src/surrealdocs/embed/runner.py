"""An embedder used from async code (:class:`EmbeddingRunner`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from ..errors import DimensionMismatchError
from .base import Embedder
from .vectors import Vectors


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
