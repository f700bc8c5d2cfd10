"""Notebooks: Open Notebook's model (notebooks, sources, source embeddings, notes) as a part
of the knowledge base (``kb.notebooks``).

A *source* is a core document and its *source embeddings* are the core's chunks, so a
notebook shares the extraction, chunking, embedding, storage and search code of everything
else. Graph edges say what belongs where: ``source ->reference-> notebook`` and
``note ->artifact-> notebook``; a source may be in several notebooks. Each chunk also keeps
the list of its source's notebooks (changed in the same transaction as the edges), so a
search scoped to a notebook filters inside the query: ``kb.search(..., notebook=nb)``.

``Source.vectorize()`` queues chunking and embedding as a job (:mod:`surrealdocs.core.job_runner`).
Re-vectorizing writes a new generation of chunks and switches to it in one small
transaction, so searches see the old chunks or the new ones, never a mix.

>>> kb = await KnowledgeBase.open()
>>> nb = await kb.notebooks.create_notebook("Research", description="papers on retrieval")
>>> source = await kb.notebooks.add_text(nb, title="Notes", text="...", topics=["rag"])
>>> job = await source.vectorize()
>>> await job.wait()
>>> hits = await kb.search("dense retrieval", notebook=nb, mode="vector", min_score=0.2)

Open Notebook's own search calls (``vector_search`` and its siblings) are a face:
:mod:`surrealdocs.faces.open_notebook`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surrealdb import RecordID

from ..config import Settings
from ..embed import EmbeddingRunner
from ..errors import AlreadyExistsError, ConfigurationError, NotFoundError
from ..parts.digest import sha256
from ..parts.filters import Filters
from ..parts.results import Hit, IngestReport, id_text, jsonable
from ..store.connection import Store
from ..store.documents import record_id
from ..store.storage import Storage
from .ingest import Ingestor
from .job_runner import Job, JobService, Report
from .sync import check_glob

_KEY = re.compile(r"[A-Za-z0-9_-]{1,100}")  # a record key that needs no escaping

__all__ = [
    "NotFoundError",
    "Note",
    "Notebook",
    "NotebookService",
    "Source",
    "SourceEmbedding",
    "SourceMatch",
]


@dataclass
class Notebook:
    """A named collection of sources (and notes)."""

    name: str
    description: str = ""
    archived: bool = False
    id: RecordID | None = None
    created: Any = None
    updated: Any = None
    source_count: int | None = None
    _service: NotebookService | None = field(default=None, repr=False, compare=False)

    async def save(self) -> Notebook:
        return await _attached(self).save_notebook(self)

    async def delete(self, *, delete_exclusive_sources: bool = False) -> None:
        await _attached(self).delete_notebook(
            self, delete_exclusive_sources=delete_exclusive_sources)

    async def add_source(self, source: Source) -> None:
        await _attached(self).link(source, self)

    async def remove_source(self, source: Source) -> None:
        await _attached(self).unlink(source, self)

    async def get_sources(self) -> list[Source]:
        return await _attached(self).sources(notebook=self)

    async def add_note(self, note: Note) -> None:
        await _attached(self).add_note(self, note)

    async def get_notes(self) -> list[Note]:
        return await _attached(self).notes(self)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        return out


@dataclass
class Source:
    """A source's text is a core document (its id is the SHA-256 of the text)."""

    title: str | None = None
    full_text: str = ""
    asset: dict[str, Any] | None = None
    topics: list[str] = field(default_factory=list)
    id: RecordID | None = None
    created: Any = None
    updated: Any = None
    chunk_count: int = 0
    source: str | None = None
    mime_type: str | None = None
    _service: NotebookService | None = field(default=None, repr=False, compare=False)

    async def save(self) -> Source:
        return await _attached(self).save_source(self)

    async def vectorize(self) -> Job:
        """Queue chunking and embedding of ``full_text`` as a background job."""
        return await _attached(self).queue_vectorize(self)

    async def delete(self) -> None:
        await _attached(self).delete_source(self)

    async def get_embeddings(self) -> list[SourceEmbedding]:
        return await _attached(self).embeddings(self)

    async def notebooks(self) -> list[Notebook]:
        return await _attached(self).notebooks_of(self)

    def to_dict(self, *, text: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        if not text:
            out.pop("full_text", None)
        return out


@dataclass
class SourceEmbedding:
    """One chunk of a source, with its vector (Open Notebook's ``source_embedding``)."""

    source: RecordID
    chunk_index: int
    chunk_text: str
    embedding: list[float]
    id: RecordID | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        return out


@dataclass
class Note:
    title: str = ""
    content: str = ""
    embedded: bool = False
    id: RecordID | None = None
    created: Any = None
    updated: Any = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable(self)
        return out


@dataclass
class SourceMatch:
    """Search results grouped per source: the best chunks as matches."""

    source_id: str
    title: str | None
    score: float
    matches: list[Hit]

    def to_dict(self) -> dict[str, Any]:
        return {"source_id": self.source_id, "title": self.title, "score": self.score,
                "matches": [h.to_dict() for h in self.matches]}


def _attached(entity: Notebook | Source) -> NotebookService:
    if entity._service is None:
        raise ConfigurationError(
            f"this {type(entity).__name__.lower()} is not attached to a knowledge base")
    return entity._service


class NotebookService:
    """The notebooks of one knowledge base (``kb.notebooks``): notebooks, their sources and
    notes, and the ``vectorize`` jobs of sources."""

    def __init__(self, storage: Storage, settings: Settings, embedding: EmbeddingRunner | None,
                 jobs: JobService, ingestor: Ingestor) -> None:
        self.storage = storage
        self.store: Store = storage.store
        self.settings = settings
        self.embedding = embedding
        self._jobs = jobs
        self.ingestor = ingestor
        jobs.register("vectorize", self._vectorize)

    @property
    def _embedding(self) -> EmbeddingRunner:
        if self.embedding is None:
            raise ConfigurationError("notebooks need an embedding model (embed=True)")
        return self.embedding

    # ----- notebooks -----------------------------------------------------------------
    async def for_writing(self, ref: Any, *, create: bool = True) -> Notebook:
        """The notebook a write files documents into, by one rule for every face: found by
        id or name, or, for a name no notebook has, made when ``create`` (an id that is
        not there is not found)."""
        try:
            return await self.get_notebook(ref)
        except NotFoundError:
            if not create or not isinstance(ref, str) \
                    or ref.startswith(self.storage.notebooks.table + ":"):
                raise
        try:
            return await self.create_notebook(ref)
        except AlreadyExistsError:  # made by another write meanwhile
            return await self.get_notebook(ref)

    async def create_notebook(self, name: str, description: str = "") -> Notebook:
        return await self.save_notebook(Notebook(name=name, description=description))

    async def save_notebook(self, nb: Notebook) -> Notebook:
        if not isinstance(nb.name, str) or not nb.name.strip():
            raise ConfigurationError("a notebook needs a name")
        data = {"name": nb.name, "description": nb.description, "archived": nb.archived}
        if nb.id is None:
            if await self.storage.notebooks.find(nb.name):
                raise AlreadyExistsError(f"a notebook named {nb.name!r} exists already")
            row = await self.storage.notebooks.create(data)
            await self.storage.chunks.graphs.define_notebook_table(row["id"])
        else:
            updated = await self.storage.notebooks.update(nb.id, data)
            if updated is None:
                raise NotFoundError(f"no notebook {nb.id}")
            row = updated
        saved = self._notebook(row)
        nb.__dict__.update({k: v for k, v in saved.__dict__.items() if k != "source_count"})
        return nb

    async def resolve(self, ref: Any) -> RecordID:
        """A notebook's record id from a Notebook, a record id, ``notebook:x`` or a name."""
        return _require_id(await self.get_notebook(ref))

    async def get_notebook(self, ref: Any) -> Notebook:
        """A notebook by id (``notebook:x``, a RecordID, or the key ``x`` alone when no
        notebook is named ``x``) or by name."""
        if isinstance(ref, Notebook):
            if ref.id is None:
                raise ConfigurationError("save the notebook first")
            ref = ref.id
        table = self.storage.notebooks.table
        row: dict[str, Any] | None = None
        if isinstance(ref, RecordID) or str(ref).startswith(table + ":"):
            rid = record_id(ref, table)
            if rid.table_name != table:
                raise NotFoundError(f"no notebook {ref!r}")
            row = await self.storage.notebooks.get(rid)
        if row is None and isinstance(ref, str):
            row = await self.storage.notebooks.find(ref)
            if row is None and _KEY.fullmatch(ref.strip("⟨⟩`")):  # the id's key alone
                row = await self.storage.notebooks.get(record_id(ref, table))
        if row is None:
            raise NotFoundError(f"no notebook {ref!r}")
        return self._notebook(row)

    async def list_notebooks(self, archived: bool | None = None) -> list[Notebook]:
        return [self._notebook(r) for r in await self.storage.notebooks.select(archived)]

    async def delete_notebook(self, nb: Notebook | Any, *,
                              delete_exclusive_sources: bool = False) -> None:
        """Delete a notebook, its edges and its notes; with ``delete_exclusive_sources``
        also the sources no other notebook references."""
        notebook = await self.resolve(nb)
        storage = self.storage
        exclusive = await storage.documents.exclusive_to(notebook) \
            if delete_exclusive_sources else []
        for source in await self.sources(notebook=notebook):
            if source.id not in exclusive:
                await self._set_membership(_require_id(source), notebook, add=False)
        for doc in exclusive:
            await self._delete_document(doc)
        await self.store.transaction(storage.notebooks.delete_statement(notebook),
                                        storage.chunks.graphs.drop_notebook_table_statement(notebook))

    # ----- sources ---------------------------------------------------------------------
    async def add_text(self, notebook: Notebook | Any | None, *, text: str,
                       title: str | None = None, topics: Sequence[str] = (),
                       asset: dict[str, Any] | None = None) -> Source:
        """Save a source from text and put it in ``notebook`` (not yet vectorized)."""
        source = Source(title=title, full_text=text, topics=list(topics),
                        asset=asset or {"kind": "text"}, _service=self)
        source = await self.save_source(source)
        if notebook is not None:
            await self.link(source, notebook)
        return source

    async def add_paths(self, notebook: Notebook | Any, paths: Iterable[str | Path], *,
                        topics: Sequence[str] = (), **ingest_options: Any) -> IngestReport:
        """Ingest files with the core pipeline (extract, chunk, embed, store) and put the
        resulting sources in ``notebook``."""
        nb = await self.resolve(notebook)
        topic_list = check_topics(topics)
        check_glob(ingest_options.get("glob", "**/*"))
        report = await self.ingestor.ingest_paths(paths, **ingest_options)
        linked, filed = await self.file_documents(report, nb, topic_list)
        report.notebook, report.linked, report.in_notebook = id_text(nb), linked, filed
        return report

    async def file_documents(self, documents: IngestReport | Iterable[Any],
                             notebook: Notebook | Any = None,
                             topics: Sequence[str] = ()) -> tuple[int, int]:
        """Put documents (an ingest's, or ids) in ``notebook`` and tag them with ``topics``:
        the one way every face files what it wrote. Returns (documents put in the notebook
        now, documents filed)."""
        topic_list = check_topics(topics)
        ids = (r.document_id for r in documents.results if r.document_id) \
            if isinstance(documents, IngestReport) else documents
        docs = list(dict.fromkeys(self.storage.documents.document_id(d) for d in ids))
        if topic_list:
            for doc in docs:
                await self.storage.documents.add_topics(doc, topic_list)
        linked = 0 if notebook is None else await self.link_documents(notebook, docs)
        return linked, len(docs)

    async def link_documents(self, notebook: Notebook | Any, docs: Iterable[Any], *,
                             dry_run: bool = False) -> int:
        """Put documents (ids) in ``notebook``, those not in it yet; how many that is
        (with ``dry_run``: how many it would be, changing nothing)."""
        nb = await self.resolve(notebook)
        ids = sorted({self.storage.documents.document_id(d) for d in docs}, key=str)
        missing = await self.storage.documents.not_in_notebook(ids, nb) if ids else []
        if dry_run:
            return len(missing)
        for doc in missing:
            await self._set_membership(doc, nb, add=True, rebuild=False)
        if missing:
            await self.storage.chunks.graphs.rebuild_notebook_if_due(nb)
        return len(missing)

    async def save_source(self, source: Source) -> Source:
        """Create the source, or update its title/topics; new text makes a new source
        (ids are content hashes) that takes over the old one's notebooks."""
        if not isinstance(source.full_text, str) or not source.full_text.strip():
            raise ConfigurationError("a source needs text")
        documents = self.storage.documents
        content_hash = sha256(source.full_text)
        new_id = documents.document_id(content_hash)
        asset = source.asset or {"kind": "text"}
        label = asset.get("path") or asset.get("url") or f"text://{content_hash[:16]}"
        data = {"title": source.title, "topics": list(source.topics), "asset": asset}
        old_id = source.id
        replacing = old_id is not None and old_id != new_id
        if not await documents.exists(new_id):
            await documents.create_text(new_id, {
                **{k: v for k, v in data.items() if v is not None},
                # `source` is UNIQUE: a new version takes it once the old one is gone
                "source": None if replacing else label, "sources": [label],
                "content": source.full_text, "mime_type": "text/plain",
                "content_hash": content_hash, "chunk_count": 0,
                "embedding_model": self.embedding.name if self.embedding else None})
        else:
            await documents.update(new_id, {k: v for k, v in data.items() if v is not None})
        if replacing:
            assert old_id is not None
            for nb in await self.storage.notebooks.of_document(old_id):
                await self._set_membership(new_id, nb["id"], add=True)
            await self._delete_document(old_id)
            await documents.update(new_id, {"source": label})
        saved = await self.get_source(new_id)
        source.__dict__.update({k: v for k, v in saved.__dict__.items()})
        return source

    async def get_source(self, ref: Any) -> Source:
        row = await self.storage.documents.get(self.storage.documents.document_id(ref))
        if not row:
            raise NotFoundError(f"no source {ref!r}")
        return self._source(row)

    async def sources(self, notebook: Notebook | Any | None = None) -> list[Source]:
        nb = None if notebook is None else await self.resolve(notebook)
        rows = await self.storage.documents.select(filters=Filters(notebook=nb))
        return [self._source(r) for r in rows]

    async def notebooks_of(self, source: Source | Any) -> list[Notebook]:
        rows = await self.storage.notebooks.of_document(self._sid(source))
        return [self._notebook(r) for r in rows]

    async def link(self, source: Source | Any, notebook: Notebook | Any) -> None:
        """Put a source in a notebook (idempotent)."""
        await self._set_membership(self._sid(source), await self.resolve(notebook), add=True)

    async def unlink(self, source: Source | Any, notebook: Notebook | Any) -> None:
        """Take a source out of a notebook (the source stays)."""
        await self._set_membership(self._sid(source), await self.resolve(notebook), add=False)

    async def delete_source(self, source: Source | Any) -> None:
        await self._delete_document(self._sid(source))

    async def embeddings(self, source: Source | Any) -> list[SourceEmbedding]:
        rows = await self.storage.chunks.of_document(self._sid(source))
        return [SourceEmbedding(source=r["document"], chunk_index=r["chunk_index"],
                                chunk_text=r["content"], embedding=r.get("embedding") or [],
                                id=r["id"]) for r in rows]

    def _sid(self, source: Source | Any) -> RecordID:
        if isinstance(source, Source):
            if source.id is None:
                raise ConfigurationError("save the source first")
            return source.id
        return self.storage.documents.document_id(source)

    async def _set_membership(self, doc: RecordID, notebook: RecordID, *, add: bool,
                              rebuild: bool = True) -> None:
        """Change a source's notebooks: the edge, the source's list, its chunks' lists and
        the notebook's vector copies, in one transaction."""
        storage = self.storage
        if not await storage.documents.exists(doc):
            raise NotFoundError(f"no source {doc}")
        edge = (storage.notebooks.link_statement if add
                else storage.notebooks.unlink_statement)(doc, notebook)
        await self.store.transaction(
            edge, storage.documents.membership_statement(doc, notebook, add=add),
            *storage.chunks.membership_statements(doc, notebook, add=add))
        if add and rebuild:
            await storage.chunks.graphs.rebuild_notebook_if_due(notebook)

    async def _delete_document(self, doc: RecordID) -> None:
        await self.ingestor.delete_document(doc)

    # ----- notes -----------------------------------------------------------------------
    async def add_note(self, notebook: Notebook | Any, note: Note) -> Note:
        nb = await self.resolve(notebook)
        data: dict[str, Any] = {"title": note.title, "content": note.content}
        if note.embedded or note.content:
            (vector,) = await self._embedding.documents([f"{note.title}\n{note.content}"])
            data["embedding"] = [float(x) for x in vector]
        row = await self.storage.notebooks.add_note(
            RecordID(self.storage.notebooks.note, uuid.uuid4().hex), nb, data)
        note.__dict__.update(self._note(row).__dict__)
        return note

    async def notes(self, notebook: Notebook | Any) -> list[Note]:
        rows = await self.storage.notebooks.notes(await self.resolve(notebook))
        return [self._note(r) for r in rows]

    # ----- jobs ------------------------------------------------------------------------
    async def queue_vectorize(self, source: Source | Any) -> Job:
        """Queue chunking and embedding of a source's text (runs in the background)."""
        self._embedding  # noqa: B018 - refuse before queueing when the store has no model
        return await self._jobs.submit("vectorize", target=self._sid(source))

    async def get_job(self, ref: Any) -> Job:
        return await self._jobs.get(ref)

    async def jobs(self, status: str | None = None) -> list[Job]:
        return await self._jobs.list(status=status)

    async def run_pending_jobs(self) -> int:
        return await self._jobs.run_pending()

    async def _vectorize(self, job: Job, report: Report) -> dict[str, Any]:
        storage, target = self.storage, job.target
        if target is None:
            raise ConfigurationError("a vectorize job needs a source")
        doc = await storage.documents.text_of(target)
        if not doc:
            raise NotFoundError(f"source {target} no longer exists")
        chunks = await self.ingestor.chunks_of(doc["content"], doc.get("page_starts"),
                                               doc.get("headings"))
        generation = int(doc.get("generation") or 0) + 1
        notebooks = list(doc.get("notebooks") or [])
        # chunks of the new generation are invisible until the switch below
        await storage.chunks.delete_generation(target, generation)
        batch = self._embedding.batch_size
        for start in range(0, len(chunks), batch):
            part = chunks[start:start + batch]
            # the previous generation's texts (or any stored) keep their vectors
            vectors = await self.ingestor.writer.vectors_for(part)
            rows = storage.chunks.rows(target, part, vectors, generation=generation,
                                       notebooks=notebooks)
            async with self.store.write_lock:
                await storage.chunks.insert(rows)
            await report(min(start + batch, len(chunks)) / max(len(chunks), 1))
        async with self.store.write_lock:
            await self.store.transaction(
                storage.documents.generation_statement(target, generation, len(chunks)),
                *storage.chunks.switch_statements(target, generation, len(chunks), notebooks))
        # the previous generations are invisible now: drop them
        await storage.chunks.delete_other_generations(target, generation)
        await storage.chunks.graphs.rebuild_if_due()
        for nb in notebooks:
            await storage.chunks.graphs.rebuild_notebook_if_due(nb)
        return {"chunks": len(chunks), "generation": generation}

    # ----- rows to objects -------------------------------------------------------------
    def _notebook(self, row: dict[str, Any]) -> Notebook:
        count = row.get("source_count")
        return Notebook(name=row["name"], description=row.get("description", ""),
                        archived=bool(row.get("archived")), id=row["id"],
                        created=row.get("created"), updated=row.get("updated"),
                        source_count=int(count) if count is not None else None, _service=self)

    def _source(self, row: dict[str, Any]) -> Source:
        return Source(title=row.get("title"), full_text=row.get("content", ""),
                      asset=row.get("asset"), topics=list(row.get("topics") or []),
                      id=row["id"], created=row.get("ingested_at"),
                      updated=row.get("updated_at"),
                      chunk_count=int(row.get("chunk_count") or 0), source=row.get("source"),
                      mime_type=row.get("mime_type"), _service=self)

    @staticmethod
    def _note(row: dict[str, Any]) -> Note:
        return Note(title=row["title"], content=row["content"],
                    embedded=row.get("embedding") is not None, id=row["id"],
                    created=row.get("created"), updated=row.get("updated"))



def _require_id(obj: Notebook | Source) -> RecordID:
    if obj.id is None:
        raise ConfigurationError(f"save the {type(obj).__name__.lower()} first")
    return obj.id


def check_topics(topics: Sequence[str] | str) -> list[str]:
    """Topics as stored: each a non-empty text of at most 200 characters, trimmed."""
    if isinstance(topics, str):
        topics = [topics]
    out = []
    for topic in topics:
        if not isinstance(topic, str) or not topic.strip() or len(topic) > 200:
            raise ConfigurationError(f"a topic is a non-empty text of at most 200 characters,"
                                     f" got {topic!r}")
        out.append(topic.strip())
    return out
