"""``surrealdocs keys …`` and ``surrealdocs serve`` as people run them."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from server_helpers import served, wait_ready_process
from surrealdocs import KnowledgeBase
from surrealdocs.faces.cli import app

pytestmark = pytest.mark.slow  # subprocesses, servers or real corpora: -m 'not slow' skips

pytest.importorskip("fastapi")
runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_keys_commands(tmp_path: Path) -> None:
    db = ["--db", str(tmp_path / "db"), "--model", "hashing-64"]
    assert run("notebook", "create", "Seed", *db)[0] == 0  # a store (keys list makes none)
    code, out = run("keys", "list", *db)
    assert code == 0 and "no API keys" in out
    code, out = run("keys", "create", "--name", "ci", *db)
    assert code == 0, out
    token = out.strip().splitlines()[-1]
    assert token.startswith("sd_") and "not shown again" in out
    code, out = run("keys", "create", "--name", "dash", "--read-only", "--json", *db)
    created = json.loads(out)
    assert created["read_only"] is True and created["key"].startswith("sd_")
    assert "hash" not in created
    code, out = run("keys", "create", "--name", "ci", *db)
    assert code == 2 and "exists already" in out
    code, out = run("keys", "create", "--name", "no spaces", *db)
    assert code == 2 and "invalid key name" in out
    code, out = run("keys", "list", "--json", *db)
    listed = json.loads(out)
    assert [(k["name"], k["read_only"]) for k in listed] == [("ci", False), ("dash", True)]
    assert token not in out and all("hash" not in k for k in listed)
    assert listed[0]["prefix"] == token[:9]
    code, out = run("keys", "list", *db)
    assert "read-only" in out and token[:9] in out and token not in out

    async def verify() -> tuple[object, object]:
        async with await KnowledgeBase.open(str(tmp_path / "db"), model="hashing-64") as kb:
            return await kb.keys.verify(token), await kb.keys.verify(created["key"])

    ci, dash = asyncio.run(verify())
    assert getattr(ci, "name", None) == "ci" and getattr(dash, "read_only", None) is True

    code, out = run("keys", "revoke", "ci", *db)
    assert code == 0 and "revoked" in out
    code, out = run("keys", "revoke", "ci", *db)
    assert code == 2 and "no key named 'ci'" in out


def test_serve_refuses_bad_setups(tmp_path: Path) -> None:
    db = ["--db", str(tmp_path / "db"), "--model", "hashing-64"]
    code, out = run("serve", "--host", "0.0.0.0", *db)
    assert code == 2 and "without API keys" in out and "keys create" in out
    code, out = run("serve", "--max-file-size", "huge", *db)
    assert code == 2 and "not a size" in out
    code, out = run("serve", "--cors-origin", "example.com", *db)
    assert code == 2 and "CORS origin" in out
    code, out = run("serve", "--log-level", "loud", *db)
    assert code == 2


def test_serve_process(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    with served(tmp_path, "--db", db) as (proc, url):
        wait_ready_process(proc, url)
        r = httpx.post(url + "/v1/uploads", files={"files": ("n.txt", b"Storks nest on roofs.")})
        assert r.status_code == 202, r.text
        job = r.json()["job"]["id"]
        with httpx.stream("GET", f"{url}/v1/jobs/{job}/events", timeout=30) as events:
            lines = [line for line in events.iter_lines() if line.startswith("event: ")]
        assert lines[-1] == "event: end"
        hits = httpx.get(url + "/v1/search", params={"query": "storks", "mode": "text"}).json()
        assert hits["hits"][0]["source"] == "upload://n.txt"
        assert "<title>surrealdocs</title>" in httpx.get(url + "/").text
        # another command on the served store is told where it is served
        code, out = run("stats", "--db", db, "--model", "hashing-64")
        assert code == 2 and "served by `surrealdocs serve` at http://127.0.0.1:" in out
        assert f"--server {url}/" in out
        # ... and goes through it with --server
        code, out = run("stats", "--server", url)
        assert code == 0 and "1" in out
        code, out = run("search", "storks", "--mode", "text", "--json", "--server", url)
        assert code == 0 and json.loads(out)[0]["source"] == "upload://n.txt"
        code, out = run("list", "--json", "--server", url)
        assert code == 0 and json.loads(out)["total"] == 1
        code, out = run("show", "upload://n.txt", "--json", "--server", url)
        assert code == 0 and json.loads(out)["source"] == "upload://n.txt"
        code, out = run("ask", "where do storks nest", "--server", url)
        assert code == 2 and "openai:MODEL" in out  # this server has no chat model
        code, out = run("sync", str(tmp_path), "--watch", "--server", url)
        assert code == 2 and "needs the store itself" in out  # watching needs the store
        code, out = run("delete", "upload://n.txt", "--dry-run", "--server", url)
        assert code == 0 and "would delete" in out
        code, out = run("delete", "upload://n.txt", "--server", url)
        assert code == 0
        code, out = run("list", "--json", "--server", url)
        assert json.loads(out)["total"] == 0
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        output = proc.stdout.read() if proc.stdout else ""
    assert "no API keys" in output and "loopback" in output
    assert (tmp_path / "db.uploads").is_dir() and not list((tmp_path / "db.uploads").iterdir())
    assert not (tmp_path / "db.serving").exists()


async def test_serve_exits_2_when_the_store_cannot_be_opened(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    async with await KnowledgeBase.open(db, model="hashing-64"):  # holds the store's lock
        def serve_it() -> tuple[int, str]:
            with served(tmp_path, "--db", db) as (proc, _):
                code = proc.wait(timeout=60)
                return code, proc.stdout.read() if proc.stdout else ""

        code, output = await asyncio.to_thread(serve_it)
    assert code == 2, output
    assert "error:" in output and "another process" in output
    assert "Traceback" not in output


def _dropped(url: str, method: str, body: dict | None, headers: dict[str, str],
             *, read: bool = False) -> str:
    """Send one request to /mcp/ over a raw socket and close it: at once, or once the
    head of the answer is read (``read``). Returns what was read."""
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(url)
    data = json.dumps(body).encode() if body is not None else b""
    head = (f"{method} /mcp/ HTTP/1.1\r\nHost: {where.netloc}\r\n"
            "Accept: application/json, text/event-stream\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n")
    with socket.create_connection((where.hostname, where.port), timeout=30) as s:
        s.sendall(head.encode() + data)
        return s.recv(65536).decode(errors="replace") if read else ""


def test_clients_that_leave_are_one_line_each(tmp_path: Path) -> None:
    """An MCP client that goes away mid-session (its event stream open, tool calls in
    flight) costs the server's log no line at the default level, and never a traceback."""
    db = str(tmp_path / "db")
    code, _ = run("ingest", "--db", db, "--model", "hashing-64", str(_note(tmp_path)))
    assert code == 0
    with served(tmp_path, "--db", db) as (proc, url):
        wait_ready_process(proc, url)
        answer = _dropped(url, "POST", {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "leaver", "version": "1"}}}, {}, read=True)
        session = next(line.split(":", 1)[1].strip() for line in answer.splitlines()
                       if line.lower().startswith("mcp-session-id:"))
        headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        _dropped(url, "POST", {"jsonrpc": "2.0", "method": "notifications/initialized"},
                 headers, read=True)
        for n in range(3):  # tool calls whose caller does not wait for the answer
            _dropped(url, "POST", {"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
                                   "params": {"name": "search",
                                              "arguments": {"query": "storks"}}}, headers)
        _dropped(url, "GET", None, headers, read=True)  # the event stream, then gone
        # the server is still well, and says the stream's client left
        assert httpx.get(url + "/v1/search", params={"query": "storks"}).status_code == 200
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        output = proc.stdout.read() if proc.stdout else ""
    assert "Traceback" not in output and "Error" not in output, output
    # a client that leaves is routine (a page that loads and moves on): logged at DEBUG only
    left = [line for line in output.splitlines() if "went away" in line]
    assert left == [], output


def _note(tmp_path: Path) -> Path:
    note = tmp_path / "storks.txt"
    note.write_text("Storks nest on roofs and chimneys.")
    return note


def test_ingest_goes_through_the_server_that_holds_the_store(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """Issue 43: while `serve` runs, `ingest --server URL` uploads the folder through the
    API and reports as a local ingest does (failures named, exit 1); again, nothing new."""
    db = str(tmp_path / "db")
    folder = tmp_path / "notes"
    (folder / "birds").mkdir(parents=True)
    (folder / "birds" / "storks.md").write_text("# Storks\n\nWhite storks nest on roofs.")
    (folder / "herons.txt").write_text("Grey herons stand in shallow water.")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.5 broken")
    monkeypatch.chdir(tmp_path)
    with served(tmp_path, "--db", db) as (proc, url):
        wait_ready_process(proc, url)
        code, out = run("ingest", "notes", "--db", db)  # the lock names the way
        assert code == 2 and f"--server {url}" in out
        result = CliRunner().invoke(app, ["ingest", "notes", "--server", url, "--json",
                                          "--meta", "team=birds"])
        assert result.exit_code == 1, result.output
        report = json.loads(result.stdout)
        by_source = {r["source"]: r for r in report["results"]}
        assert by_source["upload://notes/birds/storks.md"]["status"] == "ingested"
        assert by_source["upload://notes/herons.txt"]["status"] == "ingested"
        assert by_source["upload://notes/broken.pdf"]["status"] == "failed"
        assert "PDF" in by_source["upload://notes/broken.pdf"]["reason"]
        (folder / "herons.txt").write_text("Grey herons stand in shallow water, still.")
        again = CliRunner().invoke(app, ["ingest", "notes", "--server", url, "--json"])
        counts = json.loads(again.stdout)["counts"]
        assert again.exit_code == 1
        assert counts["unchanged"] == 1 and counts["updated"] == 1 and counts["failed"] == 1
        failures = httpx.get(url + "/v1/failures").json()
        assert failures["total"] == 1
        assert failures["failures"][0]["source"] == "upload://notes/broken.pdf"
        code, out = run("list", "--failed", "--server", url)
        assert code == 0 and "notes/broken.pdf" in out
        hits = httpx.get(url + "/v1/search", params={"query": "storks nest", "mode": "text"})
        assert hits.json()["hits"][0]["source"] == "upload://notes/birds/storks.md"
        assert httpx.get(url + "/v1/stats").json()["documents"] == 2  # replaced, not copied
        # metadata through the server: set by the upload, changed by `meta`, filtered on
        code, out = run("meta", "upload://notes/herons.txt", "team=waders", "--server", url)
        assert code == 0 and "team: waders" in out, out
        code, out = run("search", "storks herons", "--mode", "text", "--json",
                        "--where", "team=birds", "--server", url)
        assert code == 0, out
        assert [h["source"] for h in json.loads(out)] == ["upload://notes/birds/storks.md"]


def test_notebook_commands_and_add_go_through_the_server(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """Issue 43: while `serve` runs, `notebook create|list|show|delete` and `add` work with
    --server as they do on a store of their own (they said the store was locked before)."""
    folder = tmp_path / "birds"
    folder.mkdir()
    (folder / "storks.md").write_text("# Storks\n\nWhite storks nest on roofs.")
    monkeypatch.chdir(tmp_path)
    with served(tmp_path, "--db", str(tmp_path / "db")) as (proc, url):
        wait_ready_process(proc, url)
        runner = CliRunner()
        made = runner.invoke(app, ["notebook", "create", "Waders", "--description", "tall",
                                   "--server", url, "--json"])
        assert made.exit_code == 0, made.output
        assert json.loads(made.stdout)["name"] == "Waders"
        added = runner.invoke(app, ["add", "Birds", "birds", "--topic", "rookery",
                                    "--server", url, "--json"])  # Birds made on use
        assert added.exit_code == 0, added.output
        assert json.loads(added.stdout)["counts"]["ingested"] == 1
        listed = json.loads(runner.invoke(app, ["notebook", "list", "--server", url,
                                                "--json"]).stdout)
        assert {nb["name"]: nb["source_count"] for nb in listed} == {"Waders": 0, "Birds": 1}
        shown = runner.invoke(app, ["notebook", "show", "Birds", "--server", url, "--json"])
        assert shown.exit_code == 0, shown.output
        (source,) = json.loads(shown.stdout)["sources"]
        assert source["source"] == "upload://birds/storks.md" and source["topics"] == ["rookery"]
        hits = runner.invoke(app, ["search", "storks", "--mode", "text", "--notebook", "Birds",
                                   "--server", url, "--json"])
        assert json.loads(hits.stdout)[0]["source"] == "upload://birds/storks.md"
        gone = runner.invoke(app, ["notebook", "delete", "Waders", "--server", url])
        assert gone.exit_code == 0, gone.output
        left = json.loads(runner.invoke(app, ["notebook", "list", "--server", url,
                                              "--json"]).stdout)
        assert [nb["name"] for nb in left] == ["Birds"]



def test_export_through_the_server_while_it_serves(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41: `export --server URL` (GET /v1/export) streams an archive of the store the
    server holds, without stopping it; it imports into a store that answers alike."""
    db = str(tmp_path / "db")
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(30):
        (folder / f"note{i}.txt").write_text(f"Note {i}: herons and storks, number {i}. " * 20)
    monkeypatch.chdir(tmp_path)
    with served(tmp_path, "--db", db) as (proc, url):
        wait_ready_process(proc, url)
        result = CliRunner().invoke(app, ["ingest", "notes", "--server", url])
        assert result.exit_code == 0, result.output
        result = CliRunner().invoke(app, ["export", "kb.tar", "--server", url])
        assert result.exit_code == 0, result.output
        assert "exported 30 documents" in result.output
        hits = httpx.get(url + "/v1/search", params={"query": "number 7", "mode": "text"})
        assert hits.status_code == 200  # still serving
        served_hits = [h["source"] for h in hits.json()["hits"]]
    code, out = run("import", "kb.tar", "--db", str(tmp_path / "copy"))
    assert code == 0 and "imported 30 documents" in out, out
    code, out = run("search", "number 7", "--db", str(tmp_path / "copy"), "--mode", "text",
                    "--json")
    assert code == 0, out
    assert [h["source"] for h in json.loads(out)] == served_hits


def test_sync_goes_through_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43: `sync --server URL` mirrors a folder into the server's upload:// sources:
    new and changed files uploaded, unchanged ones not sent (compared by SHA-256), vanished
    ones forgotten; the glob picks both the files and the sources it answers for."""
    db = str(tmp_path / "db")
    folder = tmp_path / "notes"
    (folder / "birds").mkdir(parents=True)
    (folder / "birds" / "storks.md").write_text("# Storks\n\nWhite storks nest on roofs.")
    (folder / "herons.txt").write_text("Grey herons stand in shallow water.")
    (folder / "old.txt").write_text("Old notes about ospreys.")
    (folder / "skip.csv").write_text("a,b\n1,2\n")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    with served(tmp_path, "--db", db) as (proc, url):
        wait_ready_process(proc, url)
        first = runner.invoke(app, ["sync", "notes", "--glob", "**/*.*[dt]", "--server", url,
                                    "--json", "--meta", "team=birds"])
        assert first.exit_code == 0, first.output
        statuses = {r["source"]: r["status"] for r in json.loads(first.stdout)["results"]}
        assert statuses == {"upload://notes/birds/storks.md": "ingested",
                            "upload://notes/herons.txt": "ingested",
                            "upload://notes/old.txt": "ingested"}
        (folder / "herons.txt").write_text("Grey herons stand still in shallow water.")
        (folder / "old.txt").unlink()
        plan = runner.invoke(app, ["sync", "notes", "--glob", "**/*.*[dt]", "--dry-run",
                                   "--server", url, "--json"])
        planned = json.loads(plan.stdout)
        assert planned["planned"]["unchanged"] == 1
        assert {c["source"]: c["action"] for c in planned["changes"]} == {
            "upload://notes/herons.txt": "update", "upload://notes/old.txt": "delete"}
        again = runner.invoke(app, ["sync", "notes", "--glob", "**/*.*[dt]", "--server", url,
                                    "--json"])
        assert again.exit_code == 0, again.output
        statuses = {r["source"]: r["status"] for r in json.loads(again.stdout)["results"]}
        assert statuses == {"upload://notes/birds/storks.md": "unchanged",
                            "upload://notes/herons.txt": "updated",
                            "upload://notes/old.txt": "deleted"}
        sources = httpx.get(url + "/v1/documents").json()["documents"]
        assert sorted(d["source"] for d in sources) == ["upload://notes/birds/storks.md",
                                                        "upload://notes/herons.txt"]
        code, out = run("list", "--where", "team=birds", "--json", "--server", url)
        assert code == 0 and json.loads(out)["total"] == 2, out
