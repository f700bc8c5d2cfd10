"""How likely a hit is to be relevant: a score that depends on the query and the chunk
alone, never on the other candidates, the limit, the filters, per-document grouping or a
notebook's scope, so that one cut-off means the same for every search.

Two pieces of evidence are absolute:

- **similarity**: the cosine similarity of the query's vector and the chunk's, as the
  store's vector leg computes it;
- **coverage**: how much of the query the chunk holds: the inverse document frequencies
  of the query's terms that occur in the chunk over those of all the query's terms (a
  term no chunk holds weighs the most, so a query about something the store does not
  know covers little of itself anywhere).

A logistic model turns them into a probability of relevance, fitted on the judgements of
four collections of other fields (SciFact dev, MED, CACM, NPL) and checked on each one left
out (``bench/relevance_score.py``; BENCHMARKS.md "Know when nothing matches"). The
similarity's scale belongs to the embedding model: the bundled model has its own fitted
values; any other model is judged by how far the chunk's similarity stands above the
query's mean similarity to a fixed sample of the store's chunks (its *background*), which
takes away a model's own offset (not its spread), with coefficients fitted the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Calibration:
    """Three logistic models, for the evidence a search has: both (``logit p = intercept +
    similarity·s + coverage·c + both·s·c``), the text alone (``text[0] + text[1]·c``: text
    search) or the vector alone (``vector[0] + vector[1]·s``: a search by a vector without
    query text)."""

    intercept: float
    similarity: float
    coverage: float
    both: float
    text: tuple[float, float]
    vector: tuple[float, float]
    # the similarity is taken as how far it stands above the query's mean similarity to a
    # fixed sample of the store's chunks, rather than as it is
    against_background: bool = False

    def probability(self, similarity: float | None, coverage: float | None) -> float:
        """The probability of relevance from the evidence there is (none: 0)."""
        if similarity is None and not coverage:  # no evidence at all
            return 0.0
        if similarity is None:
            z = self.text[0] + self.text[1] * (coverage or 0.0)
        elif coverage is None:
            z = self.vector[0] + self.vector[1] * similarity
        else:
            z = (self.intercept + self.similarity * similarity + self.coverage * coverage
                 + self.both * similarity * coverage)
        return _logistic(z)


# fitted by bench/relevance_score.py --fit (all four collections; see BENCHMARKS.md)
BUNDLED = Calibration(intercept=-3.2693, similarity=4.5222, coverage=-0.7871, both=3.3416,
                      text=(-1.0795, 1.6348), vector=(-3.7892, 6.1857))
BACKGROUND = Calibration(intercept=-2.9891, similarity=5.0589, coverage=0.7627, both=0.9981,
                         text=(-1.0795, 1.6348), vector=(-2.9086, 5.8788),
                         against_background=True)
CALIBRATIONS: dict[str, Calibration] = {"all-minilm-l6-v2": BUNDLED}
# the feature-hashing models (tests, smoke runs) embed words, not meaning: their
# similarity says again what coverage says, so a hit is judged by the text model alone
# (which tells little more than "holds some of the query's words": 0.29 to 0.64)
LEXICAL = Calibration(intercept=BUNDLED.text[0], similarity=0.0, coverage=BUNDLED.text[1],
                      both=0.0, text=BUNDLED.text, vector=BUNDLED.vector)


def calibration_for(model: str, *, background: bool = True) -> Calibration:
    """The fitted values for the embedding model ``model`` (by its name in the store),
    else the ones that measure the similarity against the store's background (where the
    store can measure one: ``background``; else the bundled model's)."""
    known = CALIBRATIONS.get(model.lower())
    if known is not None:
        return known
    if model.lower().startswith("hashing-"):
        return LEXICAL
    return BACKGROUND if background else BUNDLED


def kept(scores: Sequence[float], cutoff: float, floor: float) -> list[bool]:
    """Which hits a search shows, by their scores (best ranked first): none unless one
    reaches ``cutoff`` (the search found something probably relevant); then every hit
    down to ``floor`` (a hit beside a relevant one is often relevant too: the judgements
    of the dev collections hold relevant passages down to that score)."""
    if not any(score >= cutoff for score in scores):
        return [False] * len(scores)
    return [score >= floor for score in scores]


def query_weights(terms: Iterable[str]) -> dict[str, int]:
    """Each analysed query term with how many times the query says it."""
    weights: dict[str, int] = {}
    for term in terms:
        if term:
            weights[term] = weights.get(term, 0) + 1
    return weights


def coverage(weights: Mapping[str, int], idf: Mapping[str, float],
             chunk_terms: Iterable[str]) -> float:
    """The share of the query's IDF mass that the chunk's terms hold (0-1)."""
    total = sum(w * idf.get(t, 0.0) for t, w in weights.items())
    if total <= 0:
        return 0.0
    held = set(chunk_terms)
    return sum(w * idf.get(t, 0.0) for t, w in weights.items() if t in held) / total


def idf_of(df: int, chunks: int) -> float:
    """Lucene's IDF (never zero), as the text index scores with; a term no chunk holds
    weighs the most."""
    return math.log(1.0 + (chunks - df + 0.5) / (df + 0.5))


def _logistic(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)
