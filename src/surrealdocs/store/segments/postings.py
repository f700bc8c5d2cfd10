"""The text index's pieces (:mod:`.index` writes and searches them, :mod:`.maintenance`
merges and rebuilds them): a segment as built (:class:`Built`), its decoded records (its map
of chunks, its blocks of postings), the live view of the segments a search reads, a search's
ranking, and the decoded-record cache."""

from __future__ import annotations

import math
import os
import secrets
import socket
import time
import zlib
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from ...parts.analyzer import STOP_WORDS, Analyzer
from ...parts.filters import DocumentSet
from .codes import (
    VectorSet,
    pack,
    part_count,
)

T = TypeVar("T")
K = TypeVar("K")
D = TypeVar("D", "Block", "SegmentMap")
BLOCK_POSTINGS = 32_768  # postings per block record of a large segment
BLOCKS_PER_STATEMENT = 16  # a merge writes a large segment in statements of this many
LEVEL_BASE = 10  # level 0 holds segments under 10 chunks, level 1 under 100, ...
MERGE_FANOUT = 10  # segments of one level merged into one of the next
EXPUNGE_DEAD_RATIO = 0.2  # a segment with more dead chunks is rewritten alone
LEASE_SECONDS = 300


def lease_owner() -> str:
    """Who holds a lease: this machine, this process, and a token of this index."""
    return f"{socket.gethostname()}:{os.getpid()}-{secrets.token_hex(4)}"


def holder_gone(holder: str) -> bool:
    """Whether the process that holds a lease (:func:`lease_owner`) is of this machine and
    no longer runs. A holder of another machine, or written before holders named their
    machine, is never known to be gone."""
    host, _, rest = holder.rpartition(":")
    pid = rest.split("-", 1)[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it runs, as another user
        return False
    return False
CACHE_BYTES = 256 * 1024 * 1024
RANKED_CACHE = 8  # rankings of recent searches, while nothing changes
BACKGROUND_ROWS = 4096  # live vectors sampled per view: a query's similarity to the store
POSTINGS_CACHE_BYTES = 128 * 1024 * 1024  # terms' postings gathered over the live view
REBUILD_PAGE = 5_000
STALE = "surrealdocs: text segments changed"
DAMAGED = ("the text index of {url} is damaged ({what}); rebuild it from the chunks:"
           " surrealdocs rebuild-index")


def new_segment_key() -> str:
    """Time-ordered and unique across processes."""
    return f"{time.time_ns():016x}{secrets.token_hex(4)}"


def level_of(chunks: int) -> int:
    return 0 if chunks < LEVEL_BASE else int(math.log10(chunks / LEVEL_BASE)) + 1


# ----- building a segment ------------------------------------------------------------
@dataclass
class Built:
    """A segment's content, ready to write."""

    key: str
    keys: list[str]  # chunk key per ordinal
    documents: list[Any] | None  # document key per ordinal (None: not known)
    lengths: np.ndarray  # terms per ordinal (u4)
    origins: list[str]  # the segments the chunks were first written in
    origin_of: np.ndarray  # index into origins per ordinal (u4)
    terms: list[str]  # the vocabulary
    term_of: np.ndarray  # per posting, sorted by (term, ordinal)
    ords: np.ndarray
    tfs: np.ndarray
    # the chunks' vectors and which have one; None: none has (vectors_known: whether that
    # is known, false for a merge of segments written before segments carried vectors)
    vectors: VectorSet | None = None
    vectors_known: bool = True

    @property
    def n(self) -> int:
        return len(self.keys)

    @property
    def vector_parts(self) -> int:
        return part_count(self.n) if self.vectors is not None else 0

    def header(self, live: bool) -> dict[str, Any]:
        return {"n": self.n, "total": int(self.lengths.sum()), "blocks": self.block_count,
                "postings": len(self.ords), "level": level_of(self.n), "live": live,
                "vparts": self.vector_parts,
                "vectors": (self.vectors is not None) if self.vectors_known else None}

    @property
    def block_count(self) -> int:
        return max(1, math.ceil(len(self.ords) / BLOCK_POSTINGS))

    def map_record(self) -> dict[str, Any]:
        return {"keys": self.keys, "docs": self.documents,  # NONE when not known
                "lengths": self.lengths.astype("<u4").tobytes(),
                "origins": self.origins,
                "origin_of": self.origin_of.astype("<u4").tobytes()}

    def blocks(self) -> list[tuple[int, dict[str, Any]]]:
        """(block number, record) of each block."""
        count = self.block_count
        vocabulary = len(self.terms)
        block_of_term = np.fromiter((zlib.crc32(t.encode()) % count for t in self.terms),
                                    dtype=np.int64, count=vocabulary)
        df = np.bincount(self.term_of, minlength=vocabulary)
        term_order = np.argsort(block_of_term, kind="stable")
        posting_order = np.argsort(block_of_term[self.term_of], kind="stable")
        term_bounds = np.searchsorted(block_of_term[term_order], np.arange(count + 1))
        posting_counts = np.bincount(block_of_term, weights=df, minlength=count).astype(np.int64)
        posting_bounds = np.concatenate(([0], np.cumsum(posting_counts)))
        ords = self.ords[posting_order].astype("<u4")
        tfs = np.minimum(self.tfs[posting_order], 65535).astype("<u2")
        out = []
        for b in range(count):  # every block is written, empty or not: a search that
            # misses one knows the segment is gone (merged away while it read)
            members = term_order[term_bounds[b]:term_bounds[b + 1]]
            lo, hi = posting_bounds[b], posting_bounds[b + 1]
            out.append((b, {"terms": "\n".join(self.terms[t] for t in members),
                            "counts": df[members].astype("<u4").tobytes(),
                            "ords": ords[lo:hi].tobytes(), "tfs": tfs[lo:hi].tobytes()}))
        return out


NO_TERM = -1  # a word that gives no term
STOP_TERM = -2  # a stop word: counted in the length, not indexed


def build(key: str, keys: list[str], documents: list[Any], texts: Sequence[str],
          analyzer: Analyzer, vectors: Sequence[Any] | None = None) -> Built:
    """The segment of these chunks (each its own origin: they are written now)."""
    return build_with_origins(key, keys, documents, texts, [key] * len(keys), analyzer,
                              vectors)


def build_with_origins(key: str, keys: list[str], documents: list[Any] | None,
                       texts: Sequence[str],
                       origin_of: Sequence[str], analyzer: Analyzer,
                       vectors: Sequence[Any] | None = None) -> Built:
    """The segment of these chunks, each with the segment it was first written in, and
    their vectors (``None`` for a chunk without one)."""
    n = len(keys)
    # the words are numbered, and each distinct word analysed once (most words of a text
    # recur: 595,033 words of War and Peace are 17,527 distinct ones)
    word_ids: dict[str, int] = {}
    ids: list[int] = []
    word_counts = np.zeros(n, dtype=np.int64)
    for i, text in enumerate(texts):
        words = analyzer.words(text)
        word_counts[i] = len(words)
        ids += [word_ids.setdefault(w, len(word_ids)) for w in words]
    # A stop word counts in its chunk's length but has no postings: no query holds one
    # (a third of English text's postings, never read).
    vocabulary: dict[str, int] = {}
    words = list(word_ids)
    term_of_word = np.array(
        [NO_TERM if not t else STOP_TERM if w in STOP_WORDS else
         vocabulary.setdefault(t, len(vocabulary))
         for w, t in zip(words, analyzer.term_of_each(words))], dtype=np.int64)
    term_of = term_of_word[np.array(ids, dtype=np.int64)]
    ords = np.repeat(np.arange(n, dtype=np.int64), word_counts)
    lengths = np.bincount(ords[term_of != NO_TERM], minlength=n).astype(np.int64)
    kept = term_of >= 0
    if not kept.all():
        term_of, ords = term_of[kept], ords[kept]
    origins = list(dict.fromkeys(origin_of))
    code = {o: i for i, o in enumerate(origins)}
    built = collapse(key, keys, documents, lengths, origins,
                      np.array([code[o] for o in origin_of], dtype=np.int64),
                      list(vocabulary), term_of, ords, np.ones(len(ords), dtype=np.int64))
    built.vectors = pack(vectors) if vectors is not None else None
    return built


def collapse(key: str, keys: list[str], documents: list[Any] | None, lengths: np.ndarray,
              origins: list[str], origin_of: np.ndarray, terms: list[str],
              term_of: np.ndarray, ords: np.ndarray, tfs: np.ndarray) -> Built:
    """Sum the frequencies of repeated (term, ordinal) pairs and sort the postings."""
    n = max(len(keys), 1)
    combined = term_of * n + ords
    unique, inverse = np.unique(combined, return_inverse=True)
    summed = np.bincount(inverse, weights=tfs, minlength=len(unique)).astype(np.int64)
    return Built(key, keys, documents, lengths, origins, origin_of, terms, unique // n,
                 unique % n, summed)


# ----- reading a segment -------------------------------------------------------------
@dataclass
class Block:
    index: dict[str, int]
    starts: np.ndarray
    ords: np.ndarray
    tfs: np.ndarray

    @classmethod
    def decode(cls, row: dict[str, Any]) -> Block:
        terms = str(row.get("terms") or "").split("\n") if row.get("terms") else []
        counts = np.frombuffer(row["counts"], dtype="<u4").astype(np.int64)
        return cls(dict(zip(terms, range(len(terms)))),
                   np.concatenate(([0], np.cumsum(counts))),
                   np.frombuffer(row["ords"], dtype="<u4").astype(np.int64),
                   np.frombuffer(row["tfs"], dtype="<u2").astype(np.float64))

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        i = self.index.get(term)
        if i is None:
            return None
        lo, hi = self.starts[i], self.starts[i + 1]
        return self.ords[lo:hi], self.tfs[lo:hi]

    @property
    def size(self) -> int:
        return int(self.ords.nbytes + self.tfs.nbytes + self.starts.nbytes
                   + 80 * len(self.index))


@dataclass
class SegmentMap:
    keys: list[str]
    documents: list[Any] | None  # None: a map written before maps held them
    lengths: np.ndarray
    origins: list[str]
    origin_of: np.ndarray
    _where: dict[tuple[str, int], int] | None = field(default=None, repr=False)
    _by_key: dict[str, int] | None = field(default=None, repr=False)

    @classmethod
    def decode(cls, row: dict[str, Any]) -> SegmentMap:
        docs = row.get("docs")
        return cls(list(row["keys"]), list(docs) if docs is not None else None,
                   np.frombuffer(row["lengths"], dtype="<u4").astype(np.float64),
                   list(row["origins"]),
                   np.frombuffer(row["origin_of"], dtype="<u4").astype(np.int64))

    def ordinal(self, key: str, origin: str) -> int | None:
        """The ordinal of a chunk first written in ``origin``."""
        if self._where is None:
            codes = self.origin_of.tolist()
            self._where = {(k, o): i for i, (k, o) in enumerate(zip(self.keys, codes))}
        try:
            return self._where.get((key, self.origins.index(origin)))
        except ValueError:
            return None

    def ordinal_of_key(self, key: str) -> int | None:
        """The ordinal of chunk ``key`` in this segment (its newest, if it was written here
        twice), ``None`` when it is not here."""
        if self._by_key is None:
            self._by_key = {k: i for i, k in enumerate(self.keys)}
        return self._by_key.get(key)

    @property
    def size(self) -> int:
        return int(self.lengths.nbytes + self.origin_of.nbytes + 150 * len(self.keys))


@dataclass(frozen=True)
class Segment:
    key: str
    n: int
    total: int
    blocks: int
    postings: int
    level: int
    vparts: int = 0  # part records of its vectors
    vectors: bool | None = None  # whether it has vectors (None: not known, an old segment)

    @classmethod
    def of(cls, header: dict[str, Any]) -> Segment:
        vectors = header.get("vectors")
        return cls(str(header["id"].id), int(header.get("n") or 0),
                   int(header.get("total") or 0), int(header.get("blocks") or 0),
                   int(header.get("postings") or 0), int(header.get("level") or 0),
                   int(header.get("vparts") or 0), None if vectors is None else bool(vectors))


HEADER_FIELDS = "id, n, total, blocks, postings, level, vparts, vectors"


class DecodedCache:
    """Decoded maps and blocks of segments, least recently used out beyond ``limit``
    bytes. Always valid: a segment never changes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._items: OrderedDict[tuple[Any, ...], tuple[Any, int]] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> Any:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: tuple[Any, ...], value: Any, size: int) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self.used -= old[1]
        self._items[key] = (value, size)
        self.used += size
        while self.used > self.limit and len(self._items) > 1:
            _, (_, dropped) = self._items.popitem(last=False)
            self.used -= dropped


class Ranked:
    """Chunks scored by a search, best first (ties by chunk key): sorted as far as it is
    read, since a search reads the top few of thousands of matches."""

    def __init__(self, view: View | None = None, ordinals: np.ndarray | None = None,
                 scores: np.ndarray | None = None) -> None:
        self._view = view
        self._ordinals = ordinals if ordinals is not None else np.zeros(0, dtype=np.int64)
        self._scores = scores if scores is not None else np.zeros(0)
        self._sorted: list[tuple[str, float]] = []
        self._documents: list[Any] = []  # of the sorted, when every map holds them
        self.idf: dict[str, float] = {}  # of the query's terms

    def __len__(self) -> int:
        return len(self._ordinals)

    def best(self, start: int, stop: int) -> list[tuple[str, float]]:
        """(chunk key, score) of ranks ``start`` to ``stop`` (0-based, end excluded)."""
        stop = min(stop, len(self))
        if stop > len(self._sorted):
            self._sort(max(stop, 2 * len(self._sorted)))
        return self._sorted[start:stop]

    def within(self, allowed: DocumentSet) -> Ranked | None:
        """This ranking with only the chunks of ``allowed`` documents (from the maps, no
        chunk read); ``None`` when the maps do not know the chunks' documents."""
        view = self._view
        if view is None:
            return self
        if not view.documents_known:
            return None
        keep = view.document_mask(allowed)[self._ordinals]
        out = Ranked(view, self._ordinals[keep], self._scores[keep])
        out.idf = self.idf
        return out

    def documents(self, start: int, stop: int) -> list[Any] | None:
        """The document keys of ranks ``start`` to ``stop`` (after :meth:`best`), ``None``
        when the index does not know them (maps written before they held them)."""
        view = self._view
        if view is None or not view.documents_known:
            return None
        return self._documents[start:min(stop, len(self._sorted))]

    def _sort(self, want: int) -> None:
        scores, count = self._scores, len(self)
        want = min(want, count)
        if want < count:  # the top ``want``, and every chunk tied with the last of them
            threshold = -np.partition(-scores, want - 1)[want - 1]
            picked = np.flatnonzero(scores >= threshold)
        else:
            picked = np.arange(count)
        view = self._view
        assert view is not None
        ordinals = self._ordinals[picked]
        segment = np.searchsorted(view.offsets, ordinals, side="right") - 1
        places = [(view.segments[g].key, o - int(view.offsets[g]))
                  for g, o in zip(segment.tolist(), ordinals.tolist())]
        keys = [view.maps[k].keys[o] for k, o in places]
        values = scores[picked].tolist()
        order = sorted(range(len(keys)), key=lambda i: (-values[i], keys[i]))[:want]
        self._sorted = [(keys[i], values[i]) for i in order]
        if view.documents_known:
            self._documents = [view.document(*places[i]) for i in order]

    @property
    def keys(self) -> list[str]:
        """Every key, best first (sorts the whole ranking: for checks)."""
        return [k for k, _ in self.best(0, len(self))]

    @property
    def scores(self) -> list[float]:
        return [v for _, v in self.best(0, len(self))]


@dataclass
class View:
    """What one search sees: the live segments, their maps, the dead ordinals."""

    segments: list[Segment]
    maps: dict[str, SegmentMap]
    dead: dict[str, np.ndarray]  # segment -> boolean mask of dead ordinals
    chunks: int
    average_length: float
    signature: tuple[Any, ...] = ()  # the segments, deletions and moves it was made of
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    norm: np.ndarray | None = None  # per global ordinal, made by the first search
    # a term's live postings over the view (global ordinals), its BM25 in each chunk, its IDF
    postings: dict[str, tuple[np.ndarray, np.ndarray, float]] = field(default_factory=dict)
    postings_bytes: int = 0
    moved: dict[tuple[str, int], Any] = field(default_factory=dict)  # (segment, ordinal)
    stamp: int = -1  # the store's changes when it was read
    background: VectorSet | None = None  # a sample of the live vectors, drawn once
    # each global ordinal's document as a number (by the first filtered search), and the
    # numbers of the documents
    document_codes: np.ndarray | None = None
    document_numbers: dict[Any, int] = field(default_factory=dict)

    @property
    def documents_known(self) -> bool:
        return all(m.documents is not None for m in self.maps.values())

    def document_mask(self, allowed: DocumentSet) -> np.ndarray:
        """Whether each global ordinal's chunk is of an ``allowed`` document (when
        :attr:`documents_known`)."""
        if self.document_codes is None:
            numbers = self.document_numbers
            parts = []
            for s in self.segments:
                documents = self.maps[s.key].documents
                assert documents is not None
                parts.append(np.fromiter((numbers.setdefault(d, len(numbers))
                                          for d in documents), dtype=np.int64,
                                         count=len(documents)))
            codes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            at = {s.key: int(self.offsets[i]) for i, s in enumerate(self.segments)}
            for (segment, ordinal), document in self.moved.items():
                if segment in at:
                    codes[at[segment] + ordinal] = numbers.setdefault(document, len(numbers))
            self.document_codes = codes
        numbers = self.document_numbers
        table = np.full(len(numbers), allowed.exclude, dtype=bool)
        for key in allowed.keys:
            number = numbers.get(key)
            if number is not None:
                table[number] = not allowed.exclude
        return table[self.document_codes]

    def document(self, segment: str, ordinal: int) -> Any:
        """The document a chunk belongs to now (when :attr:`documents_known`)."""
        moved = self.moved.get((segment, ordinal))
        if moved is not None:
            return moved
        documents = self.maps[segment].documents
        assert documents is not None
        return documents[ordinal]


class MissingRecord(Exception):
    """A record of a live segment was not found (a merge may have just replaced it)."""


def bytes_of(record: dict[str, Any]) -> int:
    return sum(len(v) if isinstance(v, (bytes, str)) else
               sum(len(x) for x in v) if isinstance(v, list) else 8 for v in record.values())


def concatenated(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def full_levels(levels: Iterable[int]) -> list[int]:
    """The levels (lowest first) that hold enough segments to be merged."""
    return sorted(level for level, n in Counter(levels).items() if n >= MERGE_FANOUT)


def due_segments(view: View, force: bool) -> list[Segment]:
    """The segments to merge next: every live one (``force``), a full level, or a segment
    whose chunks are mostly deleted."""
    if force:
        return list(view.segments) if len(view.segments) > 1 or view.dead else []
    by_level: dict[int, list[Segment]] = {}
    for s in view.segments:
        by_level.setdefault(s.level, []).append(s)
    for level in full_levels(s.level for s in view.segments):
        return by_level[level][:MERGE_FANOUT * 2]
    for s in view.segments:
        mask = view.dead.get(s.key)
        if mask is not None and mask.sum() > EXPUNGE_DEAD_RATIO * s.n:
            return [s]
    return []
