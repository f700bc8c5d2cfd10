"""Core options beyond the default store: documents only, chunks without vectors, the
analyzer's language, a caller's kreuzberg config, batch sizes, UNIQUE sources, refusing
tables of another layout or origin, and a store around a caller's connection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from surrealdb import AsyncSurreal, RecordID

import surrealdocs.core.kb as kb_module
from conftest import SAMPLES
from surrealdocs import (
    ConfigurationError,
    DimensionMismatchError,
    KnowledgeBase,
    SchemaMismatchError,
    Settings,
)
from surrealdocs.embed import get_embedder
from surrealdocs.parts.extract import copy_extraction_config, extraction_config
from surrealdocs.store import Names, Store, connect
from surrealdocs.store.schema import SCHEMA_VERSION, ensure_schema


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


async def tables(store: Store) -> set[str]:
    (info,) = await store.query("INFO FOR DB;")
    return set(info["tables"])


def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(name: str) -> Any:
        raise AssertionError(f"a store without vectors loaded the model {name}")

    monkeypatch.setattr(kb_module, "get_embedder", refuse)


async def test_documents_only_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    no_model(monkeypatch)
    settings = Settings(db="mem://", chunked=False)
    async with await KnowledgeBase.open(settings=settings) as kb:
        assert kb.embedder is None
        assert await tables(kb.store) == {"documents", "files", "surrealdocs_meta",
                                          "documents_facets"}
        (info,) = await kb.store.query("INFO FOR TABLE documents;")
        assert "FIELDS content FULLTEXT ANALYZER sd_english BM25(0.9,0.4) HIGHLIGHTS" in \
            info["indexes"]["documents_content_ft"]
        report = await kb.ingest([SAMPLES])
        assert report.counts["ingested"] == 5 and report.chunks_written == 0
        hits = await kb.search("reciprocal rank fusion", mode="text")
        assert hits[0].source.endswith("bm25.txt")
        assert hits[0].chunk_id == hits[0].document_id  # a hit is a whole document
        assert hits[0].content.startswith("Keyword search with BM25")
        assert hits[0].char_end == len(hits[0].content)
        assert [h.source for h in await kb.search("walrus", mode="text")] == []
        for mode in ("vector", "hybrid"):
            with pytest.raises(ConfigurationError, match="mode='text'"):
                await kb.search("fusion", mode=mode)
        stats = await kb.stats()
        assert (stats.documents, stats.chunks) == (5, 0)
        # a changed file replaces its document here too
        f = write(tmp_path / "note.md", "# Note\n\nAbout penguins.")
        await kb.ingest([f])
        write(f, "# Note\n\nAbout giraffes.")
        assert (await kb.ingest([f])).counts["updated"] == 1
        assert await kb.search("penguins", mode="text") == []
        assert [h.source for h in await kb.search("giraffes", mode="text")] == \
            [str(f.resolve())]


async def test_chunks_without_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    no_model(monkeypatch)
    async with await KnowledgeBase.open(settings=Settings(db="mem://", embed=False)) as kb:
        (info,) = await kb.store.query("INFO FOR TABLE chunks;")
        assert set(info["indexes"]) == {"chunks_document", "chunks_notebooks",
                                        "chunks_text_hash"}
        report = await kb.ingest([SAMPLES])
        assert report.chunks_written > 5
        (embeddings, models, meta) = await kb.store.query(
            "SELECT VALUE embedding FROM chunks; SELECT VALUE embedding_model FROM documents;"
            " SELECT * FROM ONLY $e;", {"e": Names().embedding_key})
        assert set(embeddings) == {None} and set(models) == {None} and meta is None
        hits = await kb.search("reciprocal rank fusion", mode="text")
        assert hits and hits[0].source.endswith("bm25.txt")
        with pytest.raises(ConfigurationError, match="embed=False"):
            await kb.search("fusion", mode="hybrid")
        assert await kb.storage.chunks.graphs.rebuild_if_due(force=True) is False


async def test_layout_is_recorded_and_enforced(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        (schema,) = await kb.store.query("SELECT * FROM ONLY $k;", {"k": Names().schema_key})
        assert (schema["chunked"], schema["vectors"], schema["analyzer"]) == \
            (True, True, "sd_english")
    with pytest.raises(SchemaMismatchError, match="documents only"):
        await KnowledgeBase.open(db, chunked=False)
    with pytest.raises(SchemaMismatchError, match="hold embedding vectors"):
        await KnowledgeBase.open(db, embed=False)
    with pytest.raises(SchemaMismatchError, match="analyzer_language='english'"):
        await KnowledgeBase.open(db, model="hashing-64", analyzer_language="german")
    other = str(tmp_path / "plain")
    async with await KnowledgeBase.open(other, embed=False):
        pass
    with pytest.raises(SchemaMismatchError, match="reembed"):
        await KnowledgeBase.open(other, model="hashing-64")


async def test_reembed_adds_vectors_to_a_store_without_them(tmp_path: Path) -> None:
    from surrealdocs.core.reembed import reembed

    db = str(tmp_path / "kb")
    async with await KnowledgeBase.open(db, embed=False) as kb:
        await kb.ingest_bytes(b"alpha beta gamma " * 100, mime_type="text/plain",
                              source="note://a")
    assert await reembed(Settings(db=db, model="hashing-32"), get_embedder("hashing-32")) > 0
    async with await KnowledgeBase.open(db, model="hashing-32") as kb:
        hits = await kb.search("alpha", mode="vector", limit=1)
        assert hits[0].source == "note://a"


async def test_tables_not_made_by_surrealdocs_are_refused() -> None:
    settings = Settings(db="mem://", model="hashing-64")
    store = await connect(settings)
    try:
        await store.query("DEFINE TABLE documents SCHEMAFULL;"
                          " DEFINE FIELD source ON documents TYPE string;")
        with pytest.raises(SchemaMismatchError, match="not created by surrealdocs"):
            await ensure_schema(store, settings, "hashing-64", 64)
        (info,) = await store.query("INFO FOR TABLE documents;")
        assert set(info["fields"]) == {"source"}  # left as it was
    finally:
        await store.close()


async def test_source_is_unique_and_a_changed_file_still_replaces(kb: KnowledgeBase,
                                                                  tmp_path: Path) -> None:
    (info,) = await kb.store.query("INFO FOR TABLE documents;")
    assert "FIELDS source UNIQUE" in info["indexes"]["documents_source"]
    assert "FIELDS content_hash UNIQUE" in info["indexes"]["documents_content_hash"]
    a = write(tmp_path / "a.md", "# A\n\nFirst version about herons.")
    b = write(tmp_path / "b.md", "# A\n\nFirst version about herons.")
    await kb.ingest([a, b])
    for text in ("Second version about cranes.", "Third version about storks."):
        write(a, f"# A\n\n{text}")
        assert (await kb.ingest([a])).counts["updated"] == 1
    (rows,) = await kb.store.query("SELECT source, sources, complete FROM documents"
                                   " ORDER BY source;")
    assert rows == [
        {"source": str(a.resolve()), "sources": [str(a.resolve())], "complete": True},
        {"source": str(b.resolve()), "sources": [str(b.resolve())], "complete": True},
    ]
    with pytest.raises(Exception, match="already contains"):
        await kb.store.query("CREATE documents:x CONTENT { source: $s, content: 'x',"
                             " mime_type: 'text/plain', content_hash: 'x' };",
                             {"s": str(b.resolve())})


async def test_version_1_store_is_upgraded(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        await kb.ingest_bytes(b"herons and egrets", mime_type="text/plain", source="n://1")
        # back to what version 1 made, plus an incomplete document left by a crash that
        # claims the same source
        await kb.store.query(
            "REMOVE FIELD keywords ON documents;"
            " DEFINE INDEX OVERWRITE documents_source ON documents FIELDS source;"
            " DEFINE FIELD OVERWRITE source ON documents TYPE string;"
            " CREATE documents:debris CONTENT { source: 'n://1', sources: ['n://1'],"
            "   content: 'x', mime_type: 'text/plain', content_hash: 'debris' };"
            " UPSERT $k SET version = 1;", {"k": Names().schema_key})
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        (schema, info, debris) = await kb.store.query(
            "SELECT * FROM ONLY $k; INFO FOR TABLE documents;"
            " SELECT * FROM ONLY documents:debris;", {"k": Names().schema_key})
        assert schema["version"] == SCHEMA_VERSION == 17
        assert "UNIQUE" in info["indexes"]["documents_source"]
        assert "keywords" in info["fields"]
        assert debris is None  # an incomplete document: the open recovered (deleted) it
        hits = await kb.search("egrets", mode="text")
        assert [h.source for h in hits] == ["n://1"]


async def test_analyzer_language(tmp_path: Path) -> None:
    settings = Settings(db="mem://", model="hashing-64", analyzer_language="German")
    async with await KnowledgeBase.open(settings=settings) as kb:
        assert kb.store.names.analyzer == "sd_german"
        (db_info, table) = await kb.store.query("INFO FOR DB; INFO FOR TABLE chunks;")
        assert "SNOWBALL(GERMAN)" in db_info["analyzers"]["sd_german"]
        assert "chunks_content_ft" not in table["indexes"]  # the text index stems it
        await kb.ingest_bytes("Die Häuser am Fluss wurden gebaut.".encode(),
                              mime_type="text/plain", source="n://de")
        assert [h.source for h in await kb.search("Haus", mode="text")] == ["n://de"]
    with pytest.raises(ConfigurationError, match="analyzer_language"):
        Settings(analyzer_language="klingon")


async def test_caller_kreuzberg_config_is_used_and_never_modified() -> None:
    from kreuzberg import ChunkingConfig, ExtractionConfig, KeywordAlgorithm, KeywordConfig

    config = ExtractionConfig(
        keywords=KeywordConfig(algorithm=KeywordAlgorithm.Yake, max_keywords=3),
        chunking=ChunkingConfig(max_chars=3000, max_overlap=10), enable_quality_processing=True)
    settings = Settings(db="mem://", model="hashing-64", chunk_size=120, chunk_overlap=0,
                        kreuzberg_config=config)
    built = extraction_config(settings)
    assert built is not config and built.keywords is not None
    assert built.chunking.max_chars == 120 and built.use_cache is False
    text = ("Herons hunt fish in shallow water. Egrets follow cattle across fields. "
            "Storks build large nests on roofs. ") * 4
    async with await KnowledgeBase.open(settings=settings) as kb:
        await kb.ingest_bytes(text.encode(), mime_type="text/plain", source="n://birds")
        (doc, lengths) = await kb.store.query(
            "SELECT keywords, detected_languages FROM ONLY documents LIMIT 1;"
            " SELECT VALUE string::len(content) FROM chunks;")
    assert 1 <= len(doc["keywords"]) <= 3
    assert all(isinstance(k["text"], str) and k["algorithm"] for k in doc["keywords"])
    assert doc["detected_languages"] == ["eng"]
    assert len(lengths) > 2 and max(lengths) <= 120
    # the caller's object is exactly as it was
    assert config.chunking.max_chars == 3000 and config.chunking.max_overlap == 10
    assert config.use_cache is True and config.extraction_timeout_secs is None
    assert config.language_detection is None and config.cancel_token is None
    copied = copy_extraction_config(config, force_ocr=True)
    assert copied.force_ocr is True and config.force_ocr is False
    assert copied.enable_quality_processing is True and copied.keywords.max_keywords == 3
    with pytest.raises(ConfigurationError, match="ExtractionConfig"):
        copy_extraction_config({"force_ocr": True})


async def test_insert_batch_size(tmp_path: Path) -> None:
    settings = Settings(db="mem://", model="hashing-64", chunk_size=60, chunk_overlap=0,
                        insert_batch_size=7)
    async with await KnowledgeBase.open(settings=settings) as kb:
        seen: list[str] = []
        real = kb.store.query

        async def spy(sql: str, params: Any = None, **kw: Any) -> Any:
            seen.append(sql)
            return await real(sql, params, **kw)

        kb.store.query = spy  # type: ignore[method-assign]
        text = " ".join(f"Sentence number {n} is here." for n in range(60))
        result = await kb.ingest_bytes(text.encode(), mime_type="text/plain", source="n://x")
    inserts = sum(sql.count("INSERT INTO chunks $") for sql in seen)
    assert result.chunks > 14 and inserts == -(-result.chunks // 7)
    with pytest.raises(ConfigurationError, match="insert_batch_size"):
        Settings(insert_batch_size=0)


async def test_a_long_document_is_inserted_in_two_streams(tmp_path: Path) -> None:
    """Two round trips of inserts are in flight at once; the chunks land whole and in
    order. A failure in either stream stops both and leaves no trace of the document."""
    settings = Settings(db="mem://", model="hashing-64", chunk_size=60, chunk_overlap=0,
                        insert_batch_size=2)  # 20 rows per round trip
    text = " ".join(f"Sentence number {n} is here." for n in range(200))
    async with await KnowledgeBase.open(settings=settings) as kb:
        real = kb.store.client.query_raw
        in_flight, most, inserts = 0, 0, 0
        fail_at: int | None = None

        async def spy(sql: str, params: Any = None, **kw: Any) -> Any:
            nonlocal in_flight, most, inserts
            if "INSERT INTO chunks" not in sql:
                return await real(sql, params, **kw)
            inserts += 1
            if inserts == fail_at:
                raise RuntimeError("the connection dropped")
            in_flight += 1
            most = max(most, in_flight)
            try:
                return await real(sql, params, **kw)
            finally:
                in_flight -= 1

        kb.store.client.query_raw = spy
        fail_at = 4
        with pytest.raises(RuntimeError, match="dropped"):
            await kb.ingest_bytes(text.encode(), mime_type="text/plain", source="n://x")
        vectors = kb.storage.chunks.vector_table
        assert await kb.store.query("SELECT VALUE id FROM documents;"
                                    " SELECT VALUE id FROM chunks;"
                                    f" SELECT VALUE id FROM {vectors};") == [[], [], []]
        fail_at, inserts = None, 0
        result = await kb.ingest_bytes(text.encode(), mime_type="text/plain", source="n://x")
        (stored,) = await kb.store.query(
            "SELECT VALUE [chunk_index, content] FROM chunks ORDER BY chunk_index;")
    assert result.chunks > 60 and inserts >= 4 and most == 2
    assert [index for index, _ in stored] == list(range(result.chunks))
    assert all(f"number {n} " in " ".join(c for _, c in stored) + " " for n in range(200))


async def test_embedder_of_the_wrong_dimension_writes_nothing() -> None:
    class Broken:
        name = "hashing-64"
        dimension = 64

        def embed_documents(self, texts: Any) -> Any:
            return np.zeros((len(texts), 32), dtype=np.float32)

        def embed_query(self, text: str) -> Any:
            return np.zeros(32, dtype=np.float32)

    async with await KnowledgeBase.open(settings=Settings(db="mem://", model="hashing-64"),
                                        embedder=Broken()) as kb:
        with pytest.raises(DimensionMismatchError, match=r"shape \(1, 32\).*dimension 64"):
            await kb.ingest_bytes(b"some text", mime_type="text/plain", source="n://1")
        (docs,) = await kb.store.query("SELECT VALUE id FROM documents;")
        assert docs == []


def test_boolean_and_bm25_settings_from_env() -> None:
    s = Settings.from_env({"SURREALDOCS_EMBED": "false", "SURREALDOCS_CHUNKED": "yes",
                           "SURREALDOCS_ANALYZER_LANGUAGE": "french"})
    assert (s.embed, s.chunked, s.vectors, s.analyzer_language) == (False, True, False,
                                                                    "french")
    with pytest.raises(ConfigurationError, match="true or false"):
        Settings.from_env({"SURREALDOCS_EMBED": "maybe"})
    for bad in ({"bm25_b": 1.5}, {"bm25_k1": -1}, {"bm25_k1": "x"}):
        with pytest.raises(ConfigurationError):
            Settings(**bad)  # type: ignore[arg-type]


async def test_store_around_a_callers_connection() -> None:
    db = AsyncSurreal("mem://")
    await db.connect()
    try:
        with pytest.raises(ConfigurationError, match="use"):
            await Store.around(db)
        await db.use("ns_a", "db_b")
        store = await Store.around(db, Names("papers", "paper_chunks"))
        assert (store.url, store.embedded, store.namespace, store.database) == \
            ("mem://", True, "ns_a", "db_b")
        await ensure_schema(store, Settings(model="hashing-8"), "hashing-8", 8)
        key = RecordID("surrealdocs_meta", "papers.paper_chunks.schema")
        (row,) = await store.query("SELECT * FROM ONLY $k;", {"k": key})
        assert row["version"] == SCHEMA_VERSION
    finally:
        await db.close()

    class NotAConnection:
        async def query(self, sql: str) -> None: ...

    with pytest.raises(ConfigurationError, match="query_raw"):
        await Store.around(NotAConnection())


async def test_version_7_store_moves_its_vectors_apart(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    legacy = Settings(db=db, model="hashing-64", separate_vectors=False, chunk_size=100,
                      chunk_overlap=10)
    async with await KnowledgeBase.open(settings=legacy) as kb:  # vectors in the chunks...
        await kb.ingest([SAMPLES])
        before = [(h.chunk_id, round(h.score, 6))
                  for h in await kb.search("vector index", mode="vector", limit=8)]
        (n,) = await kb.store.query("SELECT count() AS n FROM chunks WHERE embedding != NONE"
                                    " GROUP ALL;")
        assert n[0]["n"] > 10
        # ...as every store was before schema 8
        await kb.store.query("UPSERT $k SET version = 7, vector_table = NONE;",
                             {"k": Names().schema_key})
    async with await KnowledgeBase.open(db, model="hashing-64", chunk_size=100,
                                        chunk_overlap=10) as kb:
        assert kb.storage.chunks.apart
        (inline, apart, info) = await kb.store.query(
            "SELECT count() AS n FROM chunks WHERE embedding != NONE GROUP ALL;"
            " SELECT count() AS n FROM chunks_vectors GROUP ALL;"
            " INFO FOR TABLE chunks_vectors;")
        assert inline in ([], [{"n": 0}]) and apart[0]["n"] == n[0]["n"]
        assert "chunks_embedding_hnsw" in info["indexes"]
        after = [(h.chunk_id, round(h.score, 6))
                 for h in await kb.search("vector index", mode="vector", limit=8)]
        assert after == before
    async with await KnowledgeBase.open(settings=legacy) as kb:  # the layout is the store's
        assert kb.storage.chunks.apart
