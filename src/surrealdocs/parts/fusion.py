"""Fusion: merging the ranked hits of the BM25 leg and the vector leg into one ranking.

Three methods (``Settings.hybrid_fusion``):

- ``zscore`` (the default): the weighted sum of each leg's scores standardised over its
  candidates (mean 0, standard deviation 1). Chosen on the dev split; BENCHMARKS.md shows
  the comparison (Bruch, Gai and Ingber, ACM TOIS 2023, found the same in and out of domain).
- ``minmax``: the same with scores scaled to [0, 1].
- ``rrf``: reciprocal rank fusion, ``w / (k + rank)`` per leg (Cormack et al. 2009); it
  ignores how far apart the scores are, and copes best with very few candidates.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..config import FUSIONS
from ..errors import ConfigurationError
from .results import Hit

RRF_K = 60


def fuse(text_hits: list[Hit], vector_hits: list[Hit], *, limit: int, method: str = "zscore",
         k: int = RRF_K, weights: tuple[float, float] = (1.0, 1.0),
         per_document: bool = False) -> list[Hit]:
    """Merge the ranked hits of the two legs into one ranking of at most ``limit`` hits.

    Hits are the same when they are the same chunk, or with ``per_document`` the same
    document; the representative chunk of a document is the one its better leg found. A hit
    missing from a leg adds nothing to RRF, and counts as that leg's lowest candidate for
    ``minmax`` and ``zscore``. Ties are broken by the best rank, then the id, so the order is
    deterministic.
    """
    if method not in FUSIONS:
        raise ConfigurationError(f"fusion must be one of {', '.join(FUSIONS)}, got {method!r}")

    def key(hit: Hit) -> str:
        return hit.document_id if per_document else hit.chunk_id

    fused: dict[str, Hit] = {}
    for hit in [*text_hits, *vector_hits]:
        base = fused.get(key(hit))
        if base is None:
            fused[key(hit)] = hit
            continue
        if hit.text_rank is not None and base.text_rank is None:
            base.text_rank, base.text_score = hit.text_rank, hit.text_score
        if hit.vector_rank is not None and base.vector_rank is None:
            base.vector_rank, base.vector_score = hit.vector_rank, hit.vector_score
            if per_document and hit.vector_rank < (base.text_rank or hit.vector_rank + 1):
                # the vector leg ranks this document higher: show the chunk it found
                fused[key(hit)] = _with_ranks(hit, base)
    w_text, w_vector = weights
    if method == "rrf":
        for hit in fused.values():
            hit.score = ((w_text / (k + hit.text_rank) if hit.text_rank else 0.0)
                         + (w_vector / (k + hit.vector_rank) if hit.vector_rank else 0.0))
    else:
        scale = minmax if method == "minmax" else zscore
        text_norm = scale([h.text_score for h in text_hits if h.text_score is not None])
        vector_norm = scale([h.vector_score for h in vector_hits if h.vector_score is not None])
        for hit in fused.values():
            hit.score = (w_text * text_norm(hit.text_score)
                         + w_vector * vector_norm(hit.vector_score))
    ordered = sorted(
        fused.values(),
        key=lambda h: (-h.score, min(r for r in (h.text_rank, h.vector_rank) if r), key(h)),
    )[:limit]
    for hit in ordered:  # shown in 0-1, the order kept (see relevance)
        hit.score = relevance(hit.score, method, weights, k)
    return ordered


def relevance(fused: float, method: str, weights: tuple[float, float], k: int) -> float:
    """A fused score in 0-1, in the same order. ``zscore``: the logistic of the weighted sum
    of the legs' z-scores over the weights' norm (0.5: an average candidate of both legs;
    0.84, about one standard deviation above; a hit one leg missed counts as that leg's
    lowest candidate). ``minmax``: the weighted mean of the legs' min-max scores. ``rrf``:
    the sum over the most it can be (both legs' first)."""
    w_text, w_vector = weights
    if method == "zscore":
        norm = math.hypot(w_text, w_vector) or 1.0
        return 1.0 / (1.0 + math.exp(-1.7 * fused / norm))
    if method == "minmax":
        return fused / ((w_text + w_vector) or 1.0)
    return fused / (((w_text + w_vector) / (k + 1)) or 1.0)


def _with_ranks(hit: Hit, other: Hit) -> Hit:
    hit.text_rank = hit.text_rank or other.text_rank
    hit.text_score = hit.text_score if hit.text_score is not None else other.text_score
    hit.vector_rank = hit.vector_rank or other.vector_rank
    hit.vector_score = hit.vector_score if hit.vector_score is not None else other.vector_score
    return hit


def minmax(scores: list[float]) -> Callable[[float | None], float]:
    """Scaling to [0, 1] over ``scores``; a missing score is 0 (the lowest)."""
    if not scores:
        return lambda s: 0.0
    low, high = min(scores), max(scores)
    span = high - low

    def norm(s: float | None) -> float:
        if s is None:
            return 0.0
        return (s - low) / span if span > 0 else 1.0

    return norm


def zscore(scores: list[float]) -> Callable[[float | None], float]:
    """Standardising over ``scores``; a missing score counts as the lowest one."""
    if not scores:
        return lambda s: 0.0
    mean = float(np.mean(scores))
    std = float(np.std(scores))
    floor = (min(scores) - mean) / std if std > 0 else 0.0

    def norm(s: float | None) -> float:
        if s is None:
            return floor
        return (s - mean) / std if std > 0 else 0.0

    return norm
