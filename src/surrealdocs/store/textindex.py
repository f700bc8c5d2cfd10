"""The text index: BM25 ranked in this process over postings that surrealdocs keeps in
SurrealDB (issue 28). This module owns its tables and all their SurrealQL.

The engine's FULLTEXT index scores every matching row before ``LIMIT`` and is most of the
cost of writing a chunk. Here the store keeps immutable *segments* and this process ranks:

- ``<chunks>_text_segment``: one header per segment (its chunk count, their total length,
  how many blocks its postings have, ``live``).
- ``<chunks>_text_map``: per segment, each ordinal's chunk key, document key and length,
  and its *origin* (the segment the chunk was first written in, which the chunk row keeps
  in ``text_seg``).
- ``<chunks>_text_block``: a segment's postings, its terms split into ``blocks`` records by
  a hash of the term (a small segment is one record; a search reads only the blocks of the
  query's terms). A block holds its terms, their posting counts, and each posting's ordinal
  (``<u4``) and term frequency (``<u2``) as packed ``bytes``.
- ``<chunks>_text_dead``: a deleted chunk (its id and origin), written by an event in the
  transaction that deletes the row, whatever deletes it (a cascade too).
- ``<chunks>_text_vector``: a segment's vectors (the chunks' embeddings as int8 codes with
  a scale per row, in part records; :mod:`.segmentvectors`), so that the vector leg scans
  them in this process, merged and deleted with the postings.
- ``<chunks>_text_moved``: a chunk moved into another document (a new version of a source
  keeps its unchanged chunks), keyed by chunk and origin, written by the statement that
  moves it: searches group hits by document without reading the chunks' rows.
- ``<chunks>_text_lease``: who merges or rebuilds now.

A write of chunks adds its segment in the same transaction, so a chunk is findable by text
exactly when its row is committed. Merges (tiered: ten segments of a level into one of the
next, or one segment whose chunks are mostly deleted) write the new segment unpublished,
then publish it and remove its inputs and the deletions they absorbed in one transaction,
under the lease; a crash before that leaves the inputs live and the unpublished segment to
the next merger, which removes it.

Segments never change, so what this process decoded of them (maps, blocks) is kept in a
bounded cache keyed by segment. Statistics (chunk count, average length, document
frequencies) are exact over the live chunks; the IDF is Lucene's, never zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import secrets
import time
import zlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from surrealdb import RecordID

from ..config import Settings
from ..errors import StoreError
from ..parts.analyzer import Analyzer, analyzer_for
from .connection import Statement, Store, release_freed_memory
from .segmentvectors import (
    PART_ROWS,
    PARTS_PER_STATEMENT,
    SCAN_MAX_BYTES,
    SCANNED_DISTANCES,
    VectorSet,
    decode_part,
    pack,
    part_bytes,
    part_count,
    part_records,
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
CACHE_BYTES = 256 * 1024 * 1024
RANKED_CACHE = 8  # rankings of recent searches, while nothing changes
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
    vocabulary: dict[str, int] = {}
    ids: list[int] = []
    lengths = np.zeros(n, dtype=np.int64)
    for i, text in enumerate(texts):
        terms = analyzer.terms(text)
        lengths[i] = len(terms)
        ids += [vocabulary.setdefault(t, len(vocabulary)) for t in terms]
    term_of = np.array(ids, dtype=np.int64)
    ords = np.repeat(np.arange(n, dtype=np.int64), lengths)
    origins = list(dict.fromkeys(origin_of))
    code = {o: i for i, o in enumerate(origins)}
    built = _collapse(key, keys, documents, lengths, origins,
                      np.array([code[o] for o in origin_of], dtype=np.int64),
                      list(vocabulary), term_of, ords, np.ones(len(ords), dtype=np.int64))
    built.vectors = pack(vectors) if vectors is not None else None
    return built


def _collapse(key: str, keys: list[str], documents: list[Any] | None, lengths: np.ndarray,
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


class _Cache:
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

    def __init__(self, view: _View | None = None, ordinals: np.ndarray | None = None,
                 scores: np.ndarray | None = None) -> None:
        self._view = view
        self._ordinals = ordinals if ordinals is not None else np.zeros(0, dtype=np.int64)
        self._scores = scores if scores is not None else np.zeros(0)
        self._sorted: list[tuple[str, float]] = []
        self._documents: list[Any] = []  # of the sorted, when every map holds them

    def __len__(self) -> int:
        return len(self._ordinals)

    def best(self, start: int, stop: int) -> list[tuple[str, float]]:
        """(chunk key, score) of ranks ``start`` to ``stop`` (0-based, end excluded)."""
        stop = min(stop, len(self))
        if stop > len(self._sorted):
            self._sort(max(stop, 2 * len(self._sorted)))
        return self._sorted[start:stop]

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
class _View:
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

    @property
    def documents_known(self) -> bool:
        return all(m.documents is not None for m in self.maps.values())

    def document(self, segment: str, ordinal: int) -> Any:
        """The document a chunk belongs to now (when :attr:`documents_known`)."""
        moved = self.moved.get((segment, ordinal))
        if moved is not None:
            return moved
        documents = self.maps[segment].documents
        assert documents is not None
        return documents[ordinal]


class TextIndex:
    """The text index of one store's chunks."""

    def __init__(self, store: Store, settings: Settings, chunks_table: str,
                 vector_table: str | None = None) -> None:
        """``vector_table``: where the chunks' vectors are (the chunks table, or their own),
        ``None`` in a store without vectors."""
        self.store = store
        self.settings = settings
        self.chunks_table = chunks_table
        self.vector_table = vector_table
        names = store.names
        self.segment_table = f"{chunks_table}_text_segment"
        self.map_table = f"{chunks_table}_text_map"
        self.block_table = f"{chunks_table}_text_block"
        self.dead_table = f"{chunks_table}_text_dead"
        self.moved_table = f"{chunks_table}_text_moved"
        self.vector_part_table = f"{chunks_table}_text_vector"
        self.lease_key = RecordID(f"{chunks_table}_text_lease", "merge")
        self.analyzer = analyzer_for(names.language)
        self.cache = _Cache(CACHE_BYTES)
        self.owner = f"{os.getpid()}-{secrets.token_hex(4)}"
        self._merging: asyncio.Task[None] | None = None
        self._last_view: _View | None = None
        self._ranked: OrderedDict[tuple[Any, ...], Ranked] = OrderedDict()
        # the live segments' vectors, decoded (immutable; dropped when a segment goes)
        self._vector_sets: dict[str, VectorSet] = {}
        self._loading_vectors = asyncio.Lock()
        self._maintaining = asyncio.Lock()  # one merge or rebuild at a time in a process
        # what this process wrote: segments, merges, bytes of postings and maps (for the
        # write-amplification figure, bench/text_index_writes.py)
        self.written = {"segments": 0, "merges": 0, "bytes": 0, "records": 0}
        self._stopping = False

    # ----- schema --------------------------------------------------------------------
    @staticmethod
    def schema_sql_for(chunks_table: str) -> str:
        C = chunks_table
        dead = f"{C}_text_dead"
        tables = "".join(f" DEFINE TABLE IF NOT EXISTS {C}_text_{t} SCHEMALESS;"
                         for t in ("segment", "map", "block", "dead", "lease", "vector",
                                   "moved"))
        return (tables
                + f" DEFINE FIELD IF NOT EXISTS text_seg ON {C} TYPE option<string>;"
                f" DEFINE INDEX IF NOT EXISTS {dead}_seg ON {dead} FIELDS seg;"
                f" DEFINE EVENT IF NOT EXISTS {C}_text_dead ON {C}"
                " WHEN $event = 'DELETE' AND $before.text_seg != NONE THEN"
                f" (CREATE {dead} CONTENT {{ chunk: record::id($before.id),"
                " seg: $before.text_seg } RETURN NONE);")

    # ----- writing -------------------------------------------------------------------
    def add_statements(self, rows: list[dict[str, Any]]) -> list[Statement]:
        """Give ``rows`` (chunk rows about to be inserted) a segment: each row gets its
        ``text_seg``, and the returned statements write the segment, live. For the
        transaction that inserts the rows."""
        if not rows:
            return []
        key = new_segment_key()
        for row in rows:
            row["text_seg"] = key
        built = build(key, [str(row["id"].id) for row in rows],
                      [row["document"].id for row in rows],
                      [str(row.get("content") or "") for row in rows], self.analyzer,
                      [row.get("embedding") for row in rows]
                      if self.vector_table is not None else None)
        return self._write_statements(built, live=True)

    def moved_sql(self, ids: str, document: str) -> str:
        """SurrealQL that records that the chunks ``$<ids>`` belong to ``$<document>`` now,
        for the statement that moves them (after it has)."""
        return (f" FOR $text_moved IN (SELECT VALUE [record::id(id), text_seg] FROM ${ids}"
                f" WHERE text_seg != NONE) {{ UPSERT type::record('{self.moved_table}',"
                f" $text_moved) SET document = record::id(${document}) RETURN NONE; }};")

    def _write_statements(self, built: Built, *, live: bool) -> list[Statement]:
        key = built.key
        tag = f"ts_{key}"
        blocks = [{"id": RecordID(self.block_table, [key, b]), **record}
                  for b, record in built.blocks()]
        self.written["segments"] += 1
        self.written["records"] += 2 + len(blocks)
        self.written["bytes"] += _bytes_of(built.map_record()) + sum(map(_bytes_of, blocks))
        statements = [Statement(
            f"CREATE ${tag}_h CONTENT ${tag}_hv RETURN NONE;"
            f" CREATE ${tag}_m CONTENT ${tag}_mv RETURN NONE;",
            {f"{tag}_h": RecordID(self.segment_table, key), f"{tag}_hv": built.header(live),
             f"{tag}_m": RecordID(self.map_table, key), f"{tag}_mv": built.map_record()})]
        for start in range(0, len(blocks), BLOCKS_PER_STATEMENT):  # a big merge: parts
            part = blocks[start:start + BLOCKS_PER_STATEMENT]
            statements.append(Statement(
                f"INSERT INTO {self.block_table} ${tag}_b{start} RETURN NONE;",
                {f"{tag}_b{start}": part}, rows=len(part)))
        if built.vectors is not None:
            parts = [{"id": RecordID(self.vector_part_table, [key, p]), **record}
                     for p, record in enumerate(part_records(built.vectors))]
            self.written["records"] += len(parts)
            self.written["bytes"] += sum(map(part_bytes, parts))
            for start in range(0, len(parts), PARTS_PER_STATEMENT):
                some = parts[start:start + PARTS_PER_STATEMENT]
                statements.append(Statement(
                    f"INSERT INTO {self.vector_part_table} ${tag}_v{start} RETURN NONE;",
                    {f"{tag}_v{start}": some}, rows=len(some)))
        return statements

    # ----- searching -----------------------------------------------------------------
    async def _view(self) -> _View:
        # Where every write goes through this process's store, the last view stands until
        # the store has run anything that may write (reading the headers is a range read
        # the engine slows with every segment merged away: 19 ms on a store grown to 300k
        # chunks); read before the query, so a write that ends meanwhile is not missed.
        stamp = self.store.changes
        last = self._last_view
        if last is not None and self.store.exclusive and last.stamp == stamp:
            return last
        # one transaction: one snapshot of the segments and of the deletions
        _, headers, dead_rows, moved_rows, _ = await self.store.query(
            f"BEGIN; SELECT {HEADER_FIELDS} FROM {self.segment_table}"
            f" WHERE live = true; SELECT id, chunk, seg FROM {self.dead_table};"
            f" SELECT VALUE [id, document] FROM {self.moved_table}; COMMIT;", read_only=True)
        segments = [Segment.of(h) for h in headers or []]
        segments.sort(key=lambda s: s.key)
        moves = {(str(i.id[0]), str(i.id[1])): document for i, document in moved_rows or []}
        signature = (tuple(s.key for s in segments),
                     frozenset(str(r["id"].id) for r in dead_rows or []),
                     frozenset(moves.items()))
        if last is not None and last.signature == signature:
            last.stamp = max(last.stamp, stamp)
            return last  # nothing changed since the last search
        maps = await self._maps([s.key for s in segments])
        where: dict[str, str] = {}  # origin -> live segment holding its chunks
        for s in segments:
            for origin in maps[s.key].origins:
                where[origin] = s.key
        dead: dict[str, np.ndarray] = {}
        for row in dead_rows or []:
            seg = where.get(str(row["seg"]))
            if seg is None:
                continue  # its segment was merged without it, or rebuilt
            ordinal = maps[seg].ordinal(str(row["chunk"]), str(row["seg"]))
            if ordinal is None:
                continue
            mask = dead.get(seg)
            if mask is None:
                mask = dead[seg] = np.zeros(len(maps[seg].keys), dtype=bool)
            mask[ordinal] = True
        moved: dict[tuple[str, int], Any] = {}
        for (chunk, origin), document in moves.items():
            seg = where.get(origin)
            ordinal = maps[seg].ordinal(chunk, origin) if seg is not None else None
            if seg is not None and ordinal is not None:
                moved[(seg, ordinal)] = document
        chunks = sum(s.n for s in segments) - sum(int(m.sum()) for m in dead.values())
        total = sum(s.total for s in segments) - sum(
            float(maps[k].lengths[m].sum()) for k, m in dead.items())
        view = _View(segments, maps, dead, chunks, total / chunks if chunks > 0 else 0.0,
                     signature, np.concatenate(([0], np.cumsum([s.n for s in segments],
                                                               dtype=np.int64))),
                     moved=moved, stamp=stamp)
        self._last_view = view
        live = {s.key for s in segments}
        for gone in [k for k in self._vector_sets if k not in live]:
            del self._vector_sets[gone]
        return view

    async def _maps(self, keys: list[str]) -> dict[str, SegmentMap]:
        return await self._cached(self.map_table, keys, lambda key: key, lambda i: str(i),
                                  SegmentMap.decode)

    async def _blocks(self, wanted: Iterable[tuple[str, int]]) -> dict[tuple[str, int], Block]:
        return await self._cached(self.block_table, list(wanted), lambda key: list(key),
                                  lambda i: (str(i[0]), int(i[1])), Block.decode)

    async def _cached(self, table: str, keys: list[K], record_key: Callable[[K], Any],
                      key_of: Callable[[Any], K], decode: Callable[[dict[str, Any]], D]
                      ) -> dict[K, D]:
        """Decoded records of ``table`` by key: from the cache, else read by id (and kept).
        A record not found belongs to a segment merged away while this search read."""
        out: dict[K, D] = {}
        missing = []
        for key in keys:
            found = self.cache.get((table, key))
            if found is None:
                missing.append(key)
            else:
                out[key] = found
        if missing:
            (rows,) = await self.store.query(
                "SELECT * FROM $ids;", {"ids": [RecordID(table, record_key(k))
                                                for k in missing]}, read_only=True)
            for row in rows or []:
                decoded = decode(row)
                key = key_of(row["id"].id)
                self.cache.put((table, key), decoded, decoded.size)
                out[key] = decoded
            lost = [k for k in missing if k not in out]
            if lost:
                raise _Missing(f"record {lost[0]} of {table}")
        return out

    async def rank(self, terms: Sequence[str]) -> Ranked:
        """Every live chunk holding any of the (analyzed) terms, best first by BM25 (a term
        the query repeats weighs as many times: "system" twice in a question counts
        twice)."""
        return await self._retrying(lambda: self._rank(terms))

    async def _retrying(self, read: Callable[[], Awaitable[T]]) -> T:
        for attempt in range(3):
            try:
                return await read()
            except _Missing as exc:
                if attempt == 2:  # not a merge racing this read: records are gone
                    raise StoreError(DAMAGED.format(url=self.store.url, what=str(exc))
                                     ) from None
        raise AssertionError("unreachable")

    async def _rank(self, terms: Sequence[str]) -> Ranked:
        weights: dict[str, int] = {}
        for term in terms:
            if term:
                weights[term] = weights.get(term, 0) + 1
        unique = sorted(weights)
        view = await self._view()
        if not unique or view.chunks <= 0:
            return Ranked()
        asked = (view.signature, *sorted(weights.items()))
        known = self._ranked.get(asked)
        if known is not None:  # the same search again (a per-document search asks more)
            return known
        ranked = await self._score(view, weights)
        self._ranked[asked] = ranked
        while len(self._ranked) > RANKED_CACHE:
            self._ranked.popitem(last=False)
        return ranked

    async def _score(self, view: _View, weights: dict[str, int]) -> Ranked:
        unique = list(weights)
        wanted = {(s.key, zlib.crc32(t.encode()) % s.blocks) for s in view.segments
                  for t in unique if t not in view.postings}
        blocks = await self._blocks(wanted) if wanted else {}
        if view.norm is None:  # once per view: each chunk's length normalisation
            k1, b = self.settings.bm25_k1, self.settings.bm25_b
            lengths = np.concatenate([view.maps[s.key].lengths for s in view.segments])
            view.norm = k1 * (1.0 - b + b * lengths / max(view.average_length, 1e-9))
        k1 = self.settings.bm25_k1
        acc = np.zeros(view.offsets[-1], dtype=np.float64)
        n = view.chunks
        ceiling = 0.0  # the most any chunk could score: every term, saturated
        for term in unique:
            found = view.postings.get(term)
            if found is None:  # the term's BM25 per live chunk, kept for the view's life
                ords, tfs = self._live_postings(view, term, blocks)
                df = len(ords)
                idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
                found = (ords, idf * tfs * (k1 + 1.0) / (tfs + view.norm[ords]), idf)
                view.postings_bytes += found[0].nbytes + found[1].nbytes
                if view.postings_bytes > POSTINGS_CACHE_BYTES:
                    view.postings.clear()
                    view.postings_bytes = found[0].nbytes + found[1].nbytes
                view.postings[term] = found
            ords, contribution, idf = found
            if len(ords):
                acc[ords] += weights[term] * contribution
                ceiling += weights[term] * idf * (k1 + 1.0)
        hits = np.flatnonzero(acc)
        # scores as a share of that ceiling: 0-1 whatever the query (the order is BM25's)
        return Ranked(view, hits, acc[hits] / ceiling if ceiling > 0 else acc[hits])

    @staticmethod
    def _live_postings(view: _View, term: str,
                       blocks: dict[tuple[str, int], Block]) -> tuple[np.ndarray, np.ndarray]:
        """A term's live postings over the whole view: global ordinals and frequencies."""
        bucket = zlib.crc32(term.encode())
        ords_parts, tfs_parts = [], []
        for i, s in enumerate(view.segments):
            block = blocks.get((s.key, bucket % s.blocks))
            hit = block.postings(term) if block is not None else None
            if hit is None:
                continue
            ords, tfs = hit
            mask = view.dead.get(s.key)
            if mask is not None:
                keep = ~mask[ords]
                ords, tfs = ords[keep], tfs[keep]
            ords_parts.append(ords + view.offsets[i])
            tfs_parts.append(tfs)
        if not ords_parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        return np.concatenate(ords_parts), np.concatenate(tfs_parts)

    async def nearest(self, vector: Sequence[float]) -> Ranked | None:
        """Every live chunk that has a vector, nearest to ``vector`` first, by a scan of
        the segments' coded vectors (scores: :meth:`VectorSet.scores`). ``None`` when the scan
        cannot answer and the HNSW graph must: segments written before they carried vectors
        (until the index is rebuilt), a distance it does not compute, or more vectors than
        :data:`SCAN_MAX_BYTES`."""
        distance = self.settings.hnsw_distance
        if self.vector_table is None or distance not in SCANNED_DISTANCES:
            return None
        return await self._retrying(lambda: self._nearest(vector, distance))

    async def _nearest(self, vector: Sequence[float], distance: str) -> Ranked | None:
        view = await self._view()
        if any(s.vectors is None for s in view.segments):
            return None
        carrying = [s for s in view.segments if s.vectors]
        if sum(s.n for s in carrying) * len(vector) * 4 > SCAN_MAX_BYTES:
            return None
        sets = await self._vectors_of(carrying)
        if any(v.dimension != len(vector) for v in sets.values()):
            return None
        query = np.asarray(vector, dtype=np.float32)
        if distance == "COSINE":
            norm = float(np.linalg.norm(query))
            if norm == 0.0:
                return Ranked()
            query = query / norm
        ordinals, scores = [], []
        for i, s in enumerate(view.segments):
            found = sets.get(s.key)
            if found is None:
                continue
            valid = found.has
            dead = view.dead.get(s.key)
            if dead is not None:
                valid = valid & ~dead
            picked = np.flatnonzero(valid)
            ordinals.append(picked + view.offsets[i])
            scores.append(found.scores(query, distance)[picked].astype(np.float64))
        if not ordinals:
            return Ranked()
        return Ranked(view, np.concatenate(ordinals), np.concatenate(scores))

    async def _vectors_of(self, segments: Sequence[Segment]) -> dict[str, VectorSet]:
        """The vectors of these segments (each read once, by one search at a time)."""
        async with self._loading_vectors:
            loaded = False
            for s in segments:
                if s.key in self._vector_sets or not s.vparts:
                    continue
                self._vector_sets[s.key] = await self._read_vectors(s)
                loaded = True
            if loaded:  # the answers' buffers were large: give their pages back
                release_freed_memory()
            return {s.key: self._vector_sets[s.key] for s in segments
                    if s.key in self._vector_sets}

    async def _read_vectors(self, s: Segment) -> VectorSet:
        """A segment's vectors, read a few parts at a time (a whole large segment in one
        answer would hold its vectors three times over while decoded)."""
        codes: np.ndarray | None = None
        scales = np.zeros(s.n, dtype=np.float32)
        has = np.zeros(s.n, dtype=bool)
        for first in range(0, s.vparts, PARTS_PER_STATEMENT):
            numbers = range(first, min(first + PARTS_PER_STATEMENT, s.vparts))
            (rows,) = await self.store.query(
                "SELECT * FROM $ids;",
                {"ids": [RecordID(self.vector_part_table, [s.key, p]) for p in numbers]},
                read_only=True)
            if len(rows or []) != len(numbers):
                raise _Missing(f"vectors of segment {s.key}")
            for row in rows:
                start = int(row["id"].id[1]) * PART_ROWS
                part_codes, part_scales, part_has = decode_part(row)
                if codes is None:
                    codes = np.zeros((s.n, part_codes.shape[1]), dtype=np.int8)
                rows_of = slice(start, start + len(part_codes))
                codes[rows_of], scales[rows_of], has[rows_of] = (
                    part_codes, part_scales, part_has)
            del rows
        assert codes is not None
        return VectorSet.of(codes, scales, has)

    async def live_vectors(self) -> dict[str, list[float]]:
        """Every live chunk's vector as the index holds it (for checks)."""
        async def read() -> dict[str, list[float]]:
            view = await self._view()
            sets = await self._vectors_of([s for s in view.segments if s.vectors])
            out: dict[str, list[float]] = {}
            for s in view.segments:
                found = sets.get(s.key)
                if found is None:
                    continue
                dead = view.dead.get(s.key)
                for ordinal, key in enumerate(view.maps[s.key].keys):
                    if found.has[ordinal] and (dead is None or not dead[ordinal]):
                        out[key] = found.vector(ordinal)
            return out
        return await self._retrying(read)

    # ----- statistics ------------------------------------------------------------------
    async def stats(self) -> dict[str, Any]:
        """Segments, postings, live and dead chunks."""
        view = await self._retrying(self._view)
        dead = sum(int(m.sum()) for m in view.dead.values())
        stored = sum(s.n for s in view.segments)
        (pending,) = await self.store.query(
            f"SELECT count() AS n FROM {self.dead_table} GROUP ALL;")
        return {"segments": len(view.segments),
                "postings": sum(s.postings for s in view.segments),
                "chunks": view.chunks, "dead": dead,
                "dead_ratio": dead / stored if stored else 0.0,
                "deletions_recorded": int(pending[0]["n"]) if pending else 0,
                "levels": sorted({s.level for s in view.segments})}

    async def live_postings(self) -> dict[str, dict[str, int]]:
        """Every live chunk's terms and their frequencies, as the index holds them (reads
        the whole index: for checks)."""
        async def read() -> dict[str, dict[str, int]]:
            view = await self._view()
            parts = await self._read_whole(view.segments)
            out: dict[str, dict[str, int]] = {}
            for s in view.segments:
                m = view.maps[s.key]
                dead = view.dead.get(s.key)
                for ordinal, key in enumerate(m.keys):
                    if dead is None or not dead[ordinal]:
                        if key in out:
                            raise StoreError(f"chunk {key} is live in two segments")
                        out[key] = {}
                for block in parts[s.key]:
                    for term, i in block.index.items():
                        lo, hi = block.starts[i], block.starts[i + 1]
                        for ordinal, tf in zip(block.ords[lo:hi].tolist(),
                                               block.tfs[lo:hi].tolist()):
                            if dead is None or not dead[ordinal]:
                                out[m.keys[ordinal]][term] = int(tf)
            return out
        return await self._retrying(read)

    async def expected_postings(self) -> dict[str, dict[str, int]]:
        """What an index rebuilt from the chunks would hold (for checks)."""
        (rows,) = await self.store.query(f"SELECT id, content FROM {self.chunks_table};")
        out = {}
        for row in rows or []:
            counts: dict[str, int] = {}
            for term in self.analyzer.terms(str(row.get("content") or "")):
                counts[term] = counts.get(term, 0) + 1
            out[str(row["id"].id)] = counts
        return out

    # ----- merging -------------------------------------------------------------------
    def merge_soon(self) -> None:
        """Merge in the background when a level has grown full (one merge at a time in
        this process; the lease keeps other processes out)."""
        if self._stopping or (self._merging is not None and not self._merging.done()):
            return
        self._merging = asyncio.get_running_loop().create_task(self._merge_quietly())

    async def _merge_quietly(self) -> None:
        try:
            while not self._stopping and await self.merge_once():
                pass
        except Exception:  # a busy or closing store: merged another time
            pass

    async def stop(self) -> None:
        """Let a background merge end after its current statement, and wait for it."""
        self._stopping = True
        if self._merging is not None:
            await asyncio.gather(self._merging, return_exceptions=True)

    async def merge_once(self, *, force: bool = False) -> bool:
        """Merge one group of segments if one is due (``force``: every live segment into
        one). Returns whether it merged."""
        view = await self._view()
        group = _due(view, force)
        if not group:
            return False
        async with self._maintaining:
            return await self._merge_under_lease(force)

    async def _merge_under_lease(self, force: bool) -> bool:
        if not await self._take_lease():
            return False
        try:
            await self._drop_unpublished()
            view = await self._view()  # again, under the lease
            group = _due(view, force)
            if not group:
                return False
            await self._merge(view, group)
            return True
        finally:
            await self._release_lease()

    async def _merge(self, view: _View, group: list[Segment]) -> None:
        parts = await self._read_whole(group)
        keys: list[str] = []
        lengths: list[np.ndarray] = []
        origins: list[str] = []
        origin_of: list[np.ndarray] = []
        vocabulary: dict[str, int] = {}
        term_of: list[np.ndarray] = []
        ords: list[np.ndarray] = []
        tfs: list[np.ndarray] = []
        absorbed: list[tuple[str, str]] = []  # dead (chunk, origin) dropped by the merge
        # the vectors go along, known when every input's are
        known = all(s.vectors is not None for s in group)
        sets = await self._vectors_of([s for s in group if s.vectors]) if known else {}
        dimension = next(iter(sets.values())).dimension if sets else 0
        carried: list[VectorSet] = []
        documents: list[Any] | None = [] if all(view.maps[s.key].documents is not None
                                               for s in group) else None
        moves: list[tuple[list[str], Any]] = []  # moved records the merge takes in
        for s in group:
            m = view.maps[s.key]
            dead = view.dead.get(s.key, np.zeros(len(m.keys), dtype=bool))
            alive = np.flatnonzero(~dead)
            new_ord = np.full(len(m.keys), -1, dtype=np.int64)
            new_ord[alive] = np.arange(len(keys), len(keys) + len(alive))
            codes = m.origin_of
            absorbed += [(m.keys[i], m.origins[codes[i]]) for i in np.flatnonzero(dead)]
            keys += [m.keys[i] for i in alive.tolist()]
            if documents is not None:
                documents += [view.document(s.key, i) for i in alive.tolist()]
            moves += [([m.keys[o], m.origins[codes[o]]], document)
                      for (seg, o), document in view.moved.items() if seg == s.key]
            lengths.append(m.lengths[alive])
            found = sets.get(s.key)
            if sets:
                carried.append(found.take(alive) if found is not None
                               else VectorSet.empty(len(alive), dimension))
            shift = len(origins)
            origins += m.origins
            origin_of.append(codes[alive] + shift)
            for block in parts[s.key]:
                local = np.fromiter((vocabulary.setdefault(t, len(vocabulary))
                                     for t in block.index), dtype=np.int64,
                                    count=len(block.index))
                counts = np.diff(block.starts)
                mapped = new_ord[block.ords]
                keep = mapped >= 0
                term_of.append(np.repeat(local, counts)[keep])
                ords.append(mapped[keep])
                tfs.append(block.tfs[keep].astype(np.int64))
        used = sorted(set(np.concatenate(origin_of).tolist())) if keys else []
        renumber = np.zeros(max(len(origins), 1), dtype=np.int64)
        renumber[used] = np.arange(len(used))
        merged = _collapse(
            new_segment_key(), keys, documents, np.concatenate(lengths).astype(np.int64)
            if lengths else np.zeros(0, dtype=np.int64),
            [origins[u] for u in used],
            renumber[np.concatenate(origin_of)] if keys else np.zeros(0, dtype=np.int64),
            list(vocabulary), _cat(term_of), _cat(ords), _cat(tfs))
        merged.vectors_known = known
        if sets and keys:
            merged.vectors = VectorSet.concatenate(carried)
        if self._stopping:
            return
        if merged.n:
            for statement in self._write_statements(merged, live=False):
                await self.store.run(statement)
                if self._stopping:
                    return
        await self._publish(merged if merged.n else None, group, absorbed, moves)
        if merged.n and merged.vectors is not None:  # what the next search would read
            self._vector_sets[merged.key] = merged.vectors
        self.written["merges"] += 1

    async def _read_whole(self, group: list[Segment]) -> dict[str, list[Block]]:
        (rows,) = await self.store.query(
            "SELECT * FROM $ids;",
            {"ids": [RecordID(self.block_table, [s.key, b]) for s in group
                     for b in range(s.blocks)]})
        out: dict[str, list[Block]] = {s.key: [] for s in group}
        for row in rows or []:
            out[str(row["id"].id[0])].append(Block.decode(row))
        return out

    def _drop_statements(self, group: Sequence[Segment]) -> Statement:
        return Statement(
            "DELETE $drop_headers; DELETE $drop_maps; DELETE $drop_blocks;"
            " DELETE $drop_vectors;",
            {"drop_headers": [RecordID(self.segment_table, s.key) for s in group],
             "drop_maps": [RecordID(self.map_table, s.key) for s in group],
             "drop_blocks": [RecordID(self.block_table, [s.key, b]) for s in group
                             for b in range(s.blocks)],
             "drop_vectors": [RecordID(self.vector_part_table, [s.key, p]) for s in group
                              for p in range(s.vparts)]})

    async def _publish(self, merged: Built | None, group: list[Segment],
                       absorbed: list[tuple[str, str]],
                       moves: list[tuple[list[str], Any]]) -> None:
        """Swap the merged segment for its inputs in one transaction (refused when an input
        is gone or the merged segment was removed as unpublished by another merger). The
        moves it took in go, unless a chunk moved again meanwhile."""
        check = Statement(
            f"IF array::len((SELECT id FROM $inputs WHERE live = true)) != array::len($inputs)"
            f" {{ THROW '{STALE}' }};",
            {"inputs": [RecordID(self.segment_table, s.key) for s in group]})
        publish = Statement("")
        if merged is not None:
            publish = Statement(
                f"IF !record::exists($merged) {{ THROW '{STALE}' }};"
                " UPDATE $merged SET live = true RETURN NONE;",
                {"merged": RecordID(self.segment_table, merged.key)})
        forget = Statement(
            f"FOR $d IN $absorbed {{ DELETE {self.dead_table} WHERE seg = $d[1]"
            " AND chunk = $d[0]; };"
            f" FOR $m IN $taken_moves {{ DELETE type::record('{self.moved_table}', $m[0])"
            " WHERE document = $m[1]; };",
            {"absorbed": [list(a) for a in absorbed],
             "taken_moves": [[key, document] for key, document in moves]})
        await self.store.transaction(check, publish, self._drop_statements(group), forget)

    async def _drop_unpublished(self) -> None:
        """Remove what an interrupted merge or rebuild left (the lease is ours)."""
        (rows,) = await self.store.query(
            f"SELECT {HEADER_FIELDS} FROM {self.segment_table} WHERE live = false;")
        if rows:
            await self.store.run(self._drop_statements([Segment.of(r) for r in rows]))

    async def _take_lease(self) -> bool:
        try:
            await self.store.transaction(Statement(
                "IF (SELECT VALUE until FROM ONLY $lease) > time::now()"
                " AND (SELECT VALUE owner FROM ONLY $lease) != $owner"
                f" {{ THROW 'busy' }};"
                " UPSERT $lease SET owner = $owner,"
                f" until = time::now() + {LEASE_SECONDS}s RETURN NONE;",
                {"lease": self.lease_key, "owner": self.owner}))
        except StoreError:  # held by another process, or two took it at once
            return False
        return True

    async def _release_lease(self) -> None:
        with contextlib.suppress(StoreError):  # it expires anyway
            await self.store.query(
                "DELETE $lease WHERE owner = $owner;",
                {"lease": self.lease_key, "owner": self.owner})

    # ----- rebuilding ----------------------------------------------------------------
    async def rebuild(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the text index from the chunks; ``progress(done, total)`` follows it.
        Returns the chunks indexed."""
        async with self._maintaining:
            return await self._rebuild(progress)

    async def _rebuild(self, progress: Callable[[int, int], None] | None) -> int:
        deadline = time.monotonic() + LEASE_SECONDS
        while not await self._take_lease():
            if time.monotonic() > deadline:
                raise StoreError("the text index is being merged or rebuilt by another"
                                 " process; try again later")
            await asyncio.sleep(0.5)
        try:
            await self._drop_unpublished()
            (old,) = await self.store.query(
                f"SELECT {HEADER_FIELDS} FROM {self.segment_table};")
            old_segments = [Segment.of(r) for r in old or []]
            old_keys = {s.key for s in old_segments}
            old_dead, old_moved = await self.store.query(
                f"SELECT VALUE id FROM {self.dead_table};"
                f" SELECT VALUE [id, document] FROM {self.moved_table};")
            fresh: list[str] = []
            last: RecordID | None = None
            done = 0
            total = 0
            if progress is not None:
                (counted,) = await self.store.query(
                    f"SELECT count() AS n FROM {self.chunks_table} GROUP ALL;")
                total = int(counted[0]["n"]) if counted else 0
                progress(0, total)
            while True:
                start = last
                inline = ", embedding" if self.vector_table == self.chunks_table else ""
                rows, current = await self.store.query(
                    f"SELECT id, document, content, text_seg{inline} FROM {self.chunks_table}"
                    + (" WHERE id > $last" if last is not None else "")
                    + f" ORDER BY id LIMIT {REBUILD_PAGE};"
                    f" SELECT VALUE record::id(id) FROM {self.segment_table} WHERE live = true;",
                    {"last": last})
                if not rows:
                    break
                last = rows[-1]["id"]
                # chunks written since the rebuild began are in segments of their own
                written_since = set(current or []) - old_keys
                rows = [r for r in rows if r.get("text_seg") not in written_since]
                key = new_segment_key()
                built = build_with_origins(
                    key, [str(r["id"].id) for r in rows], [r["document"].id for r in rows],
                    [str(r.get("content") or "") for r in rows],
                    [r.get("text_seg") or key for r in rows], self.analyzer,
                    await self._vectors_for(rows))
                ids = [r["id"] for r in rows]
                unstamped = [r["id"] for r in rows if not r.get("text_seg")]
                try:
                    await self.store.transaction(
                        Statement(
                            "IF array::len($page_ids.filter(|$i| record::exists($i)))"
                            f" != array::len($page_ids) {{ THROW '{STALE}' }};"
                            " UPDATE $page_new SET text_seg = $page_seg RETURN NONE;",
                            {"page_ids": ids, "page_new": unstamped, "page_seg": key}),
                        *(self._write_statements(built, live=False) if rows else []))
                except StoreError as exc:  # a chunk of the page was deleted: read it again
                    if STALE not in str(exc):
                        raise
                    last = start
                    continue
                if rows:
                    fresh.append(key)
                done += len(rows)
                if progress is not None:
                    progress(done, total)
            # the chunks keep their origins, so deletions recorded from now on find them in
            # the new segments; those recorded before the rebuild are of chunks it did not see
            await self.store.transaction(
                Statement("UPDATE $fresh SET live = true RETURN NONE;",
                          {"fresh": [RecordID(self.segment_table, k) for k in fresh]}),
                self._drop_statements(old_segments),
                Statement("DELETE $old_dead; FOR $m IN $old_moved { DELETE $m[0]"
                          " WHERE document = $m[1]; };",
                          {"old_dead": list(old_dead or []), "old_moved": old_moved or []}))
            return done
        finally:
            await self._release_lease()

    async def _vectors_for(self, rows: list[dict[str, Any]]) -> list[Any] | None:
        """The vectors of these chunk rows (``None`` for a chunk without one), read from
        where the store keeps them."""
        if self.vector_table is None:
            return None
        if self.vector_table == self.chunks_table:
            return [r.get("embedding") for r in rows]
        (found,) = await self.store.query(
            "SELECT VALUE [record::id(id), embedding] FROM $vector_ids;",
            {"vector_ids": [RecordID(self.vector_table, r["id"].id) for r in rows]})
        by_key = {str(k): v for k, v in found or []}
        return [by_key.get(str(r["id"].id)) for r in rows]

    async def drop(self) -> None:
        """Remove the text index's records (the store goes back to the engine's index)."""
        await self.store.query(
            "".join(f"DELETE {t};" for t in (self.segment_table, self.map_table,
                                              self.block_table, self.dead_table,
                                              self.vector_part_table, self.moved_table))
            + f" UPDATE {self.chunks_table} SET text_seg = NONE WHERE text_seg != NONE"
            " RETURN NONE;")


class _Missing(Exception):
    """A record of a live segment was not found (a merge may have just replaced it)."""


def _bytes_of(record: dict[str, Any]) -> int:
    return sum(len(v) if isinstance(v, (bytes, str)) else
               sum(len(x) for x in v) if isinstance(v, list) else 8 for v in record.values())


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _due(view: _View, force: bool) -> list[Segment]:
    """The segments to merge next: every live one (``force``), a full level, or a segment
    whose chunks are mostly deleted."""
    if force:
        return list(view.segments) if len(view.segments) > 1 or view.dead else []
    by_level: dict[int, list[Segment]] = {}
    for s in view.segments:
        by_level.setdefault(s.level, []).append(s)
    for level in sorted(by_level):
        if len(by_level[level]) >= MERGE_FANOUT:
            return by_level[level][:MERGE_FANOUT * 2]
    for s in view.segments:
        mask = view.dead.get(s.key)
        if mask is not None and mask.sum() > EXPUNGE_DEAD_RATIO * s.n:
            return [s]
    return []
