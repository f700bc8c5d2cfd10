"""Signed feature hashing of word unigrams: a model-free embedder for tests and smoke runs."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from ..errors import ConfigurationError
from .vectors import Vectors

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    def __init__(self, dimension: int = 256) -> None:
        if not 8 <= dimension <= 8192:
            raise ConfigurationError(
                f"hashing dimension must be from 8 to 8192, got {dimension}")
        self.dimension = dimension
        self.name = f"hashing-{dimension}"

    def _vector(self, text: str) -> Vectors:
        vec = np.zeros(self.dimension, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            h = int.from_bytes(digest, "little")
            vec[h % self.dimension] += 1.0 if (h >> 63) & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            vec[0] = 1.0  # empty text: a fixed unit vector, so cosine stays defined
            return vec
        return vec / norm

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text: str) -> Vectors:
        return self._vector(text)
