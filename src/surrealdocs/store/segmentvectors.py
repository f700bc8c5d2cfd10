"""The chunks' vectors as a text segment carries them: packed ``float32`` rows in part
records of the text index (``<chunks>_text_vector``, owned by :mod:`.textindex`), and the
exact nearest-neighbour scan over them.

An exact scan of a few hundred thousand vectors is one matrix product: 1.5 ms for SciFact's
17,250 chunks on this machine, where the engine's HNSW graph takes 50 ms for the depth a
hybrid search asks (k 300, ef 600), and it never misses a neighbour. The HNSW index stays
for notebook scopes, for stores whose vectors outgrow :data:`SCAN_MAX_BYTES`, and for the
engine-ranked layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

PART_ROWS = 4096  # vectors per part record (6 MB at 384 dimensions)
PARTS_PER_STATEMENT = 4  # a merge writes a large segment's vectors in statements of this many
SCAN_MAX_BYTES = 1 << 30  # vectors held for scanning; beyond, searches walk the HNSW graph
SCANNED_DISTANCES = ("COSINE", "EUCLIDEAN")


def pack(vectors: Sequence[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """The rows of ``vectors`` (``None`` where a chunk has none) as a float32 matrix and a
    mask of the rows that have one; ``None`` when no row has a vector."""
    present = [v for v in vectors if v is not None]
    if not present:
        return None
    dimension = len(present[0])
    matrix = np.zeros((len(vectors), dimension), dtype=np.float32)
    has = np.zeros(len(vectors), dtype=bool)
    for i, v in enumerate(vectors):
        if v is not None and len(v) == dimension:
            matrix[i] = v
            has[i] = True
    return matrix, has


def part_records(matrix: np.ndarray, has: np.ndarray) -> list[dict[str, Any]]:
    """The part records of a segment's vectors, in order."""
    out = []
    for start in range(0, max(len(matrix), 1), PART_ROWS):
        rows = matrix[start:start + PART_ROWS]
        out.append({"n": len(rows), "dim": int(matrix.shape[1]),
                    "data": np.ascontiguousarray(rows, dtype="<f4").tobytes(),
                    "has": has[start:start + PART_ROWS].astype(np.uint8).tobytes()})
    return out


def part_count(rows: int) -> int:
    return max(1, -(-rows // PART_ROWS))


@dataclass
class VectorSet:
    """One segment's vectors, as stored (``matrix``), with what a scan needs."""

    matrix: np.ndarray  # (n, dimension) float32
    has: np.ndarray  # bool per ordinal
    inverse_norms: np.ndarray  # float32 per ordinal (0 where there is no vector)
    squared_norms: np.ndarray  # float32 per ordinal

    @classmethod
    def of(cls, matrix: np.ndarray, has: np.ndarray) -> VectorSet:
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        squared = np.einsum("ij,ij->i", matrix, matrix)
        norms = np.sqrt(squared)
        inverse = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        return cls(matrix, np.asarray(has, dtype=bool), inverse.astype(np.float32),
                   squared.astype(np.float32))

    @property
    def size(self) -> int:
        return int(self.matrix.nbytes + self.has.nbytes + self.inverse_norms.nbytes
                   + self.squared_norms.nbytes)

    @property
    def dimension(self) -> int:
        return int(self.matrix.shape[1])

    def scores(self, query: np.ndarray, distance: str) -> np.ndarray:
        """Higher is nearer: the cosine similarity, or the negated Euclidean distance
        (``query`` normalised for cosine)."""
        # einsum, not BLAS: as fast here (the scan is bound by memory) on one thread, where
        # OpenBLAS's threads spin after each product and slow the query's embedding and
        # the engine beside it (hybrid p50 30 ms with ``@``, 21 ms with one thread)
        dots = np.einsum("ij,j->i", self.matrix, query)
        if distance == "COSINE":
            out = dots * self.inverse_norms
        else:
            squared = self.squared_norms - 2.0 * dots + float(query @ query)
            out = -np.sqrt(np.maximum(squared, 0.0))
        return np.asarray(out)


def distance_of(score: float, distance: str) -> float:
    """The engine's distance for a scan's score (see :meth:`VectorSet.scores`)."""
    return 1.0 - score if distance == "COSINE" else -score
