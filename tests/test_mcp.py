"""The MCP server, talked to with the official SDK's own client: over stdio (a subprocess
``python -m surrealdocs mcp``), over streamable HTTP (uvicorn on loopback) and in-process,
against a real embedded file store."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import uvicorn
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult
from starlette.applications import Starlette
from starlette.routing import Mount
from typer.testing import CliRunner

from conftest import PATIENCE, SAMPLES
from surrealdocs import ConfigurationError, KnowledgeBase, Settings
from surrealdocs.faces.cli import app
from surrealdocs.faces.mcp import build_mcp_server, mcp_http_app

pytestmark = pytest.mark.slow  # subprocesses, servers or real corpora: -m 'not slow' skips

READ_TOOLS = {"search", "read", "list_notebooks", "list_sources", "stats"}
LONG_SOURCE = "note://long"
# Quotes, backslashes and newlines take two characters in JSON: the limit must count them.
LONG_TEXT = "\n\n".join(" ".join(
    [f'Paragraph {n} of the long note: "quoted words", a back\\slash and the zebra '
     f"keyword {n}."] * 3) for n in range(200))


def settings(db: Path) -> Settings:
    return Settings(db=str(db), model="hashing-64")


@pytest.fixture
async def store(tmp_path: Path) -> Path:
    """A file store with the samples (two of them in notebook Research) and one long note;
    closed again, so that a server process may open it."""
    db = tmp_path / "kb"
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLES, docs)
    async with await KnowledgeBase.open(settings=settings(db)) as kb:
        report = await kb.ingest([docs])
        assert report.counts["ingested"] == 5
        nb = await kb.notebooks.create_notebook("Research", "retrieval notes")
        for name in ("bm25.txt", "vector-indexes.md"):
            await kb.notebooks.link((await kb.document(str(docs / name), text=False)).id, nb)
        await kb.ingest_texts({LONG_SOURCE: LONG_TEXT})
    return db


def stdio(db: Path, *more: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "surrealdocs", "mcp", "--db", str(db), "--model", "hashing-64", *more])


def data(result: CallToolResult) -> dict[str, Any]:
    """The structured result, checked against the JSON text the model reads."""
    assert not result.is_error, result.content
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text) == result.structured_content
    out: dict[str, Any] = result.structured_content
    return out


def error(result: CallToolResult) -> str:
    assert result.is_error
    message: str = result.content[0].text  # type: ignore[union-attr]
    assert "Traceback" not in message
    return message


def size(result: CallToolResult) -> int:
    return len(result.content[0].text)  # type: ignore[union-attr]


async def check_tools(client: Client, *, writes: bool) -> None:
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) == READ_TOOLS | ({"add_text", "ingest_path", "add_url"} if writes
                                         else set())
    search = listed["search"]
    props = search.input_schema["properties"]
    assert search.input_schema["required"] == ["query"]
    assert props["mode"]["enum"] == ["hybrid", "vector", "text"]
    assert props["limit"]["minimum"] == 1 and props["limit"]["maximum"] == 50
    assert {"notebook", "source", "mime_type", "topics", "created_after", "created_before",
            "per_document", "min_score", "snippet_chars"} <= set(props)
    assert all(p.get("description") for p in props.values())
    assert "truncated" in (search.description or "")
    read = listed["read"].input_schema["properties"]
    assert {"chunk_id", "before", "after", "document", "first_page", "last_page",
            "offset"} == set(read)
    assert set(listed["list_sources"].input_schema["properties"]) == {
        "notebook", "offset", "limit"}
    for name in READ_TOOLS:
        annotations = listed[name].annotations
        assert annotations is not None and annotations.read_only_hint is True
    if writes:
        add = listed["add_text"].input_schema
        assert set(add["required"]) == {"source", "text"}
        assert listed["add_text"].annotations.read_only_hint is False  # type: ignore[union-attr]
        assert listed["ingest_path"].input_schema["required"] == ["paths"]


async def check_read_tools(client: Client, max_chars: int) -> None:
    """Every read-only tool against the store made by the ``store`` fixture."""
    found = data(await client.call_tool("search", {"query": "BM25 ranking", "mode": "text",
                                                   "limit": 3}))
    assert found["count"] == len(found["hits"]) >= 1 and found["mode"] == "text"
    hit = found["hits"][0]
    assert hit["source"].endswith("bm25.txt") and hit["rank"] == 1
    assert {"title", "page", "char_start", "char_end", "chunk_id", "document_id", "score",
            "snippet"} <= set(hit)
    assert 0 < len(hit["snippet"]) <= 300 and "truncated" not in found

    scoped = data(await client.call_tool("search", {
        "query": "vectors and keywords", "notebook": "Research", "limit": 10}))
    assert scoped["hits"] and {Path(h["source"]).name for h in scoped["hits"]} <= {
        "bm25.txt", "vector-indexes.md"}
    pdf = data(await client.call_tool("search", {
        "query": "revenue", "mime_type": ["application/pdf"], "source": "*.pdf",
        "cutoff": False}))
    assert pdf["hits"] and all(h["mime_type"] == "application/pdf" for h in pdf["hits"])
    # nothing the documents hold: no hits, and a notice that says so
    nothing = data(await client.call_tool("search", {"query": "recipe for banana bread"}))
    assert nothing["hits"] == [] and "no passage looks relevant" in nothing["notice"]
    assert "cutoff: false" in nothing["notice"]
    weaker = data(await client.call_tool("search", {"query": "recipe for banana bread",
                                                    "cutoff": False}))
    assert weaker["hits"] and "notice" not in weaker
    assert data(await client.call_tool("search", {
        "query": "revenue", "created_after": "2999-01-01T00:00:00Z"}))["hits"] == []
    common = data(await client.call_tool("search", {"query": "The and the of"}))
    assert common["hits"] == [] and "common word (the, and, of)" in common["notice"]
    assert data(await client.call_tool("search", {
        "query": "BM25 ranking", "created_before": "2999-01-01"}))["hits"]

    # Errors are tool errors with their message, never tracebacks.
    assert "no notebook 'Nope'" in error(await client.call_tool(
        "search", {"query": "x", "notebook": "Nope"}))
    assert "query is empty" in error(await client.call_tool("search", {"query": "  "}))
    assert "mode" in error(await client.call_tool("search", {"query": "x", "mode": "fuzzy"}))
    assert "writes are disabled" in error(await client.call_tool(
        "add_text", {"source": "note://x", "text": "hello"}))
    assert "writes are disabled" in error(await client.call_tool(
        "ingest_path", {"paths": ["/etc"]}))

    # read: a hit with its neighbours...
    around = data(await client.call_tool("read", {"chunk_id": hit["chunk_id"]}))
    assert around["document_id"] == hit["document_id"] and around["source"] == hit["source"]
    assert around["char_start"] <= hit["char_start"] < hit["char_end"] <= around["char_end"]
    assert len(around["text"]) == around["char_end"] - around["char_start"]
    # ...a page range of a paged document...
    page = data(await client.call_tool("read", {"document": pdf["hits"][0]["document_id"],
                                                "first_page": 2}))
    assert page["last_page"] == 2 and page["text"]
    # ...or a document from an offset.
    start = data(await client.call_tool("read", {"document": hit["document_id"]}))
    assert start["char_start"] == 0 and start["text"].startswith("Keyword search with BM25")
    assert "truncated" not in start
    assert "give either chunk_id" in error(await client.call_tool("read", {}))
    assert "no chunk" in error(await client.call_tool("read", {"chunk_id": "chunks:nope"}))
    assert "pages" in error(await client.call_tool(
        "read", {"document": hit["document_id"], "first_page": 9}))

    # A long document read in slices: each result fits, says it was cut and where to go on.
    text, offset, calls = "", 0, 0
    while True:
        result = await client.call_tool("read", {"document": LONG_SOURCE, "offset": offset})
        part = data(result)
        assert size(result) <= max_chars and part["char_start"] == offset
        text += part["text"]
        calls += 1
        if not part.get("truncated"):
            break
        assert part["limit_chars"] == max_chars and part["next_offset"] == part["char_end"]
        assert part["next_offset"] > offset
        offset = part["next_offset"]
    assert text == LONG_TEXT and calls >= len(json.dumps(LONG_TEXT)) // max_chars

    listed = data(await client.call_tool("list_sources", {}))
    assert listed["total"] == 6 and listed["count"] == len(listed["documents"])
    research = data(await client.call_tool("list_sources", {"notebook": "Research"}))
    assert research["total"] == 2 and "next_offset" not in research
    assert all(d["notebooks"] == ["Research"] for d in research["documents"])
    paged = data(await client.call_tool("list_sources", {"limit": 4}))
    assert paged["count"] == 4 and paged["next_offset"] == 4
    rest = data(await client.call_tool("list_sources", {"offset": 4, "limit": 4}))
    assert rest["count"] == 2 and "next_offset" not in rest
    assert "no notebook" in error(await client.call_tool("list_sources", {"notebook": "Nope"}))

    notebooks = data(await client.call_tool("list_notebooks", {}))
    assert notebooks["count"] == 1
    (nb,) = notebooks["notebooks"]
    assert nb["name"] == "Research" and nb["sources"] == 2
    assert nb["description"] == "retrieval notes"

    stats = data(await client.call_tool("stats", {}))
    assert stats["documents"] == 6 and stats["model"] == "hashing-64"
    assert stats["notebooks"] == 1 and stats["chunks"] > 6


async def test_stdio_read_only(store: Path) -> None:
    async with Client(stdio(store, "--max-chars", "3000")) as client:
        await check_tools(client, writes=False)
        await check_read_tools(client, 3000)


async def test_stdio_with_writes(store: Path, tmp_path: Path) -> None:
    folder = tmp_path / "more"
    folder.mkdir()
    (folder / "walrus.md").write_text("# Walrus\n\nThe walrus keeps a tusk diary.\n")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.5 broken")
    # The initialize handshake of the protocol versions before 2026 (Claude Desktop's).
    async with Client(stdio(store, "--allow-writes"), mode="legacy") as client:
        await check_tools(client, writes=True)
        added = data(await client.call_tool("add_text", {
            "source": "note://otter", "text": "The otter holds hands while sleeping.",
            "notebook": "Research"}))
        assert added["status"] == "ingested" and added["notebook"] == "Research"
        again = data(await client.call_tool("add_text", {
            "source": "note://otter", "text": "The otter holds hands while sleeping."}))
        assert again["status"] == "unchanged"
        assert "create_notebook" in error(await client.call_tool("add_text", {
            "source": "note://x", "text": "x", "notebook": "Animals"}))
        assert error(await client.call_tool("add_text", {"source": "note://x", "text": ""}))

        report = data(await client.call_tool("ingest_path", {
            "paths": [str(folder)], "notebook": "Animals", "create_notebook": True}))
        assert report["counts"]["ingested"] == 1 and report["counts"]["failed"] == 1
        assert report["results"][0]["status"] == "failed" and report["results"][0]["reason"]
        assert report["notebook"] == "Animals"

        otter = data(await client.call_tool("search", {"query": "otter sleeping",
                                                       "notebook": "Research"}))
        assert otter["hits"][0]["source"] == "note://otter"
        walrus = data(await client.call_tool("search", {"query": "walrus tusk",
                                                        "notebook": "Animals"}))
        assert [Path(h["source"]).name for h in walrus["hits"]] == ["walrus.md"]
    # The server closed the store on its way out: it opens again, with what was written.
    async with await KnowledgeBase.open(settings=settings(store)) as kb:
        assert await kb.count_documents() == 8
        assert await kb.count_documents(notebook="Research") == 3


def test_stdio_stdout_carries_only_the_protocol(store: Path) -> None:
    """What a client that reads raw JSON-RPC lines sees: nothing else on stdout."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "search", "arguments": {"query": "BM25", "limit": 1}}}]
    params = stdio(store)
    process = subprocess.Popen([params.command, *params.args], text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    watchdog = threading.Timer(120, process.kill)
    watchdog.start()
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
        process.stdin.flush()
        replies = [json.loads(process.stdout.readline()) for _ in range(2)]
        process.stdin.close()  # the client hangs up: the server closes the store and ends
        assert process.wait() == 0 and process.stdout.read() == ""
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
    assert [r["id"] for r in replies] == [1, 2]
    assert replies[0]["result"]["serverInfo"]["name"] == "surrealdocs"
    assert replies[1]["result"]["structuredContent"]["count"] == 1


@asynccontextmanager
async def serving(asgi: Any) -> AsyncIterator[int]:
    """Serve an ASGI app with uvicorn on a free loopback port, on this event loop."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(asgi, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(int(PATIENCE / 0.05)):
            if server.started:
                break
            if task.done():
                task.result()
            await asyncio.sleep(0.05)
        assert server.started
        yield port
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, PATIENCE)


async def test_streamable_http(store: Path) -> None:
    async with await KnowledgeBase.open(settings=settings(store)) as kb, \
            serving(mcp_http_app(kb, max_chars=3000)) as port, \
            Client(f"http://127.0.0.1:{port}/mcp") as client:
        await check_tools(client, writes=False)
        await check_read_tools(client, 3000)


async def test_streamable_http_mounted_in_another_app(store: Path) -> None:
    """How a web server mounts it: under a prefix, its lifespan entered from the host's."""
    async with await KnowledgeBase.open(settings=settings(store)) as kb:
        mcp_app = mcp_http_app(kb, allow_writes=True, path="/")

        @asynccontextmanager
        async def lifespan(_: Starlette) -> AsyncIterator[None]:
            async with mcp_app.router.lifespan_context(mcp_app):
                yield

        host = Starlette(routes=[Mount("/kb/mcp", app=mcp_app)], lifespan=lifespan)
        async with serving(host) as port, \
                Client(f"http://127.0.0.1:{port}/kb/mcp/") as client:
            await check_tools(client, writes=True)
            added = data(await client.call_tool("add_text", {
                "source": "note://heron", "text": "A heron waits in the shallows."}))
            assert added["status"] == "ingested"
            hits = data(await client.call_tool("search", {"query": "heron shallows"}))
            assert hits["hits"][0]["source"] == "note://heron"


async def test_truncation_is_stated(store: Path) -> None:
    """Results over the limit are cut and say so: fewer hits, fewer documents, shorter
    snippets; the JSON the model reads never exceeds the limit."""
    async with await KnowledgeBase.open(settings=settings(store)) as kb:
        await kb.ingest_texts({f"note://zebra-{n}": f"zebra {n} " + "stripes " * 100
                               for n in range(40)})
        async with Client(build_mcp_server(kb, max_chars=1000)) as client:
            result = await client.call_tool("search", {"query": "zebra stripes", "limit": 30,
                                                       "mode": "text"})
            cut = data(result)
            assert size(result) <= 1000
            assert cut["truncated"] is True and cut["limit_chars"] == 1000
            assert cut["omitted_hits"] == 30 - cut["count"] and cut["count"] >= 1
            result = await client.call_tool("list_sources", {"limit": 50})
            page = data(result)
            assert size(result) <= 1000 and page["truncated"] is True
            assert page["next_offset"] == page["count"] < 46
            chunk = cut["hits"][0]["chunk_id"]
            result = await client.call_tool("read", {"chunk_id": chunk, "before": 0,
                                                     "after": 0})
            assert size(result) <= 1000
        async with Client(build_mcp_server(kb)) as client:  # the default: 8000 characters
            result = await client.call_tool("search", {"query": "zebra stripes",
                                                       "limit": 30, "snippet_chars": 2000})
            assert size(result) <= 8000 and data(result)["truncated"] is True
            whole = data(await client.call_tool("search", {"query": "zebra", "limit": 3}))
            assert "truncated" not in whole and whole["count"] == 3
            bare = data(await client.call_tool("search", {"query": "zebra", "limit": 3,
                                                          "snippet_chars": 0}))
            assert [h["snippet"] for h in bare["hits"]] == ["", "", ""]
            short = data(await client.call_tool("search", {"query": "zebra", "limit": 3,
                                                           "snippet_chars": 20}))
            assert all(len(h["snippet"]) <= 20 and h["snippet"].endswith("…")
                       for h in short["hits"])
    with pytest.raises(ConfigurationError):
        build_mcp_server(kb, max_chars=10)


def test_cli_mcp_refuses_a_bad_limit(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["mcp", "--db", str(tmp_path / "kb"), "--model",
                                      "hashing-64", "--max-chars", "10"])
    assert result.exit_code == 2 and "max_chars" in result.output


def _integration_blocks() -> list[str]:
    text = (Path(__file__).resolve().parents[1] / "docs" / "integrations.md").read_text()
    section = text.split("### Streamable HTTP and your own app", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)


async def test_the_docs_http_examples_run_as_written(tmp_path: Path) -> None:
    """docs/integrations.md's two programs: the stand-alone server (its port swapped for a
    free one) and the fragment that mounts the app in another one (given a ``kb``)."""
    serve, mount = _integration_blocks()
    (tmp_path / "note.txt").write_text("A heron waits in the shallows for a fish.")
    env = {"SURREALDOCS_MODEL": "hashing-64"}
    db = tmp_path / ".surrealdocs" / "db"  # the store the program opens, in its folder
    async with await KnowledgeBase.open(settings=settings(db)) as kb:
        await kb.ingest([tmp_path / "note.txt"])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "serve.py").write_text(serve.replace("8765", str(port)))
    proc = subprocess.Popen([sys.executable, "serve.py"], cwd=tmp_path,
                            env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(int(PATIENCE / 0.1)):
            try:
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    hits = data(await client.call_tool("search", {"query": "heron"}))
                    assert hits["hits"] and hits["hits"][0]["source"].endswith("note.txt")
                    break
            except Exception as exc:  # not listening yet
                if proc.poll() is not None:
                    raise AssertionError(proc.stdout.read() if proc.stdout else "") from exc
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("the documented server did not answer")
    finally:
        proc.terminate()
        proc.wait(timeout=PATIENCE)

    async with await KnowledgeBase.open(settings=settings(db)) as kb:
        scope: dict[str, Any] = {"kb": kb, "mcp_http_app": mcp_http_app}  # as block 1 had
        exec(compile(mount, "integrations.md", "exec"), scope)
        async with serving(scope["app"]) as port2, \
                Client(f"http://127.0.0.1:{port2}/mcp/") as client:
            await check_tools(client, writes=False)
