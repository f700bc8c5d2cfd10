from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
from pathlib import Path

import pytest
from surrealdb import RecordID

from surrealdocs import (
    ConfigurationError,
    EmbeddingModelMismatchError,
    InvalidIdentifierError,
    KnowledgeBase,
    SchemaVersionError,
    Settings,
    StoreError,
)
from surrealdocs.store import Names, connect, resolve_url, validate_identifier
from surrealdocs.store.connection import _malloc_trim, release_freed_memory
from surrealdocs.store.schema import SCHEMA_VERSION, ensure_schema

SCHEMA_KEY = Names().schema_key


def test_settings_from_env_and_overrides() -> None:
    env = {"SURREALDOCS_DB": "mem://", "SURREALDOCS_CHUNK_SIZE": "500",
           "SURREALDOCS_NAMESPACE": "ns1", "SURREALDOCS_BM25_K1": "0.9"}
    s = Settings.from_env(env, namespace="ns2", chunk_overlap=None)
    assert s.db == "mem://"
    assert s.chunk_size == 500
    assert s.bm25_k1 == 0.9
    assert s.namespace == "ns2"  # arguments win over the environment
    assert s.chunk_overlap == 100


@pytest.mark.parametrize("bad", [
    {"chunk_size": 10}, {"chunk_overlap": 900}, {"hnsw_distance": "HAMMING"},
    {"hnsw_m": 0}, {"extract_timeout": 0},
])
def test_settings_reject_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        Settings(**bad)  # type: ignore[arg-type]


def test_settings_env_number_error() -> None:
    with pytest.raises(ConfigurationError, match="SURREALDOCS_CHUNK_SIZE"):
        Settings.from_env({"SURREALDOCS_CHUNK_SIZE": "big"})


def test_resolve_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_url(None) == f"surrealkv://{tmp_path / '.surrealdocs' / 'db'}"
    assert resolve_url("mem://") == "mem://"
    assert resolve_url("data/kb") == f"surrealkv://{tmp_path / 'data' / 'kb'}"
    assert resolve_url("surrealkv://rel/kb") == f"surrealkv://{tmp_path / 'rel' / 'kb'}"
    assert resolve_url("ws://localhost:8000") == "ws://localhost:8000"
    with pytest.raises(ConfigurationError, match="unsupported database URL"):
        resolve_url("ftp://x")


@pytest.mark.parametrize("name", ["chunks; DROP", "1abc", "", "a-b", "x" * 65, "tab le"])
def test_invalid_identifiers_rejected(name: str) -> None:
    with pytest.raises(InvalidIdentifierError):
        validate_identifier(name)


async def test_invalid_namespace_rejected_before_connecting() -> None:
    with pytest.raises(InvalidIdentifierError):
        await connect(Settings(db="mem://", namespace="x; REMOVE DATABASE main"))


async def test_schema_is_idempotent_and_versioned(kb: KnowledgeBase) -> None:
    store = kb.store
    assert await ensure_schema(store, kb.settings, kb.embedder.name, kb.embedder.dimension) \
        == SCHEMA_VERSION
    (row,) = await store.query("SELECT * FROM ONLY $k;", {"k": SCHEMA_KEY})
    assert row["version"] == SCHEMA_VERSION
    (info, vectors) = await store.query("INFO FOR TABLE chunks; INFO FOR TABLE chunks_vectors;")
    indexes = info["indexes"]
    assert "chunks_content_ft" not in indexes  # the text index ranks BM25, not the engine
    assert "chunks_text_dead" in info["events"]
    assert "chunks_embedding_hnsw" not in indexes  # vectors live apart from the text
    hnsw = vectors["indexes"]["chunks_embedding_hnsw"]
    assert "HNSW DIMENSION 64 DIST COSINE TYPE F32 EFC 150 M 12" in hnsw


async def test_index_parameters_come_from_settings() -> None:
    settings = Settings(db="mem://", model="hashing-32", hnsw_efc=80, hnsw_m=8,
                        hnsw_distance="euclidean", bm25_k1=0.9, bm25_b=0.4,
                        text_index="engine")
    async with await KnowledgeBase.open(settings=settings) as kb:
        (info, vectors) = await kb.store.query(
            "INFO FOR TABLE chunks; INFO FOR TABLE chunks_vectors;")
    assert "HNSW DIMENSION 32 DIST EUCLIDEAN TYPE F32 EFC 80 M 8" \
        in vectors["indexes"]["chunks_embedding_hnsw"]
    assert "BM25(0.9,0.4)" in info["indexes"]["chunks_content_ft"]


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        await kb.store.query("UPSERT $k SET version = $v;",
                             {"k": SCHEMA_KEY, "v": SCHEMA_VERSION + 1})
    with pytest.raises(SchemaVersionError, match="upgrade surrealdocs"):
        await KnowledgeBase.open(db, model="hashing-64")


async def test_older_schema_is_upgraded(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        await kb.store.query("UPSERT $k SET version = 0;", {"k": SCHEMA_KEY})
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        (row,) = await kb.store.query("SELECT * FROM ONLY $k;", {"k": SCHEMA_KEY})
        assert row["version"] == SCHEMA_VERSION


async def test_other_model_is_refused_with_reembed_hint(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        await kb.ingest_bytes(b"hello world", mime_type="text/plain", source="mem://hello")
    with pytest.raises(EmbeddingModelMismatchError) as info:
        await KnowledgeBase.open(db, model="hashing-128")
    message = str(info.value)
    assert "'hashing-64' (64 dimensions)" in message
    assert "surrealdocs reembed --model hashing-128" in message
    # the same model still opens, and the data is intact
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        assert (await kb.stats()).chunks == 1


async def test_persistence_across_reopen(tmp_path: Path) -> None:
    db = f"surrealkv://{tmp_path / 'kb'}"
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        await kb.ingest_bytes(b"persistent words", mime_type="text/plain", source="note://1")
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        hits = await kb.search("persistent", mode="text")
        assert [h.source for h in hits] == ["note://1"]


async def test_engine_refresh_keeps_data_and_holds_queries(tmp_path: Path) -> None:
    db = f"surrealkv://{tmp_path / 'kb'}"
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        await kb.ingest_bytes(b"persistent words", mime_type="text/plain", source="note://1")
        client = kb.store.client
        # queries issued around the refresh wait for the reopened engine instead of failing
        before, refreshed, after = await asyncio.gather(
            kb.search("persistent", mode="text"), kb.store.refresh_engine(),
            kb.search("persistent words", mode="hybrid"))
        assert refreshed is True and kb.store.client is client
        assert [h.source for h in before] == [h.source for h in after] == ["note://1"]
        await kb.rebuild_index()  # refreshes the engine again, then builds the graph
        assert [h.source for h in await kb.search("persistent", mode="vector")] == ["note://1"]
    async with await KnowledgeBase.open("mem://", model="hashing-64") as kb:
        assert await kb.store.refresh_engine() is False  # closing would lose the data


def test_freed_memory_goes_back_to_the_system() -> None:
    # What a reopen does after closing the engine: heap pages freed in the middle of the
    # heap (which glibc keeps) are returned, so RSS falls.
    status = Path("/proc/self/status")
    if not status.exists() or _malloc_trim() is None:
        pytest.skip("no glibc malloc_trim here")

    def rss_mb() -> int:
        return int(status.read_text().split("VmRSS:")[1].split()[0]) // 1024

    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    blocks = [libc.malloc(4096) for _ in range(40_000)]  # 160 MB
    for block in blocks:
        libc.memset(block, 1, 4096)
    kept = [*blocks[::64], blocks[-1]]  # pins the heap: free() alone cannot shrink it
    for block in set(blocks) - set(kept):
        libc.free(block)
    freed = rss_mb()
    assert release_freed_memory() is True
    assert rss_mb() < freed - 100
    for block in kept:
        libc.free(block)


@pytest.mark.slow
async def test_engine_reopens_after_many_rows_written(tmp_path: Path) -> None:
    # The embedded engine stops for good after tens of thousands of rows written in one
    # session; a file store reopens it every engine_reopen_rows rows (here 40, to see it).
    db = f"surrealkv://{tmp_path / 'kb'}"
    texts = {f"note://{n}": f"note {n} about reopening engines and word{n}" for n in range(60)}
    async with await KnowledgeBase.open(db, model="hashing-64", engine_reopen_rows=40) as kb:
        assert kb.store.reopen_after == 40
        client = kb.store.client
        report = await kb.ingest_texts(texts)
        assert report.failures == []
        # 60 chunk rows and their 60 vector rows, concurrent searches meanwhile
        searches = [kb.search(f"word{n}", mode="text") for n in range(0, 60, 7)]
        await kb.ingest_texts({f"more://{n}": f"more text {n}" for n in range(30)})
        results = await asyncio.gather(*searches)
        assert kb.store.reopens >= 2 and kb.store.client is client
        assert [hits[0].source for hits in results] == [f"note://{n}" for n in range(0, 60, 7)]
        assert (await kb.stats()).chunks == 90
        # a long document is written in batches outside one transaction: counted too
        before = kb.store.reopens
        book = " ".join(f"Sentence {n} of the long book." for n in range(2000))
        result = (await kb.ingest_texts({"book://1": book})).results[0]
        assert result.status == "ingested" and result.chunks > 40
        assert kb.store.reopens > before
        assert (await kb.search("Sentence 1999", mode="text", limit=1))[0].source == "book://1"
        assert await kb.delete("book://1")
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        assert kb.store.reopen_after == Settings.from_env().engine_reopen_rows
        assert (await kb.stats()).chunks == 90
        hits = await kb.search(texts["note://33"], mode="vector", limit=1)
        assert hits[0].source == "note://33"
    async with await KnowledgeBase.open("mem://", model="hashing-64",
                                        engine_reopen_rows=1) as kb:
        assert kb.store.reopen_after == 0  # closing would lose the data
        await kb.ingest_texts(texts)
        assert kb.store.reopens == 0 and (await kb.stats()).chunks == 60
    with pytest.raises(ConfigurationError, match="engine_reopen_rows"):
        Settings(engine_reopen_rows=-1)


async def test_second_open_of_same_file_is_a_clear_error(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    async with await KnowledgeBase.open(db, model="hashing-64"):
        # the engine's lock says "another process"; the store knows better
        with pytest.raises(StoreError, match="this process has it open already"):
            await KnowledgeBase.open(db, model="hashing-64")
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:  # closed: free again
        assert (await kb.stats()).documents == 0
    # another process holding it is named as such (tests/test_server_cli.py has the CLI)


async def test_store_errors_name_the_real_cause(kb: KnowledgeBase) -> None:
    with pytest.raises(StoreError, match="boom"):
        await kb.store.query("BEGIN; CREATE surrealdocs_meta:x SET a = 1; THROW 'boom'; COMMIT;")
    (row,) = await kb.store.query("SELECT * FROM ONLY surrealdocs_meta:x;")
    assert row is None  # rolled back
    with pytest.raises(StoreError, match="Expected `string`"):
        await kb.store.query("BEGIN; CREATE documents:x SET source = 'a'; COMMIT;")
    with pytest.raises(StoreError):
        await kb.store.query("CREATE $id SET nonsense_field = 1;",
                             {"id": RecordID("documents", "y")})


async def test_reembed_switches_the_model(tmp_path: Path) -> None:
    from surrealdocs.core.reembed import reembed
    from surrealdocs.embed import get_embedder

    db = str(tmp_path / "kb")
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        await kb.ingest_bytes(b"alpha beta gamma " * 200, mime_type="text/plain",
                              source="note://a")
        n_chunks = (await kb.stats()).chunks
    done = await reembed(Settings(db=db, model="hashing-32"), get_embedder("hashing-32"))
    assert done == n_chunks > 1
    with pytest.raises(EmbeddingModelMismatchError):
        await KnowledgeBase.open(db, model="hashing-64")
    async with await KnowledgeBase.open(db, model="hashing-32") as kb:
        (info,) = await kb.store.query("INFO FOR TABLE chunks_vectors;")
        assert "DIMENSION 32" in info["indexes"]["chunks_embedding_hnsw"]
        (lengths,) = await kb.store.query(
            "SELECT VALUE array::len(embedding) FROM chunks_vectors;")
        assert set(lengths) == {32} and len(lengths) == n_chunks
        hits = await kb.search("alpha", mode="vector", limit=2)
        assert len(hits) == 2 and hits[0].source == "note://a"


async def test_interrupted_reembed_blocks_opening(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    async with await KnowledgeBase.open(db, model="hashing-64") as kb:
        await kb.store.query("UPSERT $e MERGE { reembedding: 'hashing-32' };",
                             {"e": Names().embedding_key})
    with pytest.raises(EmbeddingModelMismatchError, match="interrupted"):
        await KnowledgeBase.open(db, model="hashing-64")


async def test_two_knowledge_bases_share_one_database_under_other_names() -> None:

    settings = Settings(db="mem://", model="hashing-64")
    async with await KnowledgeBase.open(settings=settings) as first:
        other = Settings(model="hashing-32", documents_table="papers",
                         chunks_table="paper_chunks")
        # the same in-memory engine, through the first connection
        second = await KnowledgeBase.around(first.store.client, settings=other)
        store = second.store
        await first.ingest_bytes(b"apples and pears", mime_type="text/plain", source="n://1")
        await second.ingest_bytes(b"ships and harbours", mime_type="text/plain", source="n://2")
        assert [h.source for h in await first.search("apples", mode="text")] == ["n://1"]
        assert [h.source for h in await second.search("harbours", mode="text")] == ["n://2"]
        assert await second.search("apples", mode="text") == []
        (info,) = await store.query("INFO FOR TABLE paper_chunks_vectors;")
        assert "DIMENSION 32" in info["indexes"]["paper_chunks_embedding_hnsw"]


def test_table_names_are_validated() -> None:
    with pytest.raises(InvalidIdentifierError):
        Names("documents; DELETE x", "chunks")
    with pytest.raises(InvalidIdentifierError):
        Names("same", "same")


async def test_version_1_store_gets_the_new_bm25_parameters(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    old = Settings(db=db, model="hashing-64", bm25_k1=1.2, bm25_b=0.75,  # the v1 defaults
                   text_index="engine")
    async with await KnowledgeBase.open(settings=old) as kb:
        await kb.ingest_texts({f"n://{i}": f"note {i} about walruses" if i == 3 else
                               f"note {i} about gardening" for i in range(8)})
        await kb.store.query("UPSERT $k SET version = 1;", {"k": SCHEMA_KEY})
        (info,) = await kb.store.query("INFO FOR TABLE chunks;")
        assert "BM25(1.2,0.75)" in info["indexes"]["chunks_content_ft"]
    async with await KnowledgeBase.open(db, model="hashing-64", text_index="engine") as kb:
        (info,) = await kb.store.query("INFO FOR TABLE chunks;")
        assert "BM25(0.9,0.4)" in info["indexes"]["chunks_content_ft"]
        (row,) = await kb.store.query("SELECT * FROM ONLY $k;", {"k": SCHEMA_KEY})
        assert row["version"] == SCHEMA_VERSION >= 2
        hits = await kb.search("walruses", mode="text")  # the index was rebuilt over old rows
        assert [h.source for h in hits] == ["n://3"]
