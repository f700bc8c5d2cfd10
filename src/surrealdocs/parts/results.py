"""What the knowledge base returns: plain dataclasses, each with ``to_dict()`` for JSON.

Faces (CLI, server, MCP) print or send ``to_dict()``; none of them builds JSON by hand.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from surrealdb import RecordID

STATUSES = ("ingested", "updated", "unchanged", "duplicate", "empty", "failed", "skipped")


def id_text(value: Any) -> str:
    """A record id as every face shows it: ``table:key``, the key as the engine holds it,
    without SurrealQL's escaping (``documents:9f2c…``, never ``documents:⟨9f2c…⟩``). Every
    face takes it back (and the escaped form too)."""
    if isinstance(value, RecordID):
        return ":".join((str(value.table_name), str(value.id)))
    text = str(value)
    match = _ESCAPED.fullmatch(text)
    return f"{match.group(1)}:{match.group(2)}" if match else text


_ESCAPED = re.compile(r"(\w+):⟨(.*)⟩", re.DOTALL)


def jsonable(value: Any) -> Any:
    """``value`` with record ids as ``table:key`` strings (:func:`id_text`) and datetimes as
    ISO 8601, so that ``json.dumps`` takes it."""
    if isinstance(value, RecordID):
        return id_text(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not f.name.startswith("_")}
    iso = getattr(value, "isoformat", None)  # the SDK's own datetime types
    return iso() if callable(iso) else str(value)


@dataclass
class Forgotten:
    """What :meth:`~surrealdocs.KnowledgeBase.forget` did with one reference: ``deleted``,
    ``would delete`` (a dry run) or ``not found`` (then ``near``: stored sources whose name
    ends like it)."""

    ref: str
    status: str
    near: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        return out


@dataclass
class FileResult:
    """What happened to one source. ``status`` is one of :data:`STATUSES` (a sync adds
    ``renamed`` and ``deleted``); an ``unchanged`` source (skipped before extraction) has the
    outcome of its last ingest in ``last_status`` (``ingested``, ``duplicate``, ``failed`` or
    ``empty``, with ``reason``). ``chunks`` is how many chunks a written document has,
    ``embedded`` how many of their texts the model embedded (the others kept vectors that
    were stored already). A renamed source names its old path in ``previous``."""

    source: str
    status: str
    document_id: str | None = None
    chunks: int = 0
    reason: str | None = None
    seconds: float = 0.0
    last_status: str | None = None
    embedded: int = 0
    previous: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        return out


class _ResultTotals:
    """What an ingest's and a sync's reports count of their per-source ``results``."""

    results: list[FileResult]
    statuses: ClassVar[tuple[str, ...]] = STATUSES

    @property
    def counts(self) -> dict[str, int]:
        counter = Counter(r.status for r in self.results)
        return {s: counter.get(s, 0) for s in self.statuses}

    @property
    def failures(self) -> list[FileResult]:
        """Sources that gave no document: failed, empty, or skipped (with the reason)."""
        return [r for r in self.results if r.status in ("failed", "empty", "skipped")]

    @property
    def chunks_written(self) -> int:
        return sum(r.chunks for r in self.results if r.status in ("ingested", "updated"))

    @property
    def chunks_embedded(self) -> int:
        """Chunk texts the model embedded (the rest of ``chunks_written`` reused vectors)."""
        return sum(r.embedded for r in self.results)


@dataclass
class IngestReport(_ResultTotals):
    """The outcome of one ingest call: a result per source, in the order given."""

    results: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0
    index_rebuilt: bool = False
    notebook: str | None = None  # the notebook the documents were put in (notebook add)
    linked: int = 0  # documents that were not in it before
    in_notebook: int = 0  # documents of this ingest in it now

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": self.counts,
            "chunks_written": self.chunks_written,
            "chunks_embedded": self.chunks_embedded,
            "seconds": round(self.seconds, 3),
            "index_rebuilt": self.index_rebuilt,
            **({"notebook": self.notebook, "linked": self.linked,
                "in_notebook": self.in_notebook} if self.notebook else {}),
            "results": [r.to_dict() for r in self.results],
        }


SYNC_STATUSES = (*STATUSES, "renamed", "deleted")
SYNC_ACTIONS = ("add", "update", "rename", "delete", "unchanged")


@dataclass
class PlannedChange:
    """What a sync does (or, on a dry run, would do) to one source: ``action`` is one of
    :data:`SYNC_ACTIONS`; a rename names the old path in ``previous``."""

    action: str
    source: str
    previous: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        return out


@dataclass
class SyncReport(_ResultTotals):
    """The outcome of one sync pass over ``roots``: the plan, and (unless ``dry_run``) a
    result per source, whose ``status`` is one of :data:`SYNC_STATUSES`."""

    statuses: ClassVar[tuple[str, ...]] = SYNC_STATUSES

    roots: list[str]
    dry_run: bool = False
    plan: list[PlannedChange] = field(default_factory=list)
    results: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0
    index_rebuilt: bool = False
    notebook: str | None = None
    linked: int = 0  # documents put into the notebook (or, on a dry run, to be put)

    @property
    def planned(self) -> dict[str, int]:
        counter = Counter(c.action for c in self.plan)
        return {a: counter.get(a, 0) for a in SYNC_ACTIONS}

    @property
    def changes(self) -> list[PlannedChange]:
        """The plan without the unchanged sources."""
        return [c for c in self.plan if c.action != "unchanged"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "roots": list(self.roots),
            "dry_run": self.dry_run,
            "planned": self.planned,
            "counts": self.counts,
            "chunks_written": self.chunks_written,
            "chunks_embedded": self.chunks_embedded,
            "seconds": round(self.seconds, 3),
            "index_rebuilt": self.index_rebuilt,
            "notebook": self.notebook,
            "linked": self.linked,
            "changes": [c.to_dict() for c in self.changes],
            "results": [r.to_dict() for r in self.results],
        }


@dataclass
class Hit:
    """One matching chunk, with where it comes from and why it matched.

    ``char_start``/``char_end`` locate the chunk in its document's text; ``page`` and
    ``last_page`` are the pages it spans (when the format has pages). ``score`` estimates
    the probability that the chunk is relevant to the query, from the query and the chunk
    alone (:mod:`surrealdocs.parts.relevance`): the same chunk scores the same under any
    filter, limit or grouping. Hybrid hits carry each leg's rank and score (``None`` where
    a leg did not find it), which decide the order.
    """

    chunk_id: str
    document_id: str
    source: str
    title: str | None
    mime_type: str
    content: str
    chunk_index: int
    char_start: int
    char_end: int
    page: int | None
    last_page: int | None
    score: float
    text_rank: int | None = None
    vector_rank: int | None = None
    text_score: float | None = None
    vector_score: float | None = None
    # the section headings the chunk lies under ("Chapter 2 › Eligibility"), if any
    context: str | None = None
    # the evidence of ``score`` (the probability that the hit is relevant): the cosine
    # similarity of query and chunk, and the share of the query's IDF the chunk holds
    similarity: float | None = None
    coverage: float | None = None
    # the metadata of the user's own on its document (--meta, the API's metadata)
    metadata: dict[str, Any] | None = None
    # with a reranker: its score (0-1: how well the passage answers the query, as the
    # reranker judges) and the hit's rank in the first stage
    rerank_score: float | None = None
    first_rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        return out


@dataclass
class Stats:
    """What a store holds."""

    url: str
    schema_version: int
    model: str
    dimension: int
    documents: int
    chunks: int
    sources: dict[str, int] = field(default_factory=dict)
    mime_types: dict[str, int] = field(default_factory=dict)
    vectors_outside_graph: int = 0
    notebooks: int = 0
    # what ranks BM25: {"kind": "engine"} or the text index's segments, postings, dead chunks
    text_index: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        return out


@dataclass
class ChunkSpan:
    """Where one chunk lies in its document's text."""

    chunk_id: str
    index: int
    char_start: int
    char_end: int
    page: int | None = None
    last_page: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        return out


@dataclass
class Document:
    """A stored document: what it is, where it came from, and (when asked for) its text and
    where its chunks lie in that text."""

    id: str
    source: str | None
    sources: list[str]
    title: str | None
    mime_type: str
    chunk_count: int
    characters: int
    page_count: int | None = None
    ingested_at: Any = None
    updated_at: Any = None
    notebooks: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    authors: list[str] | None = None
    languages: list[str] | None = None
    embedding_model: str | None = None
    content: str | None = None
    metadata: dict[str, Any] | None = None
    chunks: list[ChunkSpan] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        return out


@dataclass
class Passage:
    """A stretch of a document's text: a chunk with its neighbours, or a range of pages."""

    document_id: str
    source: str | None
    title: str | None
    text: str
    char_start: int
    char_end: int
    first_page: int | None = None
    last_page: int | None = None
    chunks: list[ChunkSpan] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        return out
