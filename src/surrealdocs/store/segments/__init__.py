"""The segment engine: the text index surrealdocs keeps in SurrealDB records (issue 28).

- :mod:`.index`: :class:`TextIndex`, writes segments, ranks BM25, scans vectors.
- :mod:`.postings`: a segment as built, its decoded records (the map of its chunks, its
  blocks of postings), the live view a search reads, a search's ranking, the cache, leases.
- :mod:`.reader`: the live view of the segments and their decoded records, cached.
- :mod:`.maintenance`: merges, rebuilds and checks.
- :mod:`.vectors`: the int8-coded vectors of a view, decoded and scanned.
- :mod:`.codes`: int8 codes of vectors and their scores.
"""

from .index import TextIndex

__all__ = ["TextIndex"]
