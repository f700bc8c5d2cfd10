"""The rerank stage, against a loopback rerank server that scores as a test scripts it (the
shared rerank request: POST /rerank, results of index and relevance_score), refuses with
429 or 5xx, answers slowly or with garbage: in every face the order follows the reranker,
a failure keeps the first stage's order with a notice, and ``ask`` cites from the reranked
passages."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from chat_server import chat_server
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.core.search_request import SearchRequest
from surrealdocs.errors import ConfigurationError
from surrealdocs.faces.cli import app

# the first stage ranks "heron" passages by BM25; the reranker prefers the kingfisher
TEXTS = {
    f"note://{n}": f"The heron waits in the reeds. {extra}"
    for n, extra in enumerate([
        "Herons wade and herons fish; the heron is patient, a heron of the marsh.",
        "A heron flies over the heron colony, heron after heron.",
        "The grey heron hunts fish in shallow water.",
        "A heron stands near a kingfisher that dives for minnows.",
        "Heron nests sit high in the trees.",
        "The purple heron hides in tall reeds.",
    ])}


@dataclass
class RerankServer:
    url: str = ""
    mode: str = "ok"  # ok, busy-once, error, slow, garbage, partial
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    @staticmethod
    def score(text: str) -> float:
        return 0.95 if "kingfisher" in text else 0.2 + 0.01 * len(text) / 100


@contextmanager
def rerank_server() -> Iterator[RerankServer]:
    state = RerankServer()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(body)
            state.headers.append(dict(self.headers))
            mode = state.mode
            if mode == "busy-once":
                state.mode = "ok"
                self._send(429, {"error": "slow down"}, {"Retry-After": "0"})
                return
            if mode == "error":
                self._send(503, {"error": "down"})
                return
            if mode == "slow":
                time.sleep(3)
            if mode == "garbage":
                self._send(200, {"results": "nope"})
                return
            results = [{"index": i, "relevance_score": state.score(d)}
                       for i, d in enumerate(body["documents"])]
            if mode == "partial":
                results = results[:1]
            results.sort(key=lambda r: -r["relevance_score"])
            self._send(200, {"results": results[:body.get("top_n") or len(results)]})

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None
                  ) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def reranker() -> Iterator[RerankServer]:
    with rerank_server() as server:
        yield server


def settings_for(server: RerankServer, **more: Any) -> Settings:
    return Settings(**{"db": "mem://", "model": "hashing-64", "rerank": "rerank:tiny",
                       "rerank_base_url": server.url, "rerank_api_key": "rk-secret",
                       "rerank_timeout": 1.0, "relevance_cutoff": 0, **more})


@pytest.fixture
async def kb(reranker: RerankServer) -> Any:
    async with await KnowledgeBase.open(settings=settings_for(reranker)) as base:
        await base.ingest_texts(TEXTS)
        yield base


KINGFISHER = "note://3"


async def test_the_order_follows_the_reranker(kb: KnowledgeBase,
                                              reranker: RerankServer) -> None:
    first = await kb.search("heron", mode="text", limit=6, rerank="off")
    assert first[0].source != KINGFISHER and first[0].rerank_score is None
    hits = await kb.search("heron", mode="text", limit=3)
    assert hits[0].source == KINGFISHER and hits[0].rerank_score == pytest.approx(0.95)
    assert hits[0].first_rank == [h.source for h in first].index(KINGFISHER) + 1
    assert len(hits) == 3 and getattr(hits, "notice", None) is None
    (asked,) = reranker.requests
    assert asked["model"] == "tiny" and asked["query"] == "heron"
    assert len(asked["documents"]) == 6  # the first stage's depth, not the limit
    assert reranker.headers[0]["Authorization"] == "Bearer rk-secret"


async def test_a_busy_reranker_is_asked_again(kb: KnowledgeBase,
                                              reranker: RerankServer) -> None:
    reranker.mode = "busy-once"
    hits = await kb.search("heron", mode="text", limit=3)
    assert hits[0].source == KINGFISHER and len(reranker.requests) == 2


@pytest.mark.parametrize("mode,why", [("error", "503"), ("garbage", "results"),
                                      ("partial", "scored 1 of"), ("slow", "within 1 s")])
async def test_a_failing_reranker_keeps_the_first_order_with_a_notice(
        kb: KnowledgeBase, reranker: RerankServer, mode: str, why: str) -> None:
    first = [h.chunk_id for h in await kb.search("heron", mode="text", limit=4,
                                                 rerank="off")]
    reranker.mode = mode
    started = time.monotonic()
    hits = await kb.search("heron", mode="text", limit=4)
    took = time.monotonic() - started
    assert [h.chunk_id for h in hits] == first
    notice = getattr(hits, "notice", None)
    assert notice and why in notice and "first stage" in notice, notice
    assert all(h.rerank_score is None for h in hits)
    if mode == "slow":  # the timeout bounds the wait (and 503s are retried within it)
        assert took < 1.0 + 1.5, took


async def test_an_unreachable_reranker_answers_within_its_timeout() -> None:
    settings = Settings(db="mem://", model="hashing-64", rerank="rerank:tiny",
                        rerank_base_url="http://127.0.0.1:9", rerank_timeout=1.0)
    async with await KnowledgeBase.open(settings=settings) as kb:
        await kb.ingest_texts(TEXTS)
        started = time.monotonic()
        hits = await kb.search("heron", mode="text", limit=3, cutoff=False)
        assert time.monotonic() - started < 1.0 + 1.5
        assert hits and "cannot reach" in (getattr(hits, "notice", None) or "")


def test_rerank_names_are_checked() -> None:
    settings = Settings(db="mem://")
    for bad in ("cohere", "rerank:", 3):
        with pytest.raises(ConfigurationError):
            SearchRequest("x", rerank=bad).checked(settings)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="no reranker is configured"):
        SearchRequest("x", rerank=True).checked(settings)
    assert SearchRequest("x").checked(settings).rerank == ""
    assert SearchRequest("x", rerank="llm").checked(settings).rerank == "llm"
    with pytest.raises(ConfigurationError):
        Settings(rerank="other:x")


async def test_ask_cites_from_the_reranked_passages(reranker: RerankServer) -> None:
    with chat_server() as chat:
        settings = settings_for(reranker, llm="openai:tiny", llm_base_url=chat.url + "/v1")
        async with await KnowledgeBase.open(settings=settings) as kb:
            await kb.ingest_texts(TEXTS)
            answer = await kb.ask(SearchRequest("heron", mode="text", limit=2))
        # the model was given the reranked passages, the reranker's best first, and cited it
        assert answer.passages[0].source == KINGFISHER
        assert answer.citations and answer.citations[0].source == KINGFISHER
        assert "kingfisher" in chat.prompt().lower()


async def test_the_chat_model_can_rerank(reranker: RerankServer) -> None:
    with chat_server() as chat:
        settings = Settings(db="mem://", model="hashing-64", llm="openai:tiny",
                            llm_base_url=chat.url + "/v1", rerank="llm", relevance_cutoff=0)
        async with await KnowledgeBase.open(settings=settings) as kb:
            await kb.ingest_texts(TEXTS)
            first = await kb.search("heron", mode="text", limit=6, rerank="off")
            kingfisher = [h.source for h in first].index(KINGFISHER) + 1
            chat.reply = "\n".join(f"{n}: {9 if n == kingfisher else 2}" for n in range(1, 7))
            hits = await kb.search("heron", mode="text", limit=3)
            assert hits[0].source == KINGFISHER and hits[0].rerank_score == pytest.approx(0.9)
            chat.reply = "I cannot score these."
            kept = await kb.search("heron", mode="text", limit=3)
            assert [h.source for h in kept] == [h.source for h in first][:3]
            assert "scored 0 of 6" in (getattr(kept, "notice", None) or "")


# ----- every face -----------------------------------------------------------------------
def test_the_command_line_reranks_and_falls_back(reranker: RerankServer, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(tmp_path / "kb")
    store = ["--db", db, "--model", "hashing-64"]
    monkeypatch.setenv("SURREALDOCS_RERANK_BASE_URL", reranker.url)
    notes = tmp_path / "notes"
    notes.mkdir()
    for n, (_, text) in enumerate(TEXTS.items()):
        (notes / f"n{n}.txt").write_text(text)
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(notes), *store]).exit_code == 0
    result = runner.invoke(app, ["search", "heron", "--mode", "text", "--all", "--json",
                                 "--rerank", "rerank:tiny", "-k", "2", *store])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)
    assert hits[0]["source"].endswith("n3.txt") and hits[0]["first_rank"] > 1
    reranker.mode = "error"
    result = runner.invoke(app, ["search", "heron", "--mode", "text", "--all",
                                 "--rerank", "rerank:tiny", *store])
    assert result.exit_code == 0 and "first stage" in result.output, result.output
    result = runner.invoke(app, ["search", "heron", "--rerank", "cohere", *store])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_the_http_api_reranks_with_the_servers_reranker_only(reranker: RerankServer,
                                                             tmp_path: Path) -> None:
    from server_helpers import serve

    with serve(tmp_path, settings=settings_for(reranker, uploads_dir=str(tmp_path / "up"))) \
            as server:
        c = server.client
        assert c.post("/v1/texts", json={"texts": [{"source": s, "text": t}
                                                   for s, t in TEXTS.items()]}).status_code == 200
        assert c.get("/v1/info").json()["rerank"] == "rerank:tiny"
        found = c.post("/v1/search", json={"query": "heron", "mode": "text", "limit": 2})
        body = found.json()
        assert body["hits"][0]["source"] == KINGFISHER and body["reranked"] is True
        plain = c.get("/v1/search", params={"query": "heron", "mode": "text", "limit": 2,
                                            "rerank": "false"}).json()
        assert plain["reranked"] is False and plain["hits"][0]["source"] != KINGFISHER
        # a client turns the server's reranker on or off; it never names one
        named = c.post("/v1/search", json={"query": "heron", "rerank": "rerank:other"})
        assert named.status_code == 422, named.text
        reranker.mode = "error"
        fallback = c.post("/v1/search", json={"query": "heron", "mode": "text"}).json()
        assert "first stage" in fallback["notice"] and fallback["reranked"] is False


async def test_mcp_and_the_retrievers_rerank(kb: KnowledgeBase,
                                             reranker: RerankServer) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from surrealdocs.faces.mcp import build_mcp_server

    async with Client(build_mcp_server(kb)) as client:
        out = (await client.call_tool("search", {"query": "heron", "mode": "text",
                                                 "limit": 2})).structured_content
        assert out is not None and out["hits"][0]["source"] == KINGFISHER
        assert out["hits"][0]["first_rank"] > 1
        reranker.mode = "garbage"
        out = (await client.call_tool("search", {"query": "heron", "mode": "text",
                                                 "limit": 2})).structured_content
        assert out is not None and "first stage" in out["notice"]
    reranker.mode = "ok"
    pytest.importorskip("langchain_core")
    from surrealdocs.integrations.langchain import SurrealDocsRetriever

    docs = await SurrealDocsRetriever(kb=kb, mode="text", k=2).ainvoke("heron")
    assert docs[0].metadata["source"] == KINGFISHER
    plain = await SurrealDocsRetriever(kb=kb, mode="text", k=2, rerank=False).ainvoke("heron")
    assert plain[0].metadata["source"] != KINGFISHER
    pytest.importorskip("llama_index.core")
    from surrealdocs.integrations.llamaindex import SurrealDocsRetriever as LlamaRetriever

    nodes = await LlamaRetriever(kb, mode="text", similarity_top_k=2).aretrieve("heron")
    assert nodes[0].node.metadata["source"] == KINGFISHER
    # a reranker that fails: the first order, and the notice in each hit's metadata
    reranker.mode = "error"
    docs = await SurrealDocsRetriever(kb=kb, mode="text", k=2).ainvoke("heron")
    assert docs[0].metadata["source"] != KINGFISHER
    assert all("first stage" in d.metadata["notice"] for d in docs)
    nodes = await LlamaRetriever(kb, mode="text", similarity_top_k=2).aretrieve("heron")
    assert all("first stage" in n.node.metadata["notice"] for n in nodes)


def test_eval_measures_with_a_reranker(reranker: RerankServer, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from test_eval import write_beir

    root = write_beir(tmp_path / "tiny")
    monkeypatch.setenv("SURREALDOCS_RERANK_BASE_URL", reranker.url)
    result = CliRunner().invoke(app, ["eval", str(root), "--model", "hashing-64", "--json",
                                      "--mode", "text", "--rerank", "rerank:tiny"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["results"][0]["mode"] == "text"
    assert reranker.requests and all(r["model"] == "tiny" for r in reranker.requests)
    reranker.requests.clear()
    result = CliRunner().invoke(app, ["eval", str(root), "--model", "hashing-64", "--json",
                                      "--mode", "text"])
    assert result.exit_code == 0 and not reranker.requests
