"""Vectors on the SDK's wire. The SDK encodes a list of floats one float at a time in Python
(about 1.2 µs each: half a millisecond for a 384-dimensional vector, more than the engine
takes to store it). A :class:`PackedVector` goes out as the very same CBOR, an array of
float64 values, built by numpy in one call. It is registered with the SDK's encoder table
(``surrealdb.cbor._encoder.default_encoders``, this SDK's extension point for types); an SDK
without that table gets plain lists (:func:`wire_vector`), and ``tests/test_archive.py``
checks that packed vectors are stored bit for bit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

_FLOAT64 = 0xFB  # the CBOR head of a float64 value
_ITEM = np.dtype([("head", "u1"), ("value", ">f8")])


class PackedVector:
    """A vector as float64 values, encoded in one call; reads like a sequence of floats."""

    __slots__ = ("values",)

    def __init__(self, values: Any) -> None:
        self.values = np.asarray(values, dtype=np.float64).reshape(-1)

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def __iter__(self) -> Iterator[float]:
        return iter(self.values.tolist())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.values if dtype is None else self.values.astype(dtype)

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, (list, PackedVector)) \
            else NotImplemented

    __hash__ = None  # type: ignore[assignment]


def _encode(encoder: Any, vector: PackedVector) -> None:
    items = np.empty(len(vector), dtype=_ITEM)
    items["head"] = _FLOAT64
    items["value"] = vector.values
    encoder.encode_length(4, len(vector))  # major type 4: an array
    encoder.write(items.tobytes())


try:
    from surrealdb.cbor._encoder import default_encoders

    default_encoders[PackedVector] = _encode
    PACKED = True
except (ImportError, AttributeError, TypeError):  # another SDK: plain lists
    PACKED = False


def wire_vector(vector: Any) -> Any:
    """A vector as the store is sent it: packed where the SDK allows, else a list."""
    if vector is None or isinstance(vector, PackedVector):
        return vector
    return PackedVector(vector) if PACKED else [float(x) for x in vector]
