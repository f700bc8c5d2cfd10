"""Notebooks: Open Notebook's model (notebooks, sources, source embeddings, notes) on the core.

A *source* is a core document and its *source embeddings* are the core's chunks, so a
notebook shares the extraction, chunking, embedding, storage and search code of everything
else. Graph edges say what belongs where: ``source ->reference-> notebook`` and
``note ->artifact-> notebook``; a source may be in several notebooks. Each chunk also keeps the
list of its source's notebooks (changed in the same transaction as the edges), so a search
scoped to a notebook filters on the chunk itself, inside the query.

``Source.vectorize()`` queues chunking and embedding as a job recorded in the database
(queued → running → done | failed, with progress and error). A runner in the background works
through the queue; a job interrupted by a crash is queued again when the store is reopened.
Re-vectorizing writes a new generation of chunks and switches to it in one small transaction,
so searches see the old chunks or the new ones, never a mix.

>>> nbs = await Notebooks.open()
>>> nb = await nbs.create_notebook("Research", description="papers on retrieval")
>>> source = await nbs.add_text(nb, title="Notes", text="...", topics=["rag"])
>>> job = await source.vectorize()
>>> await job.wait()
>>> hits = await nbs.vector_search("dense retrieval", notebook_id=nb.id, min_score=0.2)
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surrealdb import RecordID

from .chunk import assign_pages, chunk_text
from .config import Settings
from .embed import Embedder
from .errors import ConfigurationError, SurrealDocsError
from .ingest import (
    CHUNK_ROWS_PER_STATEMENT,
    IngestReport,
    chunk_row,
    copy_vectors_sql,
    sha256,
)
from .kb import KnowledgeBase
from .search import Filters, Hit
from .store.connection import Store

JOB_STATUSES = ("queued", "running", "done", "failed")


class NotFoundError(SurrealDocsError, LookupError):
    """No notebook, source, note or job with that id or name."""


def _rid(value: Any, table: str) -> RecordID:
    if isinstance(value, RecordID):
        return value
    text = str(value)
    if text.startswith(table + ":"):
        text = text[len(table) + 1:]
    return RecordID(table, text.strip("⟨⟩`"))


@dataclass
class Notebook:
    name: str
    description: str = ""
    archived: bool = False
    id: RecordID | None = None
    created: Any = None
    updated: Any = None
    _nbs: Notebooks | None = field(default=None, repr=False, compare=False)

    async def save(self) -> Notebook:
        return await self._service.save_notebook(self)

    async def delete(self, *, delete_exclusive_sources: bool = False) -> None:
        await self._service.delete_notebook(self, delete_exclusive_sources=delete_exclusive_sources)

    async def add_source(self, source: Source) -> None:
        await self._service.link(source, self)

    async def remove_source(self, source: Source) -> None:
        await self._service.unlink(source, self)

    async def get_sources(self) -> list[Source]:
        return await self._service.sources(notebook=self)

    async def add_note(self, note: Note) -> None:
        await self._service.add_note(self, note)

    async def get_notes(self) -> list[Note]:
        return await self._service.notes(self)

    @property
    def _service(self) -> Notebooks:
        if self._nbs is None:
            raise ConfigurationError("this notebook is not attached to a store")
        return self._nbs


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
    _nbs: Notebooks | None = field(default=None, repr=False, compare=False)

    async def save(self) -> Source:
        return await self._service.save_source(self)

    async def vectorize(self) -> Job:
        """Queue chunking and embedding of ``full_text`` as a background job."""
        return await self._service.queue_vectorize(self)

    async def delete(self) -> None:
        await self._service.delete_source(self)

    async def get_embeddings(self) -> list[SourceEmbedding]:
        return await self._service.embeddings(self)

    async def notebooks(self) -> list[Notebook]:
        return await self._service.notebooks_of(self)

    @property
    def _service(self) -> Notebooks:
        if self._nbs is None:
            raise ConfigurationError("this source is not attached to a store")
        return self._nbs


@dataclass
class SourceEmbedding:
    source: RecordID
    chunk_index: int
    chunk_text: str
    embedding: list[float]
    id: RecordID | None = None


@dataclass
class Note:
    title: str = ""
    content: str = ""
    embedded: bool = False
    id: RecordID | None = None
    created: Any = None
    updated: Any = None


@dataclass
class Job:
    id: RecordID
    kind: str
    target: RecordID
    status: str
    progress: float = 0.0
    error: str | None = None
    attempts: int = 0
    created: Any = None
    updated: Any = None
    _nbs: Notebooks | None = field(default=None, repr=False, compare=False)

    async def refresh(self) -> Job:
        assert self._nbs is not None
        fresh = await self._nbs.get_job(self.id)
        self.__dict__.update({k: v for k, v in fresh.__dict__.items() if k != "_nbs"})
        return self

    async def wait(self, timeout: float | None = None, poll: float = 0.05) -> Job:
        """Wait until the job is done or failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            await self.refresh()
            if self.status in ("done", "failed"):
                return self
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {self.id} still {self.status} after {timeout} s")
            await asyncio.sleep(poll)


@dataclass
class SourceMatch:
    """Search results grouped per source: the best chunks as matches."""

    source_id: str
    title: str | None
    score: float
    matches: list[Hit]


class Notebooks:
    """Notebooks, sources and notes in one knowledge base, with a background job runner."""

    def __init__(self, kb: KnowledgeBase, *, run_jobs: bool = True) -> None:
        self.kb = kb
        self.store: Store = kb.store
        self.names = kb.store.names
        self._wake = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._run_jobs = run_jobs

    @property
    def _embedder(self) -> Embedder:
        if self.kb.embedder is None:
            raise ConfigurationError("notebooks need an embedding model (embed=True)")
        return self.kb.embedder

    @classmethod
    async def open(cls, db: str | None = None, *, settings: Settings | None = None,
                   embedder: Embedder | None = None, run_jobs: bool = True,
                   **overrides: Any) -> Notebooks:
        kb = await KnowledgeBase.open(db, settings=settings, embedder=embedder, **overrides)
        nbs = cls(kb, run_jobs=run_jobs)
        await nbs._requeue_interrupted()
        if run_jobs:
            nbs.start()
        return nbs

    def start(self) -> None:
        if self._runner is None:
            self._runner = asyncio.get_running_loop().create_task(self._run_forever())

    async def close(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
            self._runner = None
        await self.kb.close()

    async def __aenter__(self) -> Notebooks:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ----- notebooks -----------------------------------------------------------------
    async def create_notebook(self, name: str, description: str = "") -> Notebook:
        return await self.save_notebook(Notebook(name=name, description=description))

    async def save_notebook(self, nb: Notebook) -> Notebook:
        if not nb.name.strip():
            raise ConfigurationError("a notebook needs a name")
        data = {"name": nb.name, "description": nb.description, "archived": nb.archived}
        if nb.id is None:
            (row,) = await self.store.query(
                f"CREATE ONLY {self.names.notebook} CONTENT $data;", {"data": data})
            await self._define_vector_table(row["id"])
        else:
            (row,) = await self.store.query("UPDATE ONLY $id MERGE $data;",
                                            {"id": nb.id, "data": data})
        return self._notebook(row)

    async def _define_vector_table(self, nb: RecordID) -> None:
        n, settings = self.names, self.kb.settings
        t = n.notebook_vectors(nb)
        await self.store.query(
            f"DEFINE TABLE IF NOT EXISTS {t} SCHEMAFULL;"
            f" DEFINE FIELD IF NOT EXISTS chunk ON {t} TYPE record<{n.chunks}>"
            "   REFERENCE ON DELETE CASCADE;"
            f" DEFINE FIELD IF NOT EXISTS document ON {t} TYPE record<{n.documents}>;"
            f" DEFINE FIELD IF NOT EXISTS embedding ON {t} TYPE array<float>;"
            f" DEFINE INDEX IF NOT EXISTS {t}_document ON {t} FIELDS document;"
            f" DEFINE INDEX IF NOT EXISTS {t}_hnsw ON {t} FIELDS embedding HNSW"
            f" DIMENSION {int(self._embedder.dimension)} DIST {settings.hnsw_distance}"
            f" TYPE F32 EFC {int(settings.hnsw_efc)} M {int(settings.hnsw_m)};")

    async def rebuild_notebook_index(self, nb: RecordID, force: bool = False) -> bool:
        """Build a notebook's HNSW graph once enough of its vectors wait outside it."""
        (pending,) = await self.store.query("SELECT VALUE pending_vectors FROM ONLY $nb;",
                                            {"nb": nb})
        if not force and int(pending or 0) < self.kb.settings.rebuild_threshold:
            return False
        t = self.names.notebook_vectors(nb)
        await self.store.build_index(f"REBUILD INDEX {t}_hnsw ON {t};"
                               " UPDATE $nb SET pending_vectors = 0 RETURN NONE;", {"nb": nb})
        return True

    async def get_notebook(self, ref: Any) -> Notebook:
        """A notebook by id (``notebook:x`` or RecordID) or by name."""
        if isinstance(ref, Notebook):
            ref = ref.id
        rows: list[dict[str, Any]] = []
        if isinstance(ref, RecordID) or str(ref).startswith(self.names.notebook + ":"):
            (row,) = await self.store.query("SELECT * FROM ONLY $id;",
                                            {"id": _rid(ref, self.names.notebook)})
            rows = [row] if row else []
        if not rows:
            (rows,) = await self.store.query(
                f"SELECT * FROM {self.names.notebook} WHERE name = $name;", {"name": str(ref)})
        if not rows:
            raise NotFoundError(f"no notebook {ref!r}")
        return self._notebook(rows[0])

    async def list_notebooks(self, archived: bool | None = None) -> list[Notebook]:
        where = "" if archived is None else " WHERE archived = $archived"
        (rows,) = await self.store.query(
            f"SELECT * FROM {self.names.notebook}{where} ORDER BY created;",
            {"archived": archived})
        return [self._notebook(r) for r in rows]

    async def delete_notebook(self, nb: Notebook | Any, *,
                              delete_exclusive_sources: bool = False) -> None:
        """Delete a notebook, its edges and its notes; with ``delete_exclusive_sources``
        also the sources no other notebook references."""
        nb = nb if isinstance(nb, Notebook) else await self.get_notebook(nb)
        n = self.names
        exclusive: list[RecordID] = []
        if delete_exclusive_sources:
            (exclusive,) = await self.store.query(
                f"SELECT VALUE id FROM {n.documents} WHERE notebooks CONTAINS $nb"
                " AND array::len(notebooks) = 1;", {"nb": nb.id})
        for source in await self.sources(notebook=nb):
            if source.id not in exclusive:
                await self._set_membership(self._sid(source), remove=nb.id)
        for source_id in exclusive:
            await self._delete_document(source_id)
        await self.store.query(
            f"BEGIN; DELETE {n.note} WHERE id IN (SELECT VALUE in FROM {n.artifact}"
            f" WHERE out = $nb); DELETE $nb; REMOVE TABLE IF EXISTS"
            f" {n.notebook_vectors(_require_id(nb))}; COMMIT;", {"nb": nb.id})

    # ----- sources ---------------------------------------------------------------------
    async def add_text(self, notebook: Notebook | Any | None, *, text: str,
                       title: str | None = None, topics: Sequence[str] = (),
                       asset: dict[str, Any] | None = None) -> Source:
        """Save a source from text and put it in ``notebook`` (not yet vectorized)."""
        source = Source(title=title, full_text=text, topics=list(topics),
                        asset=asset or {"kind": "text"}, _nbs=self)
        source = await self.save_source(source)
        if notebook is not None:
            await self.link(source, notebook)
        return source

    async def add_paths(self, notebook: Notebook | Any, paths: Iterable[str | Path], *,
                        topics: Sequence[str] = (), **ingest_options: Any) -> IngestReport:
        """Ingest files with the core pipeline (extract, chunk, embed, store) and put the
        resulting sources in ``notebook``."""
        nb = notebook if isinstance(notebook, Notebook) else await self.get_notebook(notebook)
        report = await self.kb.ingest(paths, **ingest_options)
        for result in report.results:
            if result.document_id:
                doc = _rid(result.document_id, self.names.documents)
                if topics:
                    await self.store.query(
                        "UPDATE $doc SET topics = array::union(topics, $topics) RETURN NONE;",
                        {"doc": doc, "topics": list(topics)})
                await self._set_membership(doc, add=nb.id)
        return report

    async def save_source(self, source: Source) -> Source:
        """Create the source, or update its title/topics; new text makes a new source
        (ids are content hashes) that takes over the old one's notebooks."""
        if not source.full_text.strip():
            raise ConfigurationError("a source needs text")
        n = self.names
        content_hash = sha256(source.full_text)
        new_id = RecordID(n.documents, content_hash)
        label = (source.asset or {}).get("path") or (source.asset or {}).get("url") \
            or f"text://{content_hash[:16]}"
        data = {"title": source.title, "topics": list(source.topics),
                "asset": source.asset or {"kind": "text"}}
        old_id = source.id
        (existing,) = await self.store.query("SELECT VALUE id FROM ONLY $id;", {"id": new_id})
        if existing is None:
            await self.store.query(
                "CREATE $id CONTENT $doc RETURN NONE;",
                {"id": new_id, "doc": {**{k: v for k, v in data.items() if v is not None},
                                       "source": label, "sources": [label],
                                       "content": source.full_text, "mime_type": "text/plain",
                                       "content_hash": content_hash, "chunk_count": 0,
                                       "embedding_model": self._embedder.name,
                                       "complete": True}})
        else:
            await self.store.query("UPDATE $id MERGE $data RETURN NONE;",
                                   {"id": new_id, "data": {k: v for k, v in data.items()
                                                           if v is not None}})
        if old_id is not None and old_id != new_id:
            for nb in await self.notebooks_of(source):
                await self._set_membership(new_id, add=nb.id)
            await self._delete_document(old_id)
        return await self.get_source(new_id)

    async def get_source(self, ref: Any) -> Source:
        (row,) = await self.store.query("SELECT * FROM ONLY $id;",
                                        {"id": _rid(ref, self.names.documents)})
        if not row:
            raise NotFoundError(f"no source {ref!r}")
        return self._source(row)

    async def sources(self, notebook: Notebook | Any | None = None) -> list[Source]:
        if notebook is None:
            (rows,) = await self.store.query(
                f"SELECT * FROM {self.names.documents} ORDER BY ingested_at;")
        else:
            nb = notebook if isinstance(notebook, Notebook) else \
                await self.get_notebook(notebook)
            (rows,) = await self.store.query(
                f"SELECT * FROM {self.names.documents} WHERE notebooks CONTAINS $nb"
                " ORDER BY ingested_at;", {"nb": nb.id})
        return [self._source(r) for r in rows]

    async def notebooks_of(self, source: Source | Any) -> list[Notebook]:
        sid = self._sid(source)
        (rows,) = await self.store.query(
            f"SELECT * FROM {self.names.notebook} WHERE id IN"
            f" (SELECT VALUE out FROM {self.names.reference} WHERE in = $s);", {"s": sid})
        return [self._notebook(r) for r in rows]

    async def link(self, source: Source | Any, notebook: Notebook | Any) -> None:
        nb = notebook if isinstance(notebook, Notebook) else await self.get_notebook(notebook)
        sid = self._sid(source)
        await self._set_membership(sid, add=nb.id)

    async def unlink(self, source: Source | Any, notebook: Notebook | Any) -> None:
        nb = notebook if isinstance(notebook, Notebook) else await self.get_notebook(notebook)
        sid = self._sid(source)
        await self._set_membership(sid, remove=nb.id)

    def _sid(self, source: Source | Any) -> RecordID:
        if isinstance(source, Source):
            if source.id is None:
                raise ConfigurationError("save the source first")
            return source.id
        return _rid(source, self.names.documents)

    async def _set_membership(self, source_id: RecordID, *, add: RecordID | None = None,
                              remove: RecordID | None = None) -> None:
        """Change a source's notebooks: the edge, the source's list and its chunks' lists,
        in one transaction."""
        n = self.names
        if add is not None:
            nb = add
            t = n.notebook_vectors(nb)
            # the UNIQUE index on (in, out) makes a second RELATE fail: skip it instead
            edge = (f"IF (SELECT VALUE id FROM {n.reference} WHERE in = $s AND out = $nb)"
                    f" = [] {{ RELATE $s->{n.reference}->$nb; }};")
            change = "array::union(notebooks, [$nb])"
            vectors = (f"DELETE {t} WHERE document = $s;"
                       + copy_vectors_sql(n, t, "$s", " AND generation = $s.generation") +
                       f" UPDATE $nb SET pending_vectors += (SELECT VALUE count() FROM {t}"
                       " WHERE document = $s GROUP ALL)[0] OR 0 RETURN NONE;")
        elif remove is not None:
            nb = remove
            edge = f"DELETE {n.reference} WHERE in = $s AND out = $nb;"
            change = "array::complement(notebooks, [$nb])"
            vectors = f"DELETE {n.notebook_vectors(nb)} WHERE document = $s;"
        else:
            return
        await self.store.query(
            f"BEGIN; {edge}"
            f" UPDATE $s SET notebooks = {change} RETURN NONE;"
            f" UPDATE {n.chunks} SET notebooks = {change} WHERE document = $s RETURN NONE;"
            f" {vectors} COMMIT;", {"s": source_id, "nb": nb})
        if add is not None:
            await self.rebuild_notebook_index(add)

    async def delete_source(self, source: Source | Any) -> None:
        sid = self._sid(source)
        await self._delete_document(sid)

    async def _delete_document(self, doc: RecordID) -> None:
        # chunks cascade (record reference); edges go with their node; source records too
        n = self.names
        await self.store.query(
            f"BEGIN; DELETE {n.job} WHERE target = $d; DELETE {n.reference} WHERE in = $d;"
            f" DELETE {n.files} WHERE document = $d; DELETE $d; COMMIT;", {"d": doc})

    async def embeddings(self, source: Source | Any) -> list[SourceEmbedding]:
        sid = self._sid(source)
        (rows,) = await self.store.query(
            f"SELECT id, document, chunk_index, content, embedding FROM {self.names.chunks}"
            " WHERE document = $s AND generation = $s.generation ORDER BY chunk_index;",
            {"s": sid})
        return [SourceEmbedding(source=r["document"], chunk_index=r["chunk_index"],
                                chunk_text=r["content"], embedding=r.get("embedding") or [],
                                id=r["id"]) for r in rows]

    # ----- notes -----------------------------------------------------------------------
    async def add_note(self, notebook: Notebook | Any, note: Note) -> Note:
        nb = notebook if isinstance(notebook, Notebook) else await self.get_notebook(notebook)
        data: dict[str, Any] = {"title": note.title, "content": note.content}
        if note.embedded or note.content:
            vector = await asyncio.to_thread(self._embedder.embed_documents,
                                             [f"{note.title}\n{note.content}"])
            data["embedding"] = [float(x) for x in vector[0]]
        n = self.names
        note_id = RecordID(n.note, uuid.uuid4().hex)
        await self.store.query(
            f"BEGIN; CREATE $id CONTENT $data RETURN NONE; RELATE $id->{n.artifact}->$nb"
            " RETURN NONE; COMMIT;", {"id": note_id, "data": data, "nb": nb.id})
        (row,) = await self.store.query("SELECT * FROM ONLY $id;", {"id": note_id})
        saved = Note(title=row["title"], content=row["content"],
                     embedded=row.get("embedding") is not None, id=row["id"],
                     created=row.get("created"), updated=row.get("updated"))
        note.__dict__.update(saved.__dict__)
        return note

    async def notes(self, notebook: Notebook | Any) -> list[Note]:
        nb = notebook if isinstance(notebook, Notebook) else await self.get_notebook(notebook)
        (rows,) = await self.store.query(
            f"SELECT * FROM {self.names.note} WHERE id IN"
            f" (SELECT VALUE in FROM {self.names.artifact} WHERE out = $nb) ORDER BY created;",
            {"nb": nb.id})
        return [Note(title=r["title"], content=r["content"],
                     embedded=r.get("embedding") is not None, id=r["id"],
                     created=r.get("created"), updated=r.get("updated")) for r in rows]

    # ----- jobs ------------------------------------------------------------------------
    async def queue_vectorize(self, source: Source | Any) -> Job:
        sid = self._sid(source)
        (row,) = await self.store.query(
            f"CREATE ONLY {self.names.job} CONTENT {{ kind: 'vectorize', target: $s,"
            " status: 'queued' };", {"s": sid})
        self._wake.set()
        return self._job(row)

    async def get_job(self, ref: Any) -> Job:
        (row,) = await self.store.query("SELECT * FROM ONLY $id;",
                                        {"id": _rid(ref, self.names.job)})
        if not row:
            raise NotFoundError(f"no job {ref!r}")
        return self._job(row)

    async def jobs(self, status: str | None = None) -> list[Job]:
        where = "" if status is None else " WHERE status = $status"
        (rows,) = await self.store.query(
            f"SELECT * FROM {self.names.job}{where} ORDER BY created;", {"status": status})
        return [self._job(r) for r in rows]

    async def run_pending_jobs(self) -> int:
        """Run queued jobs in this task until none is left; returns how many ran."""
        ran = 0
        while await self._run_one():
            ran += 1
        return ran

    async def _requeue_interrupted(self) -> None:
        # One process owns an embedded store, so a job marked running is one that a crash
        # interrupted. On a shared server only jobs idle for an hour are taken over.
        age = "0s" if self.store.embedded else "1h"
        await self.store.query(
            f"UPDATE {self.names.job} SET status = 'queued' WHERE status = 'running'"
            " AND updated <= time::now() - type::duration($age) RETURN NONE;", {"age": age})

    async def _run_forever(self) -> None:
        while True:
            try:
                if await self._run_one():
                    continue
            except asyncio.CancelledError:
                raise
            except Exception:  # the store went away; a later open will requeue
                await asyncio.sleep(1.0)
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=1.0)

    async def _run_one(self) -> bool:
        n = self.names
        (rows,) = await self.store.query(
            f"SELECT * FROM {n.job} WHERE status = 'queued' ORDER BY created LIMIT 1;")
        if not rows:
            return False
        job = self._job(rows[0])
        await self.store.query(
            "UPDATE $j SET status = 'running', attempts += 1, progress = 0.0 RETURN NONE;",
            {"j": job.id})
        try:
            await self._vectorize(job)
        except Exception as exc:
            await self.store.query(
                "UPDATE $j SET status = 'failed', error = $e RETURN NONE;",
                {"j": job.id, "e": f"{type(exc).__name__}: {exc}"})
        else:
            await self.store.query("UPDATE $j SET status = 'done', progress = 1.0 RETURN NONE;",
                                   {"j": job.id})
        return True

    async def _vectorize(self, job: Job) -> None:
        n = self.names
        (doc,) = await self.store.query(
            "SELECT id, content, generation, notebooks, page_starts FROM ONLY $d;",
            {"d": job.target})
        if not doc:
            raise NotFoundError(f"source {job.target} no longer exists")
        settings = self.kb.settings
        chunks = await asyncio.to_thread(chunk_text, doc["content"], settings.chunk_size,
                                         settings.chunk_overlap)
        assign_pages(chunks, doc.get("page_starts"))
        generation = int(doc.get("generation") or 0) + 1
        key = str(job.target.id)
        batch = max(settings.embed_batch_size, 1) * 4
        # chunks of the new generation are invisible until the switch below
        await self.store.query(
            f"DELETE {n.chunks} WHERE document = $d AND generation = $g;",
            {"d": job.target, "g": generation})
        for start in range(0, len(chunks), batch):
            part = chunks[start:start + batch]
            vectors = await asyncio.to_thread(self._embedder.embed_documents,
                                              [c.content for c in part])
            rows = [{
                **chunk_row(RecordID(n.chunks, f"{key}_g{generation}_{c.index}"), job.target,
                            c, v),
                "generation": generation, "notebooks": doc.get("notebooks") or [],
            } for c, v in zip(part, vectors)]
            for i in range(0, len(rows), CHUNK_ROWS_PER_STATEMENT):
                await self.store.query(f"INSERT INTO {n.chunks} $rows RETURN NONE;",
                                       {"rows": rows[i:i + CHUNK_ROWS_PER_STATEMENT]})
            await self.store.query("UPDATE $j SET progress = $p RETURN NONE;",
                                   {"j": job.id, "p": min(start + batch, len(chunks))
                                    / max(len(chunks), 1)})
        copies = "".join(
            copy_vectors_sql(n, t, "$s", " AND generation = $g")
            + f" UPDATE $nb{i} SET pending_vectors += $count RETURN NONE;"
            for i, t in enumerate(n.notebook_vectors(nb) for nb in doc.get("notebooks") or []))
        await self.store.query(
            "BEGIN; UPDATE $d SET generation = $g, chunk_count = $count RETURN NONE;"
            " UPSERT $state SET pending_vectors = (pending_vectors OR 0) + $count RETURN NONE;"
            + copies + " COMMIT;",
            {"d": job.target, "s": job.target, "g": generation, "count": len(chunks),
             "state": n.index_state_key,
             **{f"nb{i}": nb for i, nb in enumerate(doc.get("notebooks") or [])}})
        # the previous generations are invisible now: drop them
        await self.store.query(
            f"DELETE {n.chunks} WHERE document = $d AND generation != $g;",
            {"d": job.target, "g": generation})
        await self.kb._ingestor.maybe_rebuild_index()
        for nb in doc.get("notebooks") or []:
            await self.rebuild_notebook_index(nb)

    # ----- search ----------------------------------------------------------------------
    def _filters(self, notebook_id: Any, created_after: dt.datetime | None,
                 created_before: dt.datetime | None, topics: Sequence[str] | None) -> Filters:
        nb = None if notebook_id is None else _rid(
            notebook_id.id if isinstance(notebook_id, Notebook) else notebook_id,
            self.names.notebook)
        return Filters(notebook=nb, created_after=created_after, created_before=created_before,
                       topics=topics,
                       vector_table=None if nb is None else self.names.notebook_vectors(nb))

    async def vector_search(self, query: str | None = None, *,
                            query_vector: Sequence[float] | None = None,
                            notebook_id: Any = None, min_score: float = 0.2, limit: int = 10,
                            created_after: dt.datetime | None = None,
                            created_before: dt.datetime | None = None,
                            topics: Sequence[str] | None = None,
                            group_by_source: bool = False) -> list[Any]:
        """Chunks nearest to ``query`` (or ``query_vector``) by cosine similarity, at least
        ``min_score``, optionally within one notebook, a creation window and topics."""
        vector: Any = query_vector
        if vector is None:
            if query is None:
                raise ConfigurationError("give a query or a query_vector")
            vector = await asyncio.to_thread(self._embedder.embed_query, query)
        filters = self._filters(notebook_id, created_after, created_before, topics)
        depth = limit * 4 if group_by_source else limit
        hits = await self.kb._searcher.vector(vector, depth, filters)
        hits = [h for h in hits if h.score >= min_score]
        return _group(hits, limit) if group_by_source else hits[:limit]

    async def text_search(self, query: str, *, notebook_id: Any = None, limit: int = 10,
                          min_score: float | None = None,
                          created_after: dt.datetime | None = None,
                          created_before: dt.datetime | None = None,
                          topics: Sequence[str] | None = None,
                          group_by_source: bool = False) -> list[Any]:
        filters = self._filters(notebook_id, created_after, created_before, topics)
        depth = limit * 4 if group_by_source else limit
        hits = await self.kb._searcher.text(query, depth, filters)
        if min_score is not None:
            hits = [h for h in hits if h.score >= min_score]
        return _group(hits, limit) if group_by_source else hits[:limit]

    async def hybrid_search(self, query: str, *, notebook_id: Any = None, limit: int = 10,
                            candidates: int = 50, created_after: dt.datetime | None = None,
                            created_before: dt.datetime | None = None,
                            topics: Sequence[str] | None = None,
                            group_by_source: bool = False) -> list[Any]:
        """Both legs scoped inside their queries, merged by the core's fusion (the settings'
        ``hybrid_fusion``)."""
        filters = self._filters(notebook_id, created_after, created_before, topics)
        depth = max(candidates, limit * 4)
        hits = await self.kb._searcher.search(query, mode="hybrid", limit=depth,
                                              filters=filters, candidates=depth)
        return _group(hits, limit) if group_by_source else hits[:limit]

    async def search(self, query: str, *, mode: str = "hybrid", notebook_id: Any = None,
                     limit: int = 10, min_score: float | None = None) -> list[Hit]:
        """One entry point for the three modes (``min_score`` defaults to 0.2 for vector
        search, as Open Notebook's, and is not applied to hybrid's fused ranks)."""
        if mode == "vector":
            hits: list[Hit] = await self.vector_search(
                query, notebook_id=notebook_id, limit=limit,
                min_score=0.2 if min_score is None else min_score)
        elif mode == "text":
            hits = await self.text_search(query, notebook_id=notebook_id, limit=limit,
                                          min_score=min_score)
        elif mode == "hybrid":
            hits = await self.hybrid_search(query, notebook_id=notebook_id, limit=limit)
        else:
            raise ConfigurationError(f"mode must be hybrid, vector or text, got {mode!r}")
        return hits

    # ----- rows to objects -------------------------------------------------------------
    def _notebook(self, row: dict[str, Any]) -> Notebook:
        return Notebook(name=row["name"], description=row.get("description", ""),
                        archived=bool(row.get("archived")), id=row["id"],
                        created=row.get("created"), updated=row.get("updated"), _nbs=self)

    def _source(self, row: dict[str, Any]) -> Source:
        return Source(title=row.get("title"), full_text=row.get("content", ""),
                      asset=row.get("asset"), topics=list(row.get("topics") or []),
                      id=row["id"], created=row.get("ingested_at"),
                      updated=row.get("updated_at"), chunk_count=int(row.get("chunk_count")
                                                                     or 0), _nbs=self)

    def _job(self, row: dict[str, Any]) -> Job:
        return Job(id=row["id"], kind=row["kind"], target=row["target"], status=row["status"],
                   progress=float(row.get("progress") or 0.0), error=row.get("error"),
                   attempts=int(row.get("attempts") or 0), created=row.get("created"),
                   updated=row.get("updated"), _nbs=self)


def _require_id(obj: Notebook | Source) -> RecordID:
    if obj.id is None:
        raise ConfigurationError(f"save the {type(obj).__name__.lower()} first")
    return obj.id


def _group(hits: list[Hit], limit: int) -> list[SourceMatch]:
    groups: dict[str, SourceMatch] = {}
    for hit in hits:  # hits arrive best first
        group = groups.get(hit.document_id)
        if group is None:
            groups[hit.document_id] = SourceMatch(hit.document_id, hit.title, hit.score, [hit])
        else:
            group.matches.append(hit)
    return list(groups.values())[:limit]
