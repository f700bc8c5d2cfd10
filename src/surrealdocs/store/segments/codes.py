"""The chunks' vectors as a text segment carries them: int8 codes with a scale per row, in
part records of the text index (``<chunks>_text_vector``, owned by :mod:`.index`), and
the nearest-neighbour scan over them.

A scan of a few hundred thousand vectors is one pass of int8 dot products (simsimd's SIMD
kernels): 1.7 ms for 100,000 384-dimensional vectors on this machine, where float32 took
7.7 ms with numpy and the engine's HNSW graph 50 ms for the depth a hybrid search asks (and
it misses neighbours). Codes of one byte per dimension, a quarter of float32, are also what
the process holds and what the engine caches once it has read them. Each row keeps the
scale of its largest component (symmetric quantization), so a score is off by at most a few
thousandths of a cosine (``tests/test_segment_vectors.py`` bounds it): a row's score is
then computed again from its codes against the unquantized query for the best rows of each
segment, which removes the query's own rounding where the order matters.

The HNSW index stays for notebook scopes, for stores whose vectors outgrow
:data:`SCAN_MAX_BYTES`, and for the engine-ranked layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import simsimd

PART_ROWS = 4096  # vectors per part record (1.5 MB of codes at 384 dimensions)
PARTS_PER_STATEMENT = 4  # a merge writes a large segment's vectors in statements of this many
SCAN_MAX_BYTES = 1 << 30  # codes held for scanning; beyond, searches walk the HNSW graph
SCANNED_DISTANCES = ("COSINE", "EUCLIDEAN")
REFINED_ROWS = 512  # per segment: the best rows by codes, scored again against the query
LEVELS = 127.0  # int8 codes run from -127 to 127
S = TypeVar("S", float, np.ndarray)


def _quantized(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 codes of ``matrix``'s rows and each row's scale (row ≈ codes·scale)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    peak = np.abs(matrix).max(axis=1) if matrix.size else np.zeros(len(matrix), np.float32)
    scales = (peak / LEVELS).astype(np.float32)
    safe = np.where(scales > 0, scales, 1.0).astype(np.float32)
    codes = np.rint(matrix / safe[:, None]).clip(-LEVELS, LEVELS).astype(np.int8)
    return np.ascontiguousarray(codes), scales


def pack(vectors: Sequence[Any]) -> VectorSet | None:
    """The rows of ``vectors`` (``None`` where a chunk has none) as a :class:`VectorSet`;
    ``None`` when no row has a vector."""
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
    return VectorSet.quantize(matrix, has)


def part_records(vectors: VectorSet) -> list[dict[str, Any]]:
    """The part records of a segment's vectors, in order."""
    out = []
    for start in range(0, max(len(vectors.codes), 1), PART_ROWS):
        rows = slice(start, start + PART_ROWS)
        codes = vectors.codes[rows]
        out.append({"n": len(codes), "dim": vectors.dimension,
                    "codes": codes.tobytes(),
                    "scales": vectors.scales[rows].astype("<f4").tobytes(),
                    "has": vectors.has[rows].astype(np.uint8).tobytes()})
    return out


def decode_part(row: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A part record's codes, scales and has-mask (a part written as float32 rows, before
    the codes, is quantized as it is read)."""
    count, dimension = int(row["n"]), int(row["dim"])
    has = np.frombuffer(row["has"], dtype=np.uint8) > 0
    if "codes" in row:
        codes = np.frombuffer(row["codes"], dtype=np.int8).reshape(count, dimension)
        return codes, np.frombuffer(row["scales"], dtype="<f4").astype(np.float32), has
    matrix = np.frombuffer(row["data"], dtype="<f4").reshape(count, dimension)
    codes, scales = _quantized(matrix)
    return codes, scales, has


def part_bytes(record: dict[str, Any]) -> int:
    return sum(len(record[k]) for k in ("codes", "scales", "has"))


def part_count(rows: int) -> int:
    return max(1, -(-rows // PART_ROWS))


@dataclass
class VectorSet:
    """One segment's vectors, as stored (int8 ``codes``, a ``scale`` per row), with what a
    scan needs."""

    codes: np.ndarray  # (n, dimension) int8, C-contiguous
    scales: np.ndarray  # float32 per ordinal: the row is codes * scale
    has: np.ndarray  # bool per ordinal
    inverse_norms: np.ndarray  # float32 per ordinal, of the row as coded (0 without one)
    squared_norms: np.ndarray  # float32 per ordinal

    @classmethod
    def quantize(cls, matrix: np.ndarray, has: np.ndarray) -> VectorSet:
        codes, scales = _quantized(matrix)
        return cls.of(codes, scales, has)

    @classmethod
    def of(cls, codes: np.ndarray, scales: np.ndarray, has: np.ndarray) -> VectorSet:
        codes = np.ascontiguousarray(codes, dtype=np.int8)
        scales = np.asarray(scales, dtype=np.float32)
        squared = (_row_dots(codes) * scales.astype(np.float64) ** 2).astype(np.float32)
        norms = np.sqrt(squared)
        inverse = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        return cls(codes, scales, np.asarray(has, dtype=bool), inverse.astype(np.float32),
                   squared)

    @classmethod
    def concatenate(cls, parts: Sequence[VectorSet]) -> VectorSet:
        return cls(np.ascontiguousarray(np.concatenate([p.codes for p in parts])),
                   np.concatenate([p.scales for p in parts]),
                   np.concatenate([p.has for p in parts]),
                   np.concatenate([p.inverse_norms for p in parts]),
                   np.concatenate([p.squared_norms for p in parts]))

    @classmethod
    def empty(cls, rows: int, dimension: int) -> VectorSet:
        zeros = np.zeros(rows, dtype=np.float32)
        return cls(np.zeros((rows, dimension), dtype=np.int8), zeros, np.zeros(rows, bool),
                   zeros, zeros)

    def take(self, ordinals: np.ndarray) -> VectorSet:
        return VectorSet(np.ascontiguousarray(self.codes[ordinals]), self.scales[ordinals],
                         self.has[ordinals], self.inverse_norms[ordinals],
                         self.squared_norms[ordinals])

    def vector(self, ordinal: int) -> list[float]:
        """The row as the codes give it back."""
        row = self.codes[ordinal].astype(np.float32) * self.scales[ordinal]
        return [float(x) for x in row]

    @property
    def size(self) -> int:
        return int(self.codes.nbytes + self.scales.nbytes + self.has.nbytes
                   + self.inverse_norms.nbytes + self.squared_norms.nbytes)

    @property
    def dimension(self) -> int:
        return int(self.codes.shape[1])

    def scores(self, query: np.ndarray, distance: str) -> np.ndarray:
        """Higher is nearer: the cosine similarity, or the negated Euclidean distance
        (``query`` float32, normalised for cosine), of every row."""
        n = len(self.codes)
        if n == 0:
            return np.zeros(0, dtype=np.float64)
        peak = float(np.abs(query).max())
        step = peak / LEVELS if peak > 0 else 1.0
        coded = np.rint(query / step).astype(np.int8)
        dots = np.asarray(simsimd.cdist(coded[None, :], self.codes, metric="dot",
                                        dtype="int8"))[0] * step * self.scales
        if n > REFINED_ROWS:  # the best rows again, against the query as it is
            best = np.argpartition(-self._from_dots(dots, query, distance),
                                   REFINED_ROWS)[:REFINED_ROWS]
        else:
            best = np.arange(n)
        dots[best] = np.einsum("ij,j->i", self.codes[best].astype(np.float32),
                               query) * self.scales[best]
        return self._from_dots(dots, query, distance)

    def _from_dots(self, dots: np.ndarray, query: np.ndarray, distance: str) -> np.ndarray:
        if distance == "COSINE":
            return np.asarray(dots * self.inverse_norms, dtype=np.float64)
        squared = self.squared_norms - 2.0 * dots + float(query @ query)
        return np.asarray(-np.sqrt(np.maximum(squared, 0.0)), dtype=np.float64)


def _row_dots(codes: np.ndarray) -> np.ndarray:
    """Each row's dot product with itself, exact (int32 sums)."""
    out = np.empty(len(codes), dtype=np.float64)
    for start in range(0, len(codes), PART_ROWS):
        block = codes[start:start + PART_ROWS].astype(np.int32)
        out[start:start + PART_ROWS] = np.einsum("ij,ij->i", block, block)
    return out


def distance_of(score: S, distance: str) -> S:
    """The engine's distance for a scan's score, or an array of them (see
    :meth:`VectorSet.scores`)."""
    return 1.0 - score if distance == "COSINE" else -score
