"""What a reranker is: texts in, a 0-1 score for each out."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol


class RerankError(Exception):
    """The reranker gave no usable answer (down, slow, refused, garbage): the search keeps
    its first stage's order and says why."""


class Reranker(Protocol):
    name: str

    async def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """How relevant each text is to ``query``, 0-1, in the texts' order."""
        ...

    async def close(self) -> None:
        ...


def unit(score: float) -> float:
    """A reranker's score as 0-1: kept when it is one already (Cohere, Jina, Voyage), else
    read as a logit (TEI and vLLM may answer raw logits) and squashed."""
    if 0.0 <= score <= 1.0:
        return score
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, score))))


async def in_batches(texts: Sequence[str], size: int,
                     score: Callable[[list[str]], Awaitable[list[float]]]) -> list[float]:
    """``score`` over ``texts`` in batches of ``size``, the scores in the texts' order."""
    out: list[float] = []
    for start in range(0, len(texts), size):
        out += await score(list(texts[start:start + size]))
    return out
