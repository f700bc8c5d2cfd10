"""surrealdocs' remote code path (``ws://`` and ``http://`` URLs with a user and password),
end to end through ``remote_engine.RemoteEngine``: a test fixture that speaks SurrealDB's RPC
on loopback and forwards it to an embedded engine (no SurrealDB binary is needed).

The remote-path problems found with this fixture have tests here too: two processes writing
one document, a graph build slower than the SDK's 30 s reply deadline, and a document
abandoned half written by a crashed client.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio
from surrealdb import AsyncSurreal
from typer.testing import CliRunner

from conftest import PATIENCE, SAMPLES
from surrealdocs import KnowledgeBase, Settings, StoreError, SyncKnowledgeBase
from surrealdocs.embed import get_embedder
from surrealdocs.faces.cli import app
from surrealdocs.faces.kreuzberg_surrealdb import DocumentPipeline
from surrealdocs.faces.open_notebook import NotebookSearch
from surrealdocs.parts.results import id_text
from surrealdocs.store.connection import Store

pytestmark = pytest.mark.slow  # subprocesses, servers or real corpora: -m 'not slow' skips

if TYPE_CHECKING:  # imported by pytest as a plugin (below), so that its asserts are rewritten
    from remote_engine import RemoteEngine

# The fixtures remote_engine, remote_url, remote_http_url, remote_settings and
# remote_http_settings (tests/remote_engine.py).
pytest_plugins = ["remote_engine"]

TEXTS = {
    "note://hnsw": "SurrealDB keeps vectors in an HNSW graph for approximate nearest neighbours. "
                   * 4,
    "note://bm25": "BM25 ranks documents by term frequency and inverse document frequency. " * 4,
    "note://cats": "Cats sleep most of the day and hunt at dawn and dusk. " * 4,
}


@pytest.fixture(params=["ws", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def settings_for(remote_engine: RemoteEngine, transport: str) -> Settings:
    """The fixture server's settings over the parametrised transport."""
    return remote_engine.settings(transport)


@pytest_asyncio.fixture
async def kb(settings_for: Settings) -> AsyncIterator[KnowledgeBase]:
    base = await KnowledgeBase.open(settings=settings_for)
    try:
        yield base
    finally:
        await base.close()


async def sdk_connection(engine: RemoteEngine, transport: str, namespace: str = "app",
                         database: str = "main") -> Any:
    """The caller's own SDK connection, signed in and ``use()``d."""
    db = AsyncSurreal(engine.url(transport))
    await db.connect()
    await db.signin({"username": engine.user, "password": engine.password})
    await db.use(namespace, database)
    return db


# --------------------------------------------------------------------------- the fixture


async def test_fixture_speaks_rpc_like_a_server(remote_engine: RemoteEngine,
                                                transport: str) -> None:
    db = AsyncSurreal(remote_engine.url(transport))
    await db.connect()
    try:
        assert (await db.version()).startswith("surrealdb-3.")
        with pytest.raises(Exception, match="Anonymous access not allowed"):
            await db.query("RETURN 1;")
        with pytest.raises(Exception, match="problem with authentication"):
            await db.signin({"username": remote_engine.user, "password": "wrong"})
        await db.signin({"username": remote_engine.user, "password": remote_engine.password})
        await db.use("fx", "main")
        await db.let("greeting", "hi")
        created = await db.query("CREATE item:1 SET at = time::now(); RETURN $greeting;")
        assert created[1] == "hi"
        await db.unset("greeting")
        assert await db.query("RETURN $greeting;") == [None]
        assert remote_engine.root_query("SELECT VALUE id FROM item;", namespace="fx",
                                        database="main") == [[created[0][0]["id"]]]
    finally:
        await db.close()


async def test_fixture_sessions_are_per_connection_and_detached(
        remote_engine: RemoteEngine) -> None:
    one = await sdk_connection(remote_engine, "ws", "a", "one")
    two = await sdk_connection(remote_engine, "ws", "b", "two")
    await one.let("x", 1)
    assert await one.query("RETURN [session::ns(), session::db(), $x];") == [["a", "one", 1]]
    assert await two.query("RETURN [session::ns(), session::db(), $x];") == [["b", "two", None]]
    assert len(remote_engine.sessions()) == 2
    await one.close()
    await two.close()
    for _ in range(100):  # the server notices the closed sockets asynchronously
        if not remote_engine.sessions():
            break
        await asyncio.sleep(0.02)
    assert remote_engine.sessions() == []
    assert remote_engine.connections == 2


def test_fixture_frees_its_port_and_thread() -> None:
    from remote_engine import RemoteEngine

    engine = RemoteEngine().start()
    port, thread = engine.port, engine._thread
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    engine.stop()
    assert thread is not None and not thread.is_alive()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    engine.stop()  # idempotent


def test_fixture_stops_with_clients_still_connected() -> None:
    async def hold_open(engine: RemoteEngine) -> None:
        db = await sdk_connection(engine, "ws")
        await db.query("RETURN 1;")
        await asyncio.to_thread(engine.stop)  # the server closes the socket under the client
        with pytest.raises(Exception, match=r"closed|connect"):
            await db.query("RETURN 1;")
        await db.close()

    from remote_engine import RemoteEngine

    engine = RemoteEngine().start()
    asyncio.run(hold_open(engine))
    assert engine._thread is not None and not engine._thread.is_alive()


# --------------------------------------------------------------------------- KnowledgeBase


async def test_knowledge_base_end_to_end(kb: KnowledgeBase, remote_engine: RemoteEngine,
                                         transport: str, tmp_path: Path) -> None:
    assert kb.store.url == remote_engine.url(transport)
    assert not kb.store.embedded and not kb.store.file_backed

    report = await kb.ingest_texts(TEXTS)
    assert report.counts["ingested"] == 3 and not report.failures
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLES, docs)
    report = await kb.ingest([docs])
    assert report.counts["ingested"] == 5, [(f.source, f.reason) for f in report.failures]
    result = await kb.ingest_bytes(b"Walruses are large flippered marine mammals.",
                                   mime_type="text/plain", source="upload://walrus")
    assert result.status == "ingested"

    for mode in ("text", "vector", "hybrid"):
        hits = await kb.search("HNSW graph nearest neighbours vectors", mode=mode, limit=3)
        assert hits and hits[0].source == "note://hnsw", (mode, hits)
    hits = await kb.search("BM25 ranking", mode="text", source="*bm25.txt")
    assert hits and all(h.source.endswith("bm25.txt") for h in hits)
    assert (await kb.search("walrus", mode="text", limit=1))[0].source == "upload://walrus"

    stats = await kb.stats()
    assert stats.url == remote_engine.url(transport)
    assert (stats.documents, stats.model, stats.dimension) == (9, "hashing-64", 64)
    assert stats.vectors_outside_graph == stats.chunks > 0
    await kb.rebuild_index()  # no engine refresh on a server: the graph is built in place
    assert (await kb.stats()).vectors_outside_graph == 0
    assert (await kb.search("HNSW graph", mode="vector", limit=1))[0].source == "note://hnsw"

    assert await kb.delete("note://cats")
    assert not await kb.delete("note://cats")
    assert await kb.delete(str(docs / "bm25.txt"))
    assert (await kb.stats()).documents == 7
    assert await kb.search("cats hunt at dawn", mode="text") == []

    # What the client wrote is on the server, where a root session sees it.
    (count,) = remote_engine.root_query("RETURN count(SELECT id FROM documents);",
                                        namespace="surrealdocs", database="main")
    assert count == 7


async def test_reopen_and_a_second_connection_see_the_data(remote_engine: RemoteEngine,
                                                           transport: str) -> None:
    settings = remote_engine.settings(transport)
    first = await KnowledgeBase.open(settings=settings)
    await first.ingest_texts(TEXTS)
    second = await KnowledgeBase.open(settings=remote_engine.settings(
        "http" if transport == "ws" else "ws"))
    try:
        assert (await second.stats()).documents == 3  # the other transport, at the same time
        await second.ingest_texts({"note://late": "written by the second client " * 5})
        assert (await first.search("second client", mode="text"))[0].source == "note://late"
    finally:
        await second.close()
        await first.close()

    again = await KnowledgeBase.open(settings=settings)
    try:
        assert (await again.stats()).documents == 4
        report = await again.ingest_texts(TEXTS)
        assert report.counts["unchanged"] == 3
    finally:
        await again.close()


async def test_two_clients_write_concurrently(remote_engine: RemoteEngine) -> None:
    """Two connections (two processes, in real life) ingesting different documents at once."""
    one = await KnowledgeBase.open(settings=remote_engine.settings("ws"))
    two = await KnowledgeBase.open(settings=remote_engine.settings("http"))
    try:
        left = {f"left://{i}": f"left document {i} about apples and pears " * 8
                for i in range(20)}
        right = {f"right://{i}": f"right document {i} about boats and sails " * 8
                 for i in range(20)}
        reports = await asyncio.gather(one.ingest_texts(left), two.ingest_texts(right))
        assert [r.counts["ingested"] for r in reports] == [20, 20]
        assert (await one.stats()).documents == (await two.stats()).documents == 40
        assert await one.store.query(
            "RETURN count(SELECT id FROM documents WHERE complete = false);") == [0]
        assert (await two.search("boats and sails", mode="text", limit=1))[0].source \
            .startswith("right://")
    finally:
        await one.close()
        await two.close()


async def test_wrong_password_is_a_clear_store_error(remote_engine: RemoteEngine,
                                                     transport: str) -> None:
    with pytest.raises(StoreError) as caught:
        await KnowledgeBase.open(settings=remote_engine.settings(transport, password="nope"))
    message = str(caught.value)
    assert message.startswith(f"cannot open {remote_engine.url(transport)}")
    assert "problem with authentication" in message
    assert "Traceback" not in message and "\n" not in message
    await until(lambda: not remote_engine.sessions())  # the refused connection was closed


async def test_http_queries_share_connections(remote_engine: RemoteEngine) -> None:
    """Without a pooled session the SDK opens a TCP (over https: TLS) connection per query."""
    kb = await KnowledgeBase.open(settings=remote_engine.settings("http"))
    try:
        await kb.ingest_texts(TEXTS)
        for _ in range(10):
            await kb.search("cats", mode="hybrid")
        assert sum(remote_engine.methods.values()) > 30
        assert len(remote_engine.http_peers) <= 3
    finally:
        await kb.close()


async def test_missing_credentials_are_a_store_error(remote_engine: RemoteEngine,
                                                     transport: str) -> None:
    with pytest.raises(StoreError, match="Anonymous access not allowed"):
        await KnowledgeBase.open(settings=remote_engine.settings(transport, user=None,
                                                                 password=None))


async def test_unreachable_server_is_a_store_error(transport: str) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"{transport}://127.0.0.1:{port}"
    with pytest.raises(StoreError, match=f"cannot open {url}"):
        await KnowledgeBase.open(settings=Settings(db=url, user="root", password="x",
                                                   model="hashing-64"))


async def test_database_and_namespace_users_can_open(remote_engine: RemoteEngine,
                                                    transport: str) -> None:
    """Settings.user may name a root, namespace or database user (connect() tries the three
    levels in that order)."""
    remote_engine.root_query(
        "DEFINE NAMESPACE surrealdocs; USE NS surrealdocs; DEFINE DATABASE main; USE DB main;"
        " DEFINE USER app ON DATABASE PASSWORD 'app-pw' ROLES EDITOR;"
        " DEFINE USER ops ON NAMESPACE PASSWORD 'ops-pw' ROLES EDITOR;")
    for user, password in (("app", "app-pw"), ("ops", "ops-pw")):
        kb = await KnowledgeBase.open(settings=remote_engine.settings(
            transport, user=user, password=password))
        try:
            await kb.ingest_texts({f"note://{user}": f"written by the {user} user " * 5})
            assert (await kb.search(f"{user} user", mode="hybrid"))[0].source == f"note://{user}"
        finally:
            await kb.close()
    with pytest.raises(StoreError, match="problem with authentication"):
        await KnowledgeBase.open(settings=remote_engine.settings(
            transport, user="app", password="ops-pw"))


async def until(condition: Any, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition did not come true in time")


async def test_a_dropped_websocket_is_signed_in_again(remote_engine: RemoteEngine) -> None:
    """A server restart or a network blip: the SDK reopens the socket on the next request,
    which gives a new, anonymous session; the store signs in and use()s again."""
    kb = await KnowledgeBase.open(settings=remote_engine.settings("ws"))
    try:
        await kb.ingest_texts(TEXTS)
        for _ in range(2):
            assert remote_engine.drop_connections() == 1
            await until(lambda: kb.store.client.recv_task.done())  # the client noticed
            hits = await asyncio.gather(*(kb.search(q, mode="text", limit=1)
                                          for q in ("cats", "BM25", "HNSW graph")))
            assert [h[0].source for h in hits] == ["note://cats", "note://bm25", "note://hnsw"]
        assert remote_engine.methods["signin"] == 3  # one renewal per drop, not per query
        assert remote_engine.connections == 3
    finally:
        await kb.close()


async def test_a_transaction_on_a_session_without_a_database_counts_as_session_lost() -> None:
    """A query sent between a renewal's sign-in and its use() (another query renewing) finds
    no namespace; a transaction then has an OK BEGIN and cancelled statements. The store must
    renew and run it again, not report "Specify a namespace to use" (seen once in a run of
    test_a_dropped_websocket_is_signed_in_again)."""
    from surrealdb import AsyncSurreal

    from surrealdocs.store.connection import _session_lost

    db = AsyncSurreal("mem://")
    await db.connect()
    try:  # the engine's own answers, on a session with no namespace selected
        for sql in ("BEGIN; SELECT * FROM a; SELECT * FROM b; COMMIT;",
                    "SELECT * FROM a; RETURN 1;", "SELECT * FROM a;"):
            assert _session_lost(await db.query_raw(sql, {})), sql
        await db.use("n", "d")
        raw = await db.query_raw("BEGIN; SELECT * FROM a; THROW 'no'; COMMIT;", {})
        assert not _session_lost(raw)  # a real failure is not a lost session
    finally:
        await db.close()


async def test_a_lent_connection_is_not_signed_in_again(remote_engine: RemoteEngine) -> None:
    """Store.around() has no credentials: after a drop it reports the server's refusal."""
    db = await sdk_connection(remote_engine, "ws")
    try:
        store = await Store.around(db)
        remote_engine.drop_connections()
        await until(lambda: db.recv_task.done())
        with pytest.raises(StoreError, match="Anonymous access not allowed"):
            await store.query("RETURN 1;")
    finally:
        await db.close()


async def test_an_expired_token_is_renewed() -> None:
    """Over HTTP every request carries the token signin returned, which expires (an hour by
    default; a second here); the store signs in again. A WebSocket session outlives it."""
    from remote_engine import RemoteEngine

    with RemoteEngine(token_duration="1s") as engine:
        kbs = [await KnowledgeBase.open(settings=engine.settings(t)) for t in ("ws", "http")]
        try:
            await kbs[1].ingest_texts(TEXTS)
            await asyncio.sleep(2.1)
            for kb in kbs:
                assert (await kb.search("cats", mode="text"))[0].source == "note://cats"
            assert engine.methods["signin"] == 3
        finally:
            for kb in kbs:
                await kb.close()


async def test_a_server_restart_keeps_data_and_clients(tmp_path: Path) -> None:
    """A file-backed server restarted in place: the open store reconnects, signs in again and
    finds its data."""
    from remote_engine import RemoteEngine

    path = f"surrealkv://{tmp_path / 'server-db'}"
    first = RemoteEngine(path).start()
    port = first.port
    kb = await KnowledgeBase.open(settings=first.settings("ws"))
    try:
        await kb.ingest_texts(TEXTS)
        await asyncio.to_thread(first.stop)
        await until(lambda: kb.store.client.recv_task.done())
        with pytest.raises(StoreError, match=r"could not connect"):
            await kb.search("cats", mode="text")
        with RemoteEngine(path, port=port):
            assert (await kb.search("cats", mode="text"))[0].source == "note://cats"
            assert (await kb.stats()).documents == 3
            await kb.close()  # before the server stops: its shutdown waits for the client
    finally:
        await kb.close()
        first.stop()


def test_sync_knowledge_base_over_ws(remote_settings: Settings) -> None:
    with SyncKnowledgeBase(settings=remote_settings) as kb:
        kb.ingest_texts(TEXTS)
        assert kb.search("cats", mode="text", limit=1)[0].source == "note://cats"
        assert kb.stats().documents == 3


def test_cli_against_the_server(remote_engine: RemoteEngine, transport: str,
                                tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLES, docs)
    common = ["--db", remote_engine.url(transport), "--user", remote_engine.user,
              "--password", remote_engine.password, "--model", "hashing-64"]
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", str(docs), *common, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["counts"]["ingested"] == 5
    result = runner.invoke(app, ["search", "BM25 ranking", *common, "--mode", "text", "--json"])
    assert result.exit_code == 0 and json.loads(result.output)[0]["source"].endswith("bm25.txt")
    result = runner.invoke(app, ["stats", *common, "--json"])
    assert json.loads(result.output)["documents"] == 5
    result = runner.invoke(app, ["rebuild-index", *common])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["reembed", *common[:6], "--model", "hashing-32"])
    assert result.exit_code == 0 and "re-embedded with hashing-32" in result.output
    common[-1] = "hashing-32"
    result = runner.invoke(app, ["stats", *common, "--json"])
    assert json.loads(result.output)["dimension"] == 32
    result = runner.invoke(app, ["add", "Research", str(docs / "bm25.txt"), *common])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["search", "ranking", "--notebook", "Research", *common,
                                 "--json"])
    assert result.exit_code == 0, result.output
    assert {h["source"] for h in json.loads(result.output)} == {str(docs / "bm25.txt")}
    result = runner.invoke(app, ["stats", *common[:4], "--password", "nope", "--json"])
    assert result.exit_code != 0
    assert "problem with authentication" in " ".join(result.output.split())


# --------------------------------------------------------------------------- notebooks


async def test_notebooks_over_the_server(remote_engine: RemoteEngine, transport: str) -> None:
    settings = remote_engine.settings(transport, chunk_size=200, chunk_overlap=20)
    async with await KnowledgeBase.open(settings=settings, run_jobs=True) as kb:
        nbs = kb.notebooks
        search = NotebookSearch(kb)
        research = await nbs.create_notebook("Research", description="retrieval papers")
        other = await nbs.create_notebook("Other")
        source = await nbs.add_text(research, title="Dense retrieval", topics=["rag"],
                                    text="Dense retrieval encodes passages as vectors. " * 20)
        elsewhere = await nbs.add_text(other, title="Gardening",
                                       text="Tomatoes want sun, water and patience. " * 20)
        for item in (source, elsewhere):
            done = await (await item.vectorize()).wait(timeout=PATIENCE)
            assert done.status == "done", done.error

        hits = await search.vector_search("dense retrieval passages", notebook_id=research.id,
                                       min_score=0.1)
        assert hits and all(h.document_id == id_text(source.id) for h in hits)
        groups = await search.hybrid_search("dense retrieval", notebook_id=research.id,
                                         group_by_source=True)
        assert [g.source_id for g in groups] == [id_text(source.id)]
        text = await search.text_search("tomatoes", notebook_id=research.id)
        assert text == []  # scoped: the gardening source is in another notebook

        yesterday = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)
        assert await search.hybrid_search("dense retrieval", notebook_id=research.id,
                                       created_after=yesterday)
        assert await search.hybrid_search("dense retrieval", notebook_id=research.id,
                                       created_before=yesterday) == []

        assert await kb.storage.chunks.graphs.rebuild_notebook_if_due(research.id, force=True)
        assert await search.vector_search("dense retrieval", notebook_id=research.id)
        assert [j.status for j in await nbs.jobs()] == ["done", "done"]

    # Another client (another process, in real life) sees the notebooks.
    async with await KnowledgeBase.open(settings=settings) as again:
        assert {nb.name for nb in await again.notebooks.list_notebooks()} == {"Research", "Other"}


# --------------------------------------------------------------------------- compat facade


async def test_kreuzberg_pipeline_on_a_server_connection(remote_engine: RemoteEngine,
                                                         transport: str, tmp_path: Path) -> None:
    db = await sdk_connection(remote_engine, transport, "kreuzberg", "papers")
    try:
        pipeline = DocumentPipeline(db=db, embedding_model=get_embedder("hashing-64"))
        await pipeline.setup_schema()
        docs = tmp_path / "docs"
        shutil.copytree(SAMPLES, docs)
        report = await pipeline.ingest_directory(docs)
        assert report.counts["ingested"] == 5
        embedding = await pipeline.embed_query("BM25 ranking")
        rows = await pipeline.client.query(
            "SELECT source, vector::distance::knn() AS distance FROM chunks"
            " WHERE embedding <|3,COSINE|> $embedding ORDER BY distance;",
            {"embedding": embedding})
        assert len(rows) == 3
        hits = await pipeline.client.query(
            "SELECT document.source AS source, search::score(1) AS score FROM chunks"
            " WHERE content @1@ 'BM25' ORDER BY score DESC LIMIT 1;")
        assert hits[0]["source"].endswith("bm25.txt")
        store = await Store.around(db)
        assert (store.url, store.embedded) == (remote_engine.url(transport), False)
        assert (store.namespace, store.database) == ("kreuzberg", "papers")
    finally:
        await db.close()


# --------------------------------------------------------------------------- known problems


async def test_two_clients_ingesting_the_same_content(remote_engine: RemoteEngine) -> None:
    one = await KnowledgeBase.open(settings=remote_engine.settings("ws"))
    two = await KnowledgeBase.open(settings=remote_engine.settings("http"))
    # Both clients find no document, then both create it: the server holds each CREATE a
    # moment, so the two checks run before either write (what a race does now and then).
    remote_engine.delays[b"CREATE $doc CONTENT"] = 0.4
    try:
        text = "the same text, found by two machines in two shared folders " * 10
        reports = await asyncio.gather(one.ingest_texts({"left://a": text}),
                                       two.ingest_texts({"right://a": text}))
        assert sorted(r.results[0].status for r in reports) == ["duplicate", "ingested"]
        assert (await one.stats()).documents == 1
    finally:
        remote_engine.delays.clear()
        await one.close()
        await two.close()


async def test_a_slow_index_rebuild_does_not_fail_the_ingest(
        remote_engine: RemoteEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    import surrealdb.connections.async_ws as async_ws

    kb = await KnowledgeBase.open(settings=remote_engine.settings("ws", rebuild_threshold=5))
    try:
        monkeypatch.setattr(async_ws, "_RPC_RECV_TIMEOUT", 0.3)  # 30 s, scaled down
        # a synchronous rebuild slower than the deadline (a server builds it in the background)
        remote_engine.delays[b"REBUILD INDEX chunks_embedding_hnsw ON chunks;"] = 0.8
        report = await kb.ingest_texts({f"x://{i}": f"text {i} " * 40 for i in range(10)})
        assert report.counts["ingested"] == 10
    finally:
        remote_engine.delays.clear()
        await asyncio.sleep(0.8)
        await kb.close()


async def test_an_incomplete_document_left_by_a_crash_is_written_again(
        remote_engine: RemoteEngine) -> None:
    # A document being written is another writer's until it has made no progress for the
    # write lease (120 s by default; 1 s here).
    kb = await KnowledgeBase.open(settings=remote_engine.settings("ws", write_lease=1))
    try:
        text = "the walrus document a crashed client left half written " * 8
        await kb.ingest_texts({"crashed://a": text})
        # What a client that died between writing the chunks and completing leaves behind.
        remote_engine.root_query("UPDATE documents SET complete = false; DELETE files;",
                                 namespace="surrealdocs", database="main")
        report = await kb.ingest_texts({"crashed://a": text})
        assert report.results[0].status == "ingested", report.results[0].status
        assert [h.source for h in await kb.search("walrus", mode="text")] == ["crashed://a"]
    finally:
        await kb.close()
