from __future__ import annotations

import asyncio
import datetime as dt
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from conftest import PATIENCE, SAMPLES
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.core.notebook_service import (
    Note,
    NotebookService,
    NotFoundError,
    Source,
    SourceMatch,
)
from surrealdocs.embed import get_embedder
from surrealdocs.faces.open_notebook import NotebookSearch
from surrealdocs.parts.results import id_text


@pytest_asyncio.fixture
async def nbkb() -> AsyncIterator[KnowledgeBase]:
    kb = await KnowledgeBase.open(settings=Settings(db="mem://", model="hashing-64",
                                                    chunk_size=200, chunk_overlap=20))
    try:
        yield kb
    finally:
        await kb.close()


@pytest.fixture
def nbs(nbkb: KnowledgeBase) -> NotebookService:
    return nbkb.notebooks


@pytest.fixture
def search(nbkb: KnowledgeBase) -> NotebookSearch:
    """Open Notebook's search calls on the same knowledge base."""
    return NotebookSearch(nbkb)


async def counts(nbs: NotebookService) -> dict[str, int]:
    n = nbs.store.names
    out = {}
    for table in (n.documents, n.chunks, n.notebook, n.reference, n.note, n.artifact, n.job):
        (rows,) = await nbs.store.query(f"SELECT count() AS c FROM {table} GROUP ALL;")
        out[table] = int(rows[0]["c"]) if rows else 0
    return out


async def vectorized(nbs: NotebookService, notebook: object, text: str, title: str,
                     topics: tuple[str, ...] = ()) -> Source:
    source = await nbs.add_text(notebook, text=text, title=title, topics=topics)
    job = await source.vectorize()
    done = await job.wait(timeout=PATIENCE)
    assert done.status == "done", done.error
    return await nbs.get_source(source.id)


async def test_spec_examples(nbs: NotebookService, search: NotebookSearch) -> None:
    """Open Notebook's examples, adapted: vectorize a source, then a scoped vector search."""
    nb = await nbs.create_notebook("Research", description="retrieval papers")
    source = await nbs.add_text(nb, title="Dense retrieval",
                                text="Dense retrieval encodes passages as vectors. " * 20)

    async def embed_source(source: Source) -> None:
        job = await source.vectorize()  # triggers chunking and background embedding
        await job.wait(timeout=PATIENCE)

    async def semantic_search(notebook_id: object, query: str) -> list[object]:
        query_vec = get_embedder("hashing-64").embed_query(query)  # the store's model
        return await search.vector_search(notebook_id=notebook_id, query_vector=query_vec,
                                       min_score=0.2, limit=5)

    await embed_source(source)
    results = await semantic_search(nb.id, "dense retrieval passages vectors")
    assert results and all(r.document_id == id_text(source.id) for r in results)
    assert all(r.score >= 0.2 for r in results)
    embeddings = await source.get_embeddings()
    assert embeddings and embeddings[0].chunk_index == 0
    assert len(embeddings[0].embedding) == 64 and embeddings[0].source == source.id


async def test_notebook_crud(nbs: NotebookService) -> None:
    nb = await nbs.create_notebook("A", "first")
    assert (await nbs.get_notebook("A")).id == nb.id
    assert (await nbs.get_notebook(str(nb.id))).name == "A"
    nb.archived = True
    await nb.save()
    assert [x.name for x in await nbs.list_notebooks(archived=True)] == ["A"]
    assert await nbs.list_notebooks(archived=False) == []
    with pytest.raises(NotFoundError):
        await nbs.get_notebook("nope")
    note = Note(title="todo", content="read the HNSW paper")
    await nb.add_note(note)
    assert note.id is not None and note.embedded
    assert [x.title for x in await nb.get_notes()] == ["todo"]


async def test_scoping_never_leaks(nbs: NotebookService, search: NotebookSearch) -> None:
    a = await nbs.create_notebook("A")
    b = await nbs.create_notebook("B")
    await vectorized(nbs, a, "Penguins live in Antarctica and eat krill. " * 10, "penguins")
    await vectorized(nbs, b, "Penguins are also found in South Africa. " * 10, "more penguins")
    for call in (search.vector_search, search.text_search, search.hybrid_search):
        hits_a = await call("penguins", notebook_id=a.id, limit=50)  # type: ignore[operator]
        assert hits_a and {h.title for h in hits_a} == {"penguins"}
        everywhere = await call("penguins", limit=50)  # type: ignore[operator]
        assert {h.title for h in everywhere} == {"penguins", "more penguins"}


async def test_shared_source_is_found_from_both_notebooks(nbs: NotebookService,
                                                          search: NotebookSearch) -> None:
    a = await nbs.create_notebook("A")
    b = await nbs.create_notebook("B")
    shared = await vectorized(nbs, a, "Volcanoes erupt lava and ash. " * 10, "volcano")
    await b.add_source(shared)
    assert {n.name for n in await shared.notebooks()} == {"A", "B"}
    for nb in (a, b):
        hits = await search.text_search("volcanoes lava", notebook_id=nb.id)
        assert hits and hits[0].title == "volcano"
    await b.remove_source(shared)
    assert await search.text_search("volcanoes lava", notebook_id=b.id) == []
    assert await search.text_search("volcanoes lava", notebook_id=a.id)


async def test_min_score_is_honoured(nbs: NotebookService, search: NotebookSearch) -> None:
    nb = await nbs.create_notebook("A")
    await vectorized(nbs, nb, "Alpha beta gamma delta. " * 10, "greek")
    await vectorized(nbs, nb, "Completely different words here about cooking. " * 10, "food")
    every = await search.vector_search("alpha beta", notebook_id=nb.id, min_score=-1.0, limit=50)
    assert {h.title for h in every} == {"greek", "food"}
    strict = await search.vector_search("alpha beta", notebook_id=nb.id, min_score=0.5, limit=50)
    assert strict and all(h.score >= 0.5 for h in strict)
    assert {h.title for h in strict} == {"greek"}


async def test_time_and_topic_filters(nbs: NotebookService, search: NotebookSearch) -> None:
    nb = await nbs.create_notebook("A")
    await vectorized(nbs, nb, "Rivers flow to the sea. " * 10, "old", topics=("water",))
    await asyncio.sleep(0.05)
    week_ago = dt.datetime.now(dt.timezone.utc)  # stands for "a week ago": between the two
    await asyncio.sleep(0.05)
    await vectorized(nbs, nb, "Rivers carve valleys. " * 10, "new", topics=("geology",))
    recent = await search.vector_search("rivers", notebook_id=nb.id, created_after=week_ago,
                                     min_score=0.0, limit=50)
    assert {h.title for h in recent} == {"new"}
    older = await search.text_search("rivers", created_before=week_ago, limit=50)
    assert {h.title for h in older} == {"old"}
    water = await search.hybrid_search("rivers", topics=["water"], limit=50)
    assert {h.title for h in water} == {"old"}


async def test_grouped_results(nbs: NotebookService, search: NotebookSearch) -> None:
    nb = await nbs.create_notebook("A")
    await vectorized(nbs, nb, "Glaciers are rivers of ice. " * 30, "glaciers")
    await vectorized(nbs, nb, "Ice cream is a frozen dessert. " * 30, "dessert")
    # BM25 gives no weight to a term in over half the chunks: make "glaciers" rarer
    await vectorized(nbs, nb, "Mountains are made of rock and stone. " * 60, "mountains")
    groups = await search.hybrid_search("glaciers ice", notebook_id=nb.id, limit=5,
                                     group_by_source=True)
    assert all(isinstance(g, SourceMatch) for g in groups)
    assert groups[0].title == "glaciers" and len(groups[0].matches) > 1
    assert len({g.source_id for g in groups}) == len(groups)


async def test_revectorize_replaces_chunks(nbs: NotebookService) -> None:
    nb = await nbs.create_notebook("A")
    source = await vectorized(nbs, nb, "Tides follow the moon. " * 40, "tides")
    first = await source.get_embeddings()
    nbs.ingestor.settings = nbs.ingestor.settings.replace(chunk_size=100, chunk_overlap=10)
    job = await source.vectorize()
    assert (await job.wait(timeout=PATIENCE)).status == "done"
    second = await source.get_embeddings()
    assert len(second) > len(first)
    total = (await counts(nbs))[nbs.store.names.chunks]
    assert total == len(second)  # the old generation is gone


async def test_revectorized_pdf_keeps_its_page_numbers(nbs: NotebookService) -> None:
    nb = await nbs.create_notebook("reports")
    await nbs.add_paths(nb, [SAMPLES / "quarterly-report.pdf"])  # two pages, 200-char chunks
    (source,) = await nb.get_sources()

    async def pages() -> list[tuple[int, int, int]]:
        chunks = nbs.store.names.chunks
        (rows,) = await nbs.store.query(
            f"SELECT char_start, first_page, last_page, page_number FROM {chunks}"
            " WHERE document = $d ORDER BY char_start;", {"d": source.id})
        assert all(r.get("page_number") == r.get("first_page") for r in rows)
        return [(r["char_start"], r.get("first_page"), r.get("last_page")) for r in rows]

    ingested = await pages()
    assert {p for _, first, last in ingested for p in (first, last)} == {1, 2}
    job = await (await source.vectorize()).wait(timeout=PATIENCE)
    assert job.status == "done", job.error
    assert await pages() == ingested  # same chunker, same text: the same spans and pages


async def test_revectorized_markdown_keeps_its_heading_contexts(
        nbs: NotebookService, tmp_path: Path) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text("# Birds\n\nAn intro to birds.\n\n## Waders\n\n"
                     + "Oystercatchers probe the mud for worms at low tide. " * 20)
    nb = await nbs.create_notebook("birds")
    await nbs.add_paths(nb, [guide])
    (source,) = await nb.get_sources()

    async def contexts() -> list[tuple[int, str | None]]:
        (rows,) = await nbs.store.query(
            f"SELECT char_start, context FROM {nbs.store.names.chunks}"
            " WHERE document = $d ORDER BY char_start;", {"d": source.id})
        return [(r["char_start"], r.get("context")) for r in rows]

    ingested = await contexts()
    assert {c for _, c in ingested} == {"Birds", "Birds › Waders"}
    job = await (await source.vectorize()).wait(timeout=PATIENCE)
    assert job.status == "done", job.error
    assert await contexts() == ingested


async def test_delete_cascades_leave_no_orphans(nbs: NotebookService) -> None:
    a = await nbs.create_notebook("A")
    b = await nbs.create_notebook("B")
    only_a = await vectorized(nbs, a, "Only in A: comets. " * 20, "comets")
    shared = await vectorized(nbs, a, "In both: asteroids. " * 20, "asteroids")
    await b.add_source(shared)
    await a.add_note(Note(title="n", content="note in A"))
    await a.delete(delete_exclusive_sources=True)
    c = await counts(nbs)
    n = nbs.store.names
    assert c[n.notebook] == 1 and c[n.note] == 0 and c[n.artifact] == 0
    assert c[n.documents] == 1 and c[n.reference] == 1
    assert c[n.chunks] == shared.chunk_count
    with pytest.raises(NotFoundError):
        await nbs.get_source(only_a.id)
    (stale,) = await nbs.store.query(
        f"SELECT VALUE id FROM {n.chunks} WHERE notebooks CONTAINS $a;", {"a": a.id})
    assert stale == []
    await shared.delete()
    c = await counts(nbs)
    assert c[n.documents] == c[n.chunks] == c[n.reference] == c[n.job] == 0


async def test_failed_job_records_its_error(nbkb: KnowledgeBase, nbs: NotebookService,
                                            search: NotebookSearch,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    nb = await nbs.create_notebook("A")
    source = await nbs.add_text(nb, text="Doomed text. " * 20, title="doomed")

    def broken(texts: object) -> object:
        raise RuntimeError("the model ran out of memory")

    monkeypatch.setattr(nbkb.embedder, "embed_documents", broken)
    job = await (await source.vectorize()).wait(timeout=PATIENCE)
    assert job.status == "failed"
    assert job.error == "RuntimeError: the model ran out of memory"
    assert [j.status for j in await nbs.jobs()] == ["failed"]
    assert await search.text_search("doomed") == []


async def test_add_paths_uses_the_core_pipeline(nbs: NotebookService,
                                                search: NotebookSearch) -> None:
    nb = await nbs.create_notebook("Samples")
    report = await nbs.add_paths(nb, [SAMPLES], topics=["demo"])
    assert report.counts["ingested"] == 5
    sources = await nb.get_sources()
    assert len(sources) == 5 and all(s.topics == ["demo"] for s in sources)
    hits = await search.text_search("BM25", notebook_id=nb.id)
    assert hits and hits[0].source.endswith("bm25.txt")
    other = await nbs.create_notebook("Empty")
    assert await search.text_search("BM25", notebook_id=other.id) == []


def test_interrupted_job_resumes_after_reopen(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    script = textwrap.dedent(f"""
        import asyncio, os
        from surrealdocs import KnowledgeBase, Settings
        from surrealdocs.embed.hashing import HashingEmbedder

        class Dying(HashingEmbedder):
            calls = 0
            def embed_documents(self, texts):
                Dying.calls += 1
                if Dying.calls == 2:
                    os._exit(9)  # the process dies in the middle of the job
                return super().embed_documents(texts)

        async def main():
            kb = await KnowledgeBase.open(settings=Settings(db={db!r}, model="hashing-64",
                                          chunk_size=100, chunk_overlap=0, embed_batch_size=8),
                                          embedder=Dying(64), run_jobs=True)
            nbs = kb.notebooks
            nb = await nbs.create_notebook("A")
            source = await nbs.add_text(nb, text="Sentence about resuming work. " * 200,
                                        title="long")
            job = await source.vectorize()
            await job.wait(timeout=PATIENCE)

        asyncio.run(main())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == 9, proc.stderr.decode()[-2000:]

    async def resume() -> None:
        kb = await KnowledgeBase.open(settings=Settings(db=db, model="hashing-64", chunk_size=100,
                                                        chunk_overlap=0),
                                      embedder=get_embedder("hashing-64"), run_jobs=True)
        nbs = kb.notebooks
        try:
            (job,) = await nbs.jobs()
            job = await job.wait(timeout=PATIENCE)
            assert job.status == "done" and job.attempts == 2
            (source,) = await nbs.sources()
            embeddings = await source.get_embeddings()
            assert len(embeddings) == source.chunk_count > 30
            c = await counts(nbs)
            assert c[nbs.store.names.chunks] == len(embeddings)  # nothing left from the crash
            assert await NotebookSearch(kb).text_search("resuming", limit=100)
        finally:
            await kb.close()

    asyncio.run(resume())


async def test_scoped_vector_search_walks_the_notebooks_own_index(nbs: NotebookService,
                                                                  search: NotebookSearch) -> None:
    import json

    nb = await nbs.create_notebook("A")
    other = await nbs.create_notebook("B")
    await vectorized(nbs, nb, "Solar panels turn light into power. " * 20, "solar")
    await vectorized(nbs, other, "Wind turbines turn air into power. " * 20, "wind")
    table = nbs.store.names.notebook_vectors(nb.id)
    vec = [float(x) for x in get_embedder("hashing-64").embed_query("solar power")]
    (plan,) = await nbs.store.query(
        f"SELECT chunk FROM {table} WHERE embedding <|5,100|> $v EXPLAIN;", {"v": vec})
    text = json.dumps(plan)
    assert '"KnnScan"' in text and f"{table}_hnsw" in text
    before = await search.vector_search(query_vector=vec, notebook_id=nb.id, min_score=0.0)
    assert await nbs.storage.chunks.graphs.rebuild_notebook_if_due(nb.id, force=True)
    after = await search.vector_search(query_vector=vec, notebook_id=nb.id, min_score=0.0)
    assert [h.chunk_id for h in after] == [h.chunk_id for h in before]
    assert {h.title for h in after} == {"solar"}


async def test_changed_file_stays_in_its_notebooks(nbs: NotebookService,
                                                   search: NotebookSearch, tmp_path: Path) -> None:
    f = tmp_path / "owls.md"
    f.write_text("# Owls\n\nOwls hunt at night.")
    nb = await nbs.create_notebook("Birds")
    await nbs.add_paths(nb, [f], topics=["birds"])
    f.write_text("# Owls\n\nOwls hunt mice at night, silently.")
    report = await nbs.ingestor.ingest_paths([f])  # the plain ingest path, not `add`
    assert report.counts["updated"] == 1
    (source,) = await nb.get_sources()
    assert "silently" in source.full_text and source.topics == ["birds"]
    for call in (search.text_search, search.vector_search):
        hits = await call("owls mice", notebook_id=nb.id)  # type: ignore[operator]
        assert hits and all(h.document_id == id_text(source.id) for h in hits)
    c = await counts(nbs)
    assert c[nbs.store.names.documents] == 1 and c[nbs.store.names.reference] == 1
