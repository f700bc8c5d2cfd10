"""The MCP endpoint of `surrealdocs serve` (/mcp/): streamable HTTP behind the API keys, the
write tools only for keys that may write (and only when the server allows them)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("mcp")

import httpx
import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import PATIENCE
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.faces.http import ServeConfig, create_app


@asynccontextmanager
async def serving(asgi: Any) -> AsyncIterator[int]:
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
            await asyncio.sleep(0.05)
        assert server.started
        yield port
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, PATIENCE)


@asynccontextmanager
async def mcp_client(port: int, key: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"},
                                  timeout=30) as http:
        transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp/", http_client=http)
        async with Client(transport) as client:
            yield client


async def test_mcp_behind_the_keys(tmp_path: Path) -> None:
    settings = Settings(db=str(tmp_path / "kb"), model="hashing-64",
                        uploads_dir=str(tmp_path / "uploads"))
    async with await KnowledgeBase.open(settings=settings) as kb:
        await kb.ingest_texts({"note://heron": "A grey heron waits in the shallows."})
        _, writer = await kb.keys.create("writer")
        _, reader = await kb.keys.create("reader", read_only=True)
    app = create_app(ServeConfig(settings=settings, mcp_allow_writes=True))
    async with serving(app) as port:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient() as plain:
            deadline = time.monotonic() + PATIENCE  # the store opens in the background
            while not (await plain.get(f"{base}/v1/ready")).json().get("ready"):
                assert time.monotonic() < deadline, "the store did not open"
                await asyncio.sleep(0.05)
            for headers in ({}, {"Authorization": "Bearer sd_wrong"}):
                answer = await plain.post(f"{base}/mcp/", json={}, headers=headers)
                assert answer.status_code == 401
                assert answer.json()["error"]["code"] == "unauthorized"
        async with mcp_client(port, writer) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"search", "read", "add_text", "ingest_path"} <= tools
            added = await client.call_tool("add_text", {
                "source": "note://egret", "text": "A little egret stalks fish."})
            assert json.loads(added.content[0].text)["status"] == "ingested"
            found = await client.call_tool("search", {"query": "egret fish", "mode": "text"})
            assert json.loads(found.content[0].text)["hits"][0]["source"] == "note://egret"
        async with mcp_client(port, reader) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert "search" in tools and "add_text" not in tools
            refused = await client.call_tool("add_text", {"source": "note://x", "text": "x"})
            # the server has --mcp-allow-writes: the key is what is missing, and it says so
            assert refused.is_error and "this key is read-only" in refused.content[0].text
            assert "--mcp-allow-writes" not in refused.content[0].text
            found = await client.call_tool("search", {"query": "heron", "mode": "text"})
            assert json.loads(found.content[0].text)["hits"][0]["source"] == "note://heron"
